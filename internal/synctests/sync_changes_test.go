package synctests_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/remote"
	"github.com/wsstore/wsstore/remote/s3fake"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// TestSyncExaminesWhatChanged: a sync after one run changed reads that
// run, not every run the store holds: it runs as many statements in a
// store of 120 runs as in one of 20, and none over the whole runs table.
func TestSyncExaminesWhatChanged(t *testing.T) {
	awsTestEnv(t)
	srv := s3fake.New("wsstore")
	t.Cleanup(srv.Close)
	ctx := context.Background()
	sync := func(n int) []string {
		var rec storetest.Statements
		st, err := wsstore.Open(ctx, t.TempDir(), wsstore.Options{Blobs: fmt.Sprintf("s3://wsstore/n%d?endpoint=%s", n, srv.URL),
			Index: index.Options{Trace: rec.Trace},
			// the background re-encoder stays out of the count
			CAS:    cas.Options{ReencodeIdle: time.Hour},
			Remote: remote.Options{PackSize: 64 << 10, MaxAttempts: 2, MaxBackoff: 10 * time.Millisecond}})
		require.NoError(t, err)
		t.Cleanup(func() { st.Close() })
		smallRuns(t, st, "c", "r", n)
		syncOK(t, st)
		_, err = st.Runs.Workspace("r-07", runs.ModelScope).Write(ctx, vfs.MustPath("output/0.md"), []byte("changed\n"), vfs.WriteOptions{})
		require.NoError(t, err)
		var rep wsstore.SyncReport
		stmts := rec.Record(func() { rep = syncOK(t, st) })
		assert.Equal(t, []string{"run r-07"}, rep.Sent)
		idle := rec.Record(func() { rep = syncOK(t, st) })
		assert.Empty(t, rep.Sent, "a sync right after sends nothing")
		return append(stmts, idle...)
	}
	small, large := sync(20), sync(120)
	for _, q := range large {
		assert.NotContains(t, q, "FROM runs ORDER BY", "a sync lists no table of runs")
		assert.NotContains(t, q, "FROM runs WHERE ? = ''", "a sync lists no table of runs")
	}
	assert.Equal(t, len(small), len(large), "statements of a sync of one changed run among 20 and among 120")
}

// TestSyncSendsWhatChangedMeanwhile: a change is sent by some later sync
// whatever became of the sync that first saw it: one whose segment the
// object store refused, or one that took in another device's deletion
// of a run changed here and kept the run.
func TestSyncSendsWhatChangedMeanwhile(t *testing.T) {
	srv, open := fakeTier(t)
	ctx := context.Background()
	a, b := open(), open()
	smallRuns(t, a, "c", "a", 3)
	syncOK(t, a)
	syncOK(t, b)

	write := func(st *wsstore.Store, run, text string) {
		t.Helper()
		_, err := st.Runs.Workspace(run, runs.ModelScope).Write(ctx, vfs.MustPath("output/0.md"), []byte(text), vfs.WriteOptions{})
		require.NoError(t, err)
	}
	read := func(st *wsstore.Store, run string) string {
		t.Helper()
		got, err := st.Runs.Workspace(run, runs.HostScope).Read(ctx, vfs.MustPath("output/0.md"), vfs.ReadOptions{})
		require.NoError(t, err)
		return string(got.Content)
	}

	t.Run("AfterARefusedSegment", func(t *testing.T) {
		write(a, "a-01", "first change\n")
		srv.SetFault(func(r *http.Request) int {
			if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/team/sync/") {
				return http.StatusServiceUnavailable
			}
			return 0
		})
		_, err := a.Sync(ctx)
		require.Error(t, err)
		srv.SetFault(nil)
		rep := syncOK(t, a)
		assert.Equal(t, []string{"run a-01"}, rep.Sent)
		syncOK(t, b)
		assert.Equal(t, "first change\n", read(b, "a-01"))
	})

	t.Run("KeptAgainstADeletion", func(t *testing.T) {
		syncOK(t, a)
		syncOK(t, b)
		// b sends a change that a deletes without having seen it: b
		// keeps the run, and sends it again though nothing changed here
		// since.
		write(b, "a-02", "changed on b\n")
		syncOK(t, b)
		_, err := a.Runs.CancelAndDeleteRun(ctx, "a-02")
		require.NoError(t, err)
		syncOK(t, a)
		rep := syncOK(t, b)
		require.NotEmpty(t, rep.Conflicts, "b keeps the run it changed")
		assert.Contains(t, rep.Sent, "run a-02", "and sends it again")
		syncOK(t, a)
		assert.Equal(t, "changed on b\n", read(a, "a-02"))
	})
}

