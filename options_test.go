package wsstore_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/actors"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/remote"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/tokens"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// TestOpenRefusesBadOptionsFirst: every option Open refuses is refused
// with store.invalid_options before anything is created: no directory,
// no database. A store directory that is a file is the caller's mistake
// too.
func TestOpenRefusesBadOptionsFirst(t *testing.T) {
	ctx := context.Background()
	for name, opts := range map[string]wsstore.Options{
		"ErrProfile":          {Profile: "tablet"},
		"ErrCASLevel":         {CAS: cas.Options{Level: 99}},
		"ErrBlobsURL":         {Blobs: "ftp://x"},
		"ErrSynchronous":      {Index: index.Options{Synchronous: "sometimes"}},
		"ErrBusyTimeout":      {Index: index.Options{BusyTimeout: -1}},
		"ErrReadConns":        {Index: index.Options{ReadConns: -1}},
		"ErrNegativeStoreCap": {Runs: runs.Options{MaxStoreBytes: -5}},
		"ErrTreeCache":        {TreeCacheEntries: -1},
		"ErrCASMaxPending":    {CAS: cas.Options{MaxPending: -1}},
		"ErrRemotePackSize":   {Remote: remote.Options{PackSize: -1}},
		"ErrRemoteAttempts":   {Remote: remote.Options{MaxAttempts: -1}},
	} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "store")
			_, err := wsstore.Open(ctx, dir, opts)
			assert.Equal(t, wserr.InvalidOptions, wserr.CodeOf(err), "%v", err)
			assert.NoDirExists(t, dir, "nothing created")
		})
	}
	t.Run("ErrEmptyDir", func(t *testing.T) {
		_, err := wsstore.Open(ctx, "", wsstore.Options{})
		assert.Equal(t, wserr.InvalidOptions, wserr.CodeOf(err), "%v", err)
	})
	t.Run("ErrDirIsAFile", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "file")
		require.NoError(t, os.WriteFile(file, []byte("x"), 0o644))
		for _, dir := range []string{file, filepath.Join(file, "below")} {
			_, err := wsstore.Open(ctx, dir, wsstore.Options{})
			assert.Equal(t, wserr.InvalidOptions, wserr.CodeOf(err), "%s: %v", dir, err)
			_, err = wsstore.Open(ctx, dir, wsstore.Options{Index: index.Options{ReadOnly: true}})
			assert.Equal(t, wserr.InvalidOptions, wserr.CodeOf(err), "read-only %s: %v", dir, err)
		}
	})
	t.Run("ErrDirNoDirectoryCanBe", func(t *testing.T) {
		// a NUL, a name longer than the file system takes, a parent that
		// holds no directories: each a coded error, never store.internal
		base := t.TempDir()
		for _, dir := range []string{filepath.Join(base, "a\x00b"), filepath.Join(base, strings.Repeat("d", 300)), "/proc/wsstore-store"} {
			_, err := wsstore.Open(ctx, dir, wsstore.Options{})
			var e *wserr.Error
			require.ErrorAs(t, err, &e, "%q", dir)
			assert.Equal(t, wserr.InvalidOptions, e.Code, "%q: %v", dir, err)
		}
	})
}

// TestOpenKeepsRunsMobile: a host that asks for the mobile policy through
// runs.Options, not the profile, gets it.
func TestOpenKeepsRunsMobile(t *testing.T) {
	ctx := context.Background()
	st, err := wsstore.Open(ctx, t.TempDir(), wsstore.Options{Runs: runs.Options{Mobile: true}})
	require.NoError(t, err)
	defer st.Close()
	run, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "c"}})
	require.NoError(t, err)
	p, err := st.Runs.EffectivePolicy(ctx, run.ChatID)
	require.NoError(t, err)
	assert.Equal(t, runs.MobilePolicy().KeepCompletedRuns, p.KeepCompletedRuns)
	require.NotNil(t, p.KeepCompletedRuns)
}

