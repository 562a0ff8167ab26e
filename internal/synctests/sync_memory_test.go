package synctests_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/remote"
	"github.com/wsstore/wsstore/remote/s3fake"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

// storeOfRuns opens a store and makes n runs in one chat in it.
func storeOfRuns(t *testing.T, open func() *wsstore.Store, n int) *wsstore.Store {
	ctx := context.Background()
	st := open()
	for i := range n {
		_, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "c"},
			RunID: fmt.Sprintf("r-%06d", i)})
		require.NoError(t, err)
	}
	return st
}

// TestSyncChatConflictNamesAFewRuns: a chat deleted on one device while
// another started runs in it is a conflict that names the first three of
// those runs and counts the others, however many there are.
func TestSyncChatConflictNamesAFewRuns(t *testing.T) {
	_, open := fakeTier(t)
	ctx := context.Background()
	a, b := open(), open()
	chat := runs.ChatKey{Kind: "character", StableChatID: "chat-1"}
	smallRuns(t, a, "chat-1", "s", 1)
	syncOK(t, a)
	syncOK(t, b)
	_, err := a.Runs.DeleteChats(ctx, []runs.ChatKey{chat}, true)
	require.NoError(t, err)
	for i := range 5 {
		_, err := b.Runs.CreateRun(ctx, runs.CreateRequest{Chat: chat, RunID: fmt.Sprintf("late-%02d", i)})
		require.NoError(t, err)
	}
	dev := syncOK(t, a).Device
	rb := syncOK(t, b)
	require.Equal(t, []string{"chat " + runs.ChatWorkspaceID(chat)}, conflictNames(rb.Conflicts))
	assert.Equal(t, "deleted on device "+dev+", but here it holds runs the deletion did not: late-00, late-01, late-02, and 2 more",
		rb.Conflicts[0].Reason)
	assert.Len(t, runIDs(t, b), 5, "b's runs stay")
}

// TestSyncTakingInABaseLooksUpNoItemByName: a device reading another's
// base looks up the synced state of what its tombstones name, not of
// every item the base brought: its first sync runs no lookup of one item
// in the synced items when the base carries no deletion.
func TestSyncTakingInABaseLooksUpNoItemByName(t *testing.T) {
	awsTestEnv(t)
	srv := s3fake.New("wsstore")
	t.Cleanup(srv.Close)
	ctx := context.Background()
	open := func(trace func(string)) *wsstore.Store {
		st, err := wsstore.Open(ctx, t.TempDir(), wsstore.Options{Blobs: "s3://wsstore/team?endpoint=" + srv.URL,
			Index: index.Options{Trace: trace}, Remote: remote.Options{PackSize: 64 << 10, MaxAttempts: 2, MaxBackoff: 10 * time.Millisecond}})
		require.NoError(t, err)
		t.Cleanup(func() { st.Close() })
		return st
	}
	a := open(nil)
	for i := range 20 {
		_, err := a.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "c"}, RunID: fmt.Sprintf("r-%02d", i)})
		require.NoError(t, err)
	}
	syncOK(t, a)
	var rec storetest.Statements
	b := open(rec.Trace)
	var rep wsstore.SyncReport
	lookups := 0
	for _, q := range rec.Record(func() { rep = syncOK(t, b) }) {
		if strings.Contains(q, "FROM sync_items WHERE remote = ? AND kind = ? AND id = ?") {
			lookups++
		}
	}
	assert.Len(t, rep.Added, 21, "the chat and its 20 runs")
	assert.Zero(t, lookups, "lookups of one synced item")
}

// TestSyncReportNamesAThousandSent: a sync that sends more than
// wsstore.MaxSentNames items names the first of them, in name order, and
// counts them all.
func TestSyncReportNamesAThousandSent(t *testing.T) {
	_, open := fakeTier(t)
	n := wsstore.MaxSentNames + 5
	st := storeOfRuns(t, open, n)
	rep := syncOK(t, st)
	assert.Equal(t, n+1, rep.SentCount, "the chat and its runs")
	require.Len(t, rep.Sent, wsstore.MaxSentNames)
	assert.True(t, strings.HasPrefix(rep.Sent[0], "chat "), rep.Sent[0])
	assert.Equal(t, "run r-000000", rep.Sent[1])
	assert.Equal(t, fmt.Sprintf("run r-%06d", wsstore.MaxSentNames-2), rep.Sent[wsstore.MaxSentNames-1])
	rep = syncOK(t, st)
	assert.Zero(t, rep.SentCount, "nothing changed since")
	assert.Empty(t, rep.Sent)
}