// TestSyncChangeDuringASync: a change made while a sync runs, after it
// claimed what to examine, is examined by the next sync, even though the
// first one settles what it claimed; so is one another sync claimed
// meanwhile and never settled.
func TestSyncChangeDuringASync(t *testing.T) {
	_, open := fakeTier(t)
	ctx := context.Background()
	st := open()
	smallRuns(t, st, "c", "r", 2)
	syncOK(t, st)
	ws := st.Runs.Workspace("r-01", runs.ModelScope)
	_, err := ws.Write(ctx, vfs.MustPath("output/0.md"), []byte("before the claim\n"), vfs.WriteOptions{})
	require.NoError(t, err)

	claimed, err := st.Remote.ClaimChanges(ctx, st.DB)
	require.NoError(t, err)
	assert.Equal(t, []string{"run r-01"}, claimed.Names)
	assert.False(t, claimed.All)
	_, err = ws.Write(ctx, vfs.MustPath("output/0.md"), []byte("after the claim\n"), vfs.WriteOptions{})
	require.NoError(t, err)
	require.NoError(t, st.Remote.SettleChanges(ctx, st.DB, claimed))

	again, err := st.Remote.ClaimChanges(ctx, st.DB)
	require.NoError(t, err)
	assert.Equal(t, []string{"run r-01"}, again.Names, "the change after the claim is still to examine")
	require.NoError(t, st.Remote.SettleChanges(ctx, st.DB, again))
	none, err := st.Remote.ClaimChanges(ctx, st.DB)
	require.NoError(t, err)
	assert.Empty(t, none.Names)

	// Two syncs at once: the first claims a change; a second change and
	// a second sync's claim come while it publishes, and that sync dies.
	// The first settles what it claimed, and the second change is still
	// to examine.
	_, err = ws.Write(ctx, vfs.MustPath("output/0.md"), []byte("seen by the first sync\n"), vfs.WriteOptions{})
	require.NoError(t, err)
	first, err := st.Remote.ClaimChanges(ctx, st.DB)
	require.NoError(t, err)
	assert.Equal(t, []string{"run r-01"}, first.Names)
	_, err = ws.Write(ctx, vfs.MustPath("output/0.md"), []byte("seen by the second sync, which died\n"), vfs.WriteOptions{})
	require.NoError(t, err)
	second, err := st.Remote.ClaimChanges(ctx, st.DB)
	require.NoError(t, err)
	assert.Equal(t, []string{"run r-01"}, second.Names)
	require.NoError(t, st.Remote.SettleChanges(ctx, st.DB, first))
	left, err := st.Remote.ClaimChanges(ctx, st.DB)
	require.NoError(t, err)
	assert.Equal(t, []string{"run r-01"}, left.Names, "the dead sync's claim is still to examine")
}

// TestRestoredStoreKeepsItsSourcesDeletions: a store restored from a
// device's database (its replica) after that device deleted a chat it had
// synced, and before it synced again, publishes the deletion as a device
// of its own: the chat does not come back from the source's segments,
// here or on a device that starts later.
func TestRestoredStoreKeepsItsSourcesDeletions(t *testing.T) {
	srv, open := fakeTier(t)
	ctx := context.Background()
	a := open()
	chat := runs.ChatKey{Kind: "character", StableChatID: "gone"}
	_, err := a.Runs.CreateRun(ctx, runs.CreateRequest{Chat: chat, RunID: "doomed"})
	require.NoError(t, err)
	smallRuns(t, a, "kept", "k", 1)
	syncOK(t, a)
	_, err = a.Runs.DeleteChats(ctx, []runs.ChatKey{chat}, true)
	require.NoError(t, err)

	// The replica: a's database as it stands, in another directory.
	dir := t.TempDir()
	require.NoError(t, a.DB.Exec(ctx, `VACUUM INTO '`+filepath.Join(dir, wsstore.DBName)+`'`))
	b, err := wsstore.Open(ctx, dir, wsstore.Options{Remote: remote.Options{PackSize: 64 << 10, MaxAttempts: 2, MaxBackoff: 10 * time.Millisecond}})
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	before, err := remote.Device(ctx, a.DB)
	require.NoError(t, err)
	require.NoError(t, b.ResetDevice(ctx))
	after, err := remote.Device(ctx, b.DB)
	require.NoError(t, err)
	assert.NotEqual(t, before, after, "the restored store is a device of its own")

	rep := syncOK(t, b)
	assert.Contains(t, rep.Tombstones, "chat "+runs.ChatWorkspaceID(chat), "it publishes the source's deletion")
	_, err = b.Runs.Run(ctx, "doomed")
	assert.Equal(t, wserr.RunNotFound, wserr.CodeOf(err), "the deleted run does not come back here")

	c := open()
	syncOK(t, c)
	_, err = c.Runs.Run(ctx, "doomed")
	assert.Equal(t, wserr.RunNotFound, wserr.CodeOf(err), "nor on a device that starts later")
	_, err = c.Runs.Run(ctx, "k-00")
	assert.NoError(t, err)
	_ = srv
}