// endingCtx is a context that ends after its first check: the caller
// giving up while Open is under way.
type endingCtx struct {
	context.Context
	checks atomic.Int32
	done   chan struct{}
}

func newEndingCtx() *endingCtx {
	c := &endingCtx{Context: context.Background(), done: make(chan struct{})}
	close(c.done)
	return c
}

func (c *endingCtx) Err() error {
	if c.checks.Add(1) > 1 {
		return context.Canceled
	}
	return nil
}

func (c *endingCtx) Done() <-chan struct{} {
	if c.checks.Load() > 0 {
		return c.done
	}
	return nil
}

// TestOpenCancelledLeavesNoDirectory: Open with a context that has ended,
// or that ends while it opens, fails with store.canceled and leaves no
// store directory where there was none.
func TestOpenCancelledLeavesNoDirectory(t *testing.T) {
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	for name, ctx := range map[string]context.Context{"Ended": ended, "Ending": newEndingCtx()} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "store")
			st, err := wsstore.Open(ctx, dir, wsstore.Options{})
			if err == nil {
				st.Close()
			}
			assert.Equal(t, wserr.Canceled, wserr.CodeOf(err), "%v", err)
			_, err = os.Stat(dir)
			assert.True(t, os.IsNotExist(err), "the store directory was left: %v", err)
		})
	}
}

// TestOpenRefusingATierRecordsNothing: an open refused because the
// remote tier it names cannot be opened (a profile the shared AWS config
// does not have) leaves the URL the store recorded as it was, so the
// store opens as before without one.
func TestOpenRefusingATierRecordsNothing(t *testing.T) {
	ctx := context.Background()
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	dir := t.TempDir()
	// Opening a tier does not contact the object store.
	st, err := wsstore.Open(ctx, dir, wsstore.Options{Blobs: "s3://bucket/pre/?endpoint=http://127.0.0.1:1"})
	require.NoError(t, err)
	require.NoError(t, st.Close())

	_, err = wsstore.Open(ctx, dir, wsstore.Options{Blobs: "s3://bucket/pre/?profile=nosuch"})
	require.Equal(t, wserr.InvalidOptions, wserr.CodeOf(err), "%v", err)
	st, err = wsstore.Open(ctx, dir, wsstore.Options{})
	require.NoError(t, err, "the recorded URL is the one the store opened with")
	assert.Equal(t, "s3://bucket/pre/?endpoint=http://127.0.0.1:1", remoteURL(t, st))
	require.NoError(t, st.Close())
}

// remoteURL is the remote tier URL st recorded.
func remoteURL(t *testing.T, st *wsstore.Store) string {
	url, err := remote.Recorded(context.Background(), st.DB)
	require.NoError(t, err)
	return url
}