// TestSyncReportNamesAThousandTakenIn: a sync that takes in more than
// wsstore.MaxTakenNames items names the first of them, in the order they
// were taken in, and counts them all.
func TestSyncReportNamesAThousandTakenIn(t *testing.T) {
	_, open := fakeTier(t)
	n := wsstore.MaxTakenNames + 5
	a := storeOfRuns(t, open, n)
	syncOK(t, a)
	b := open()
	rep := syncOK(t, b)
	assert.Equal(t, n+1, rep.AddedCount, "the chat and its runs")
	require.Len(t, rep.Added, wsstore.MaxTakenNames)
	assert.True(t, strings.HasPrefix(rep.Added[0], "chat "), rep.Added[0])
	assert.Equal(t, "run r-000000", rep.Added[1])
	assert.Equal(t, fmt.Sprintf("run r-%06d", wsstore.MaxTakenNames-2), rep.Added[wsstore.MaxTakenNames-1])
	assert.Zero(t, rep.UpdatedCount)
	rb, err := b.Runs.Runs(context.Background(), runs.ListQuery{})
	require.NoError(t, err)
	assert.Len(t, rb, n, "every run taken in")

	// Every run written on a is brought forward on b.
	for i := range n {
		_, err := a.Runs.Workspace(fmt.Sprintf("r-%06d", i), runs.ModelScope).Write(context.Background(),
			vfs.MustPath("output/a.md"), []byte("a"), vfs.WriteOptions{})
		require.NoError(t, err)
	}
	syncOK(t, a)
	rep = syncOK(t, b)
	assert.Equal(t, n, rep.UpdatedCount)
	require.Len(t, rep.Updated, wsstore.MaxTakenNames)
	assert.Equal(t, "run r-000000", rep.Updated[0])
	assert.Zero(t, rep.AddedCount)
	assert.Empty(t, rep.Added)
	assert.Empty(t, syncOK(t, b).TookIn, "nothing more to take in")
}

// syncGrowth makes a store of n runs in one chat and returns how much
// the heap grew during its first sync, which publishes a base of every
// run; during a next sync that examines every item (as the first sync
// after the upgrade that brought the change marks does) and finds
// nothing to send; and during a new device's first sync, which takes in
// that base.
func syncGrowth(t *testing.T, open func() *wsstore.Store, n int) (first, examine, takeIn uint64) {
	ctx := context.Background()
	st := storeOfRuns(t, open, n)
	var rep wsstore.SyncReport
	first = storetest.HeapGrowth(func() { rep = syncOK(t, st) })
	require.True(t, rep.Base)
	require.NoError(t, st.DB.Update(ctx, func(tx *index.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE sync_remotes SET full = 1`)
		return err
	}))
	examine = storetest.HeapGrowth(func() { rep = syncOK(t, st) })
	assert.Empty(t, rep.Sent, "nothing changed since the last sync")
	assert.Empty(t, rep.Published)
	b := open()
	takeIn = storetest.HeapGrowth(func() { rep = syncOK(t, b) })
	require.Len(t, rep.TookIn, 1)
	require.Equal(t, n+1, rep.AddedCount)
	return first, examine, takeIn
}

// TestSyncHoldsAPageOfItems: a first sync, which publishes a base of
// every item, holds a page of the items it carries, not the list of
// them; a sync that examines every item (the first through a remote, the
// first after restore or after the upgrade that brought the change marks)
// compares the items with their synced states as two streams in name
// order; a device taking in another's base holds a page of the items it
// brought. The heap of each grows as much over 10,000 runs as over 1,000
// (two pages of each kind or more), beyond the archive's list of run ids
// and a small constant.
func TestSyncHoldsAPageOfItems(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a store of 10,000 runs")
	}
	awsTestEnv(t)
	m := s3fake.StartMoto(t)
	m.CreateBucket("wsstore")
	const n = 1000
	firstSmall, examineSmall, takeInSmall := syncGrowth(t, tierOpener(t, m.URL, "small"), n)
	firstLarge, examineLarge, takeInLarge := syncGrowth(t, tierOpener(t, m.URL, "large"), 10*n)
	t.Logf("a first sync: heap grew by %.2f MiB at %d runs, %.2f MiB at %d", float64(firstSmall)/(1<<20), n, float64(firstLarge)/(1<<20), 10*n)
	t.Logf("a sync examining every item: heap grew by %.2f MiB at %d runs, %.2f MiB at %d", float64(examineSmall)/(1<<20), n, float64(examineLarge)/(1<<20), 10*n)
	t.Logf("taking in a base: heap grew by %.2f MiB at %d runs, %.2f MiB at %d", float64(takeInSmall)/(1<<20), n, float64(takeInLarge)/(1<<20), 10*n)
	// The items a first sync carries are listed on disk beyond a page:
	// what still grows is the archive's list of run ids, some 75 bytes a
	// run, and the garbage between collections, up to about a MiB (1.1
	// MiB more in all). The items held in memory, twice over, took 7.2
	// MiB more.
	assert.Less(t, int64(firstLarge)-int64(firstSmall), int64(5<<19), "first sync: the heap grows with the runs")
	// The garbage a sync leaves between collections moves the figures by
	// up to about a MiB (0.3 MiB more); the synced states read as one
	// page took 3.3 MiB more, the two maps of every item it held before
	// more still.
	assert.Less(t, int64(examineLarge)-int64(examineSmall), int64(3<<19), "examining every item: the heap grows with the runs")
	// What a base brought is listed on disk beyond a page: what still
	// grows is the manifest's list of run ids and the import's map of
	// them, some 75 bytes a run, and the garbage between collections, up
	// to about a MiB. The names and states held in memory took some 4
	// MiB more at 10,000 runs.
	assert.Less(t, int64(takeInLarge)-int64(takeInSmall), int64(5<<19), "taking in a base: the heap grows with the runs")
}