// TestRestoredStoreDeletesBeforeItsFirstSync: a run and a chat the source
// had synced, deleted in the restored store before its first sync, are
// published as deleted by that sync: they do not come back from the
// source's segments, here or on the other devices.
func TestRestoredStoreDeletesBeforeItsFirstSync(t *testing.T) {
	_, open := fakeTier(t)
	ctx := context.Background()
	a := open()
	chat := runs.ChatKey{Kind: "character", StableChatID: "gone"}
	_, err := a.Runs.CreateRun(ctx, runs.CreateRequest{Chat: chat, RunID: "in-gone"})
	require.NoError(t, err)
	smallRuns(t, a, "kept", "k", 3)
	syncOK(t, a)
	peer := open()
	syncOK(t, peer)
	_, err = peer.Runs.Run(ctx, "k-01")
	require.NoError(t, err, "the peer holds what the source synced")

	dir := t.TempDir()
	require.NoError(t, a.DB.Exec(ctx, `VACUUM INTO '`+filepath.Join(dir, wsstore.DBName)+`'`))
	b, err := wsstore.Open(ctx, dir, wsstore.Options{Remote: remote.Options{PackSize: 64 << 10, MaxAttempts: 2, MaxBackoff: 10 * time.Millisecond}})
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	require.NoError(t, b.ResetDevice(ctx))
	_, err = b.Runs.CancelAndDeleteRun(ctx, "k-01")
	require.NoError(t, err)
	_, err = b.Runs.DeleteChats(ctx, []runs.ChatKey{chat}, true)
	require.NoError(t, err)

	rep := syncOK(t, b)
	assert.ElementsMatch(t, []string{"run k-01", "run in-gone", "chat " + runs.ChatWorkspaceID(chat)}, rep.Tombstones,
		"the restored store publishes its own deletions")
	assert.Empty(t, rep.Conflicts)
	for _, st := range []*wsstore.Store{b, peer, a, open()} {
		rep := syncOK(t, st)
		assert.Empty(t, rep.Conflicts)
		for _, id := range []string{"k-01", "in-gone"} {
			_, err = st.Runs.Run(ctx, id)
			assert.Equal(t, wserr.RunNotFound, wserr.CodeOf(err), "run %s stays deleted on device %s", id, rep.Device)
		}
		for _, id := range []string{"k-00", "k-02"} {
			_, err = st.Runs.Run(ctx, id)
			assert.NoError(t, err, "run %s is kept on device %s", id, rep.Device)
		}
	}
}