// TestNegativeLimitsAreRefused: a negative limit or page size given from
// Go is workspace.invalid_argument, as the ops refuse one, not the
// default; zero still asks for the default.
func TestNegativeLimitsAreRefused(t *testing.T) {
	ctx := context.Background()
	st, err := wsstore.Open(ctx, t.TempDir(), wsstore.Options{})
	require.NoError(t, err)
	defer st.Close()
	_, err = st.Actors.Upload(ctx, "alice", "a.md", strings.NewReader("a"))
	require.NoError(t, err)
	rem, err := remote.Open(ctx, "s3://bucket/prefix", remote.Options{})
	require.NoError(t, err)

	for name, call := range map[string]func(limit int) error{
		"Spaces.WorkspacePage": func(limit int) error {
			_, _, err := st.Actors.WorkspacePage(ctx, nil, "", 1, actors.WorkspaceCursor{}, limit)
			return err
		},
		"Spaces.StatsPage":  func(limit int) error { _, _, err := st.Actors.StatsPage(ctx, nil, "", limit); return err },
		"Spaces.ActorsPage": func(limit int) error { _, _, err := st.Actors.ActorsPage(ctx, nil, "", limit); return err },
		"Spaces.Changes":    func(limit int) error { _, err := st.Actors.Changes(ctx, "alice", 0, limit); return err },
		"Service.RunIDsWithPrefix": func(limit int) error {
			_, _, err := st.Runs.RunIDsWithPrefix(ctx, "run", limit)
			return err
		},
		"Trees.ListPage": func(limit int) error {
			_, _, err := st.Trees.ListPage(ctx, nil, vfs.EmptyTree, vfs.Root(), 1, vfs.ListPage{Limit: limit})
			return err
		},
		"cas.Store.Reencode": func(limit int) error { _, err := st.Blobs.Reencode(ctx, limit); return err },
		"Store.VacuumWith": func(limit int) error {
			_, err := st.VacuumWith(ctx, wsstore.VacuumOptions{Pages: limit})
			return err
		},
		"Store.CollectSteps": func(limit int) error {
			_, err := st.CollectSteps(ctx, wsstore.GCStepOptions{Objects: limit})
			return err
		},
		"Store.CollectCandidates": func(limit int) error {
			_, err := st.CollectCandidates(ctx, wsstore.GCStepOptions{Objects: limit})
			return err
		},
		"remote.Storage.Reclaim": func(limit int) error {
			if limit == 0 {
				return nil // it would reach the object store
			}
			_, err := rem.Reclaim(ctx, st.DB, "dev", remote.ReclaimOptions{Max: limit, DryRun: true})
			return err
		},
	} {
		assert.NoError(t, call(0), name)
		err := call(-1)
		assert.Equal(t, wserr.InvalidArgument, wserr.CodeOf(err), "%s: %v", name, err)
	}
}

// TestClockOutOfRangeWritesNothing: while the store's clock reads a time
// a store cannot hold (int64 nanoseconds since 1970 would wrap around),
// every write fails with store.invalid_options and changes nothing; reads
// go on, and writes do again once the clock is right.
func TestClockOutOfRangeWritesNothing(t *testing.T) {
	ctx := context.Background()
	var at atomic.Pointer[time.Time]
	good := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	at.Store(&good)
	st, err := wsstore.Open(ctx, t.TempDir(), wsstore.Options{Now: func() time.Time { return *at.Load() }})
	require.NoError(t, err)
	defer st.Close()
	chat := runs.ChatKey{Kind: "character", StableChatID: "c"}
	_, err = st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: chat, RunID: "run_a"})
	require.NoError(t, err)

	for _, bad := range []time.Time{time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC)} {
		at.Store(&bad)
		before, err := st.Stats(ctx)
		require.NoError(t, err)
		for name, call := range map[string]func() error{
			"CreateRun": func() error {
				_, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: chat, RunID: "run_b"})
				return err
			},
			"Write": func() error {
				ws := st.Runs.Workspace("run_a", runs.ModelScope)
				_, err := ws.Write(ctx, vfs.MustPath("output/a.md"), []byte("a"), vfs.WriteOptions{})
				return err
			},
			"Checkpoint": func() error { _, err := st.Runs.Checkpoint(ctx, "run_a", "late"); return err },
			"Upload": func() error {
				_, err := st.Actors.Upload(ctx, "alice", "a.md", strings.NewReader("a"))
				return err
			},
			"Token": func() error { _, _, err := st.Tokens.Create(ctx, tokens.Spec{Name: "t", TTL: time.Hour}); return err },
		} {
			err := call()
			assert.Equal(t, wserr.InvalidOptions, wserr.CodeOf(err), "%s at %v: %v", name, bad, err)
		}
		after, err := st.Stats(ctx)
		require.NoError(t, err)
		assert.Equal(t, before, after, "nothing written at %v", bad)
		_, err = st.Runs.Run(ctx, "run_a")
		assert.NoError(t, err, "reads go on")
	}

	at.Store(&good)
	_, err = st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: chat, RunID: "run_b"})
	require.NoError(t, err)
	list, err := st.Tokens.List(ctx)
	require.NoError(t, err)
	assert.Empty(t, list)
}