// TestPullKeepsUnsyncedChanges: a pull publishes the store's object set,
// not its metadata, so it forgets no change it did not claim: a run
// created after the last sync is still sent by the next one and reaches
// the other device, and a change made after another sync's claim is
// still to examine once that sync settles.
func TestPullKeepsUnsyncedChanges(t *testing.T) {
	_, open := fakeTier(t)
	ctx := context.Background()
	a, b := open(), open()
	smallRuns(t, a, "chat-a", "x", 2)
	syncOK(t, a)
	syncOK(t, b)

	t.Run("ThenSynced", func(t *testing.T) {
		smallRuns(t, b, "chat-b", "y", 1)
		_, err := b.PullRemote(ctx)
		require.NoError(t, err)
		rep := syncOK(t, b)
		assert.Contains(t, rep.Sent, "run y-00", "the pull left the change to send")
		got := syncOK(t, a)
		assert.Equal(t, []string{"run y-00"}, runsOf(got, got.Added))
		_, err = a.Runs.Run(ctx, "y-00")
		assert.NoError(t, err, "a holds b's run")
	})

	t.Run("BesideASync", func(t *testing.T) {
		smallRuns(t, b, "chat-b", "z", 1)
		syncOK(t, b)
		syncOK(t, a)
		// Another process's sync claims a change (the sync lock is shared:
		// it does not keep a pull out); a second change and a pull come
		// while it publishes; it settles what it claimed.
		ws := b.Runs.Workspace("z-00", runs.ModelScope)
		_, err := ws.Write(ctx, vfs.MustPath("output/0.md"), []byte("seen by the sync\n"), vfs.WriteOptions{})
		require.NoError(t, err)
		claimed, err := b.Remote.ClaimChanges(ctx, b.DB)
		require.NoError(t, err)
		require.Equal(t, []string{"run z-00"}, claimed.Names)
		_, err = ws.Write(ctx, vfs.MustPath("output/0.md"), []byte("after the claim\n"), vfs.WriteOptions{})
		require.NoError(t, err)
		_, err = b.PullRemote(ctx)
		require.NoError(t, err)
		require.NoError(t, b.Remote.SettleChanges(ctx, b.DB, claimed))
		rep := syncOK(t, b)
		assert.Contains(t, rep.Sent, "run z-00", "the change after the claim is sent")
		syncOK(t, a)
		got, err := a.Runs.Workspace("z-00", runs.HostScope).Read(ctx, vfs.MustPath("output/0.md"), vfs.ReadOptions{})
		require.NoError(t, err)
		assert.Equal(t, "after the claim\n", string(got.Content))
	})
}

// TestSyncWhileTheRunIsWritten: a run written while its device publishes
// is recorded as synced at the state the segment carried (or an earlier
// one), never at one written after the export, so the next sync's tail
// starts where the other device holds the run. Before, a write between
// the export and the record made the other device refuse every later tail
// of the run ("holds fewer events"): a conflict named on every sync while
// only one device wrote, the run never brought forward there.
func TestSyncWhileTheRunIsWritten(t *testing.T) {
	srv, open := fakeTier(t)
	ctx := context.Background()
	// The store's clock writes to the run when the sync reads it to date
	// its segment: after the export, before the record.
	var a *wsstore.Store
	var armed atomic.Bool
	now := func() time.Time {
		if armed.Load() && calledFrom("github.com/wsstore/wsstore.(*Store).publish") {
			armed.Store(false)
			_, err := a.Runs.Workspace("r-00", runs.ModelScope).Write(ctx, vfs.MustPath("output/meanwhile.md"), []byte("written as the segment is dated\n"), vfs.WriteOptions{})
			require.NoError(t, err)
		}
		return time.Now()
	}
	a, err := wsstore.Open(ctx, t.TempDir(), wsstore.Options{Blobs: "s3://wsstore/team?endpoint=" + srv.URL, Now: now,
		Remote: remote.Options{PackSize: 64 << 10, MaxAttempts: 2, MaxBackoff: 10 * time.Millisecond}})
	require.NoError(t, err)
	t.Cleanup(func() { a.Close() })
	b := open()
	smallRuns(t, a, "c", "r", 10)
	syncOK(t, a)
	syncOK(t, b)

	ws := a.Runs.Workspace("r-00", runs.ModelScope)
	_, err = ws.Write(ctx, vfs.MustPath("output/0.md"), []byte("changed\n"), vfs.WriteOptions{})
	require.NoError(t, err)
	armed.Store(true)
	rep := syncOK(t, a)
	require.False(t, armed.Load(), "the clock wrote")
	require.False(t, rep.Base)
	assert.Empty(t, syncOK(t, b).Conflicts)
	for i := range 2 {
		_, err = ws.Write(ctx, vfs.MustPath("output/0.md"), []byte(fmt.Sprint("later ", i, "\n")), vfs.WriteOptions{})
		require.NoError(t, err)
		require.False(t, syncOK(t, a).Base, "a tail")
		assert.Empty(t, syncOK(t, b).Conflicts, "B takes in the tail")
	}
	ra, err := a.Runs.Run(ctx, "r-00")
	require.NoError(t, err)
	rb, err := b.Runs.Run(ctx, "r-00")
	require.NoError(t, err)
	assert.Equal(t, ra.Root, rb.Root)
}

// calledFrom reports whether the function that called its caller is fn.
func calledFrom(fn string) bool {
	pc := make([]uintptr, 2)
	frames := runtime.CallersFrames(pc[:runtime.Callers(3, pc)])
	for {
		f, more := frames.Next()
		// The store's clock is the host's, checked (index.Clock).
		if f.Function != "github.com/wsstore/wsstore/index.(*Clock).Now" || !more {
			return f.Function == fn
		}
	}
}
