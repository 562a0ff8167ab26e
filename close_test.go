package wsstore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/archive"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// TestCloseTakesNoWriteLockForNothing: a store with nothing queued closes
// while another process holds the write lock, instead of waiting for it
// (its close has nothing to write).
func TestCloseTakesNoWriteLockForNothing(t *testing.T) {
	ctx := context.Background()
	st, err := wsstore.Open(ctx, t.TempDir(), wsstore.Options{})
	require.NoError(t, err)
	_, err = st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "chat", StableChatID: "c1"}})
	require.NoError(t, err)
	_, err = st.Blobs.Drain(ctx)
	require.NoError(t, err)

	other, err := wsstore.Open(ctx, st.Dir, wsstore.Options{})
	require.NoError(t, err)
	defer other.Close()
	waited, err := closeHoldingTheLock(st, other)
	assert.False(t, waited, "Close waited for the other handle's write lock")
	require.NoError(t, err)
}

// closeHoldingTheLock closes st while other holds the write lock, as
// another process would, and reports whether Close waited for the lock
// (it had not returned 20 s on, below the busy timeouts the tests use) and
// what it returned.
func closeHoldingTheLock(st, other *wsstore.Store) (waited bool, err error) {
	holding, closed := make(chan struct{}), make(chan error, 1)
	released := make(chan bool, 1)
	go func() {
		_ = other.DB.Update(context.Background(), func(*index.Tx) error {
			close(holding)
			select {
			case err := <-closed:
				closed <- err
				released <- false
			case <-time.After(20 * time.Second):
				released <- true
			}
			return nil
		})
	}()
	<-holding
	go func() { closed <- st.Close() }()
	waited = <-released
	return waited, <-closed
}

// TestCloseLeavesQueuedWorkToABusyStore: a store with re-encodings queued
// closes while another process holds the write lock, leaving them queued
// for the next open, instead of waiting out the busy timeout for a lock
// (a Ctrl-C'd wsctl beside a long writer took the whole timeout to exit).
func TestCloseLeavesQueuedWorkToABusyStore(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	// The background re-encoder stays out of it: the writes' jobs wait.
	st, err := wsstore.Open(ctx, dir, wsstore.Options{CAS: cas.Options{ReencodeIdle: time.Hour}, Index: index.Options{BusyTimeout: time.Hour}})
	require.NoError(t, err)
	r, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "chat", StableChatID: "c1"}})
	require.NoError(t, err)
	ws := st.Runs.Workspace(r.ID, runs.ModelScope)
	doc := []byte(strings.Repeat("The keeper lit the lamp at dusk and watched the ships pass.\n", 200))
	for i := range 10 {
		doc = append(doc, fmt.Sprintf("Round %d.\n", i)...)
		_, err := ws.Write(ctx, vfs.MustPath("output/main.md"), doc, vfs.WriteOptions{})
		require.NoError(t, err)
	}
	queued, err := st.Blobs.PendingReencodes(ctx)
	require.NoError(t, err)
	require.Positive(t, queued)

	other, err := wsstore.Open(ctx, dir, wsstore.Options{})
	require.NoError(t, err)
	defer other.Close()
	waited, err := closeHoldingTheLock(st, other)
	assert.False(t, waited, "Close waited for the other handle's write lock")
	require.NoError(t, err)

	left, err := other.Blobs.PendingReencodes(ctx)
	require.NoError(t, err)
	assert.Equal(t, queued, left, "the queued re-encodings wait for the next open")
	n, err := other.Blobs.Drain(ctx)
	require.NoError(t, err)
	assert.Positive(t, n)
	left, err = other.Blobs.PendingReencodes(ctx)
	require.NoError(t, err)
	assert.Zero(t, left)
}

// TestCancelledCallsAreCoded: a call whose context has ended fails with
// store.canceled, not store.internal, so a host that routes errors by code
// tells a user's cancel from a failure.
func TestCancelledCallsAreCoded(t *testing.T) {
	st, err := wsstore.Open(context.Background(), t.TempDir(), wsstore.Options{})
	require.NoError(t, err)
	defer st.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "chat", StableChatID: "c1"}})
	assert.Equal(t, wserr.Canceled, wserr.CodeOf(err), "%v", err)
	_, err = st.GC(ctx, wsstore.GCOptions{})
	assert.Equal(t, wserr.Canceled, wserr.CodeOf(err), "%v", err)
	_, err = st.Fsck(ctx, nil)
	assert.Equal(t, wserr.Canceled, wserr.CodeOf(err), "%v", err)
	// A transaction begun under an ended context fails coded, not as a
	// bare driver error that only CodeOf's fallback would read.
	err = st.DB.View(ctx, func(*index.Tx) error { return nil })
	_, coded := errors.AsType[*wserr.Error](err)
	assert.True(t, coded, "%v", err)
	assert.True(t, errors.Is(err, context.Canceled), "the cause stays in the chain: %v", err)
}

// TestCallsAfterCloseAreCoded: every kind of call on a closed store fails
// with store.closed, not a driver's "database is closed" as
// store.internal, and Close again is harmless.
func TestCallsAfterCloseAreCoded(t *testing.T) {
	ctx := context.Background()
	st, err := wsstore.Open(ctx, t.TempDir(), wsstore.Options{})
	require.NoError(t, err)
	run, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "chat", StableChatID: "c1"}})
	require.NoError(t, err)
	require.NoError(t, st.Close())

	calls := map[string]func() error{
		"CreateRun": func() error {
			_, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "chat", StableChatID: "c2"}})
			return err
		},
		"Run": func() error { _, err := st.Runs.Run(ctx, run.ID); return err },
		"Checkpoint": func() error {
			_, err := st.Runs.Checkpoint(ctx, run.ID, "late")
			return err
		},
		"Stats": func() error { _, err := st.Stats(ctx); return err },
		"GC":    func() error { _, err := st.GC(ctx, wsstore.GCOptions{}); return err },
		"Exec":  func() error { return st.DB.Exec(ctx, `PRAGMA wal_checkpoint(PASSIVE)`) },
	}
	for name, call := range calls {
		err := call()
		assert.Equal(t, wserr.Closed, wserr.CodeOf(err), "%s: %v", name, err)
	}
	assert.NoError(t, st.Close())
}

// TestCallsRacingCloseAreCoded: calls that begin while Close runs fail, if
// they fail, with store.closed, never with the driver's uncoded error.
func TestCallsRacingCloseAreCoded(t *testing.T) {
	ctx := context.Background()
	for round := range 20 {
		st, err := wsstore.Open(ctx, t.TempDir(), wsstore.Options{})
		require.NoError(t, err)
		run, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "chat", StableChatID: "c1"}})
		require.NoError(t, err)
		errs := make(chan error, 1024)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for g := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for range 40 {
					var err error
					if g%2 == 0 {
						_, err = st.Runs.Run(ctx, run.ID)
					} else {
						_, err = st.Runs.Checkpoint(ctx, run.ID, "racing")
					}
					if err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		close(start)
		require.NoError(t, st.Close())
		wg.Wait()
		close(errs)
		for err := range errs {
			assert.Equal(t, wserr.Closed, wserr.CodeOf(err), "round %d: %v", round, err)
		}
	}
}

// TestConcurrentCloses: Close called from two goroutines at once (a
// signal handler and a deferred Close) stops the background re-encoding
// and drains once; both return, and the store reopens sound. Run under
// the race detector, it is what catches two Closes sharing the stop.
func TestConcurrentCloses(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := wsstore.Open(ctx, dir, wsstore.Options{})
	require.NoError(t, err)
	_, err = st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "chat", StableChatID: "c1"}, RunID: "r"})
	require.NoError(t, err)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { assert.NoError(t, st.Close()) })
	}
	wg.Wait()
	again, err := wsstore.Open(ctx, dir, wsstore.Options{})
	require.NoError(t, err)
	defer again.Close()
	_, err = again.Runs.Run(ctx, "r")
	assert.NoError(t, err)
}

// TestConcurrentGCAndClose: a GC called while Close runs fails with
// store.closed or succeeds; under the race detector it is what catches
// GC reading the background re-encoder's state as Close clears it.
func TestConcurrentGCAndClose(t *testing.T) {
	ctx := context.Background()
	for range 10 {
		st, err := wsstore.Open(ctx, t.TempDir(), wsstore.Options{})
		require.NoError(t, err)
		var wg sync.WaitGroup
		start := make(chan struct{})
		wg.Go(func() {
			<-start
			for {
				if _, err := st.GC(ctx, wsstore.GCOptions{Grace: -1}); err != nil {
					assert.Equal(t, wserr.Closed, wserr.CodeOf(err), "%v", err)
					return
				}
			}
		})
		close(start)
		time.Sleep(20 * time.Millisecond)
		require.NoError(t, st.Close())
		wg.Wait()
	}
}

// countdown is a context that cancels itself the n-th time its Err is
// asked for, so that a sweep over n ends a call at each place it checks.
type countdown struct {
	context.Context
	cancel context.CancelFunc
	n      atomic.Int64
}

func newCountdown(n int64) *countdown {
	ctx, cancel := context.WithCancel(context.Background())
	c := &countdown{Context: ctx, cancel: cancel}
	c.n.Store(n)
	return c
}

func (c *countdown) Err() error {
	if c.n.Add(-1) < 0 {
		c.cancel()
	}
	return c.Context.Err()
}

// TestCallsEndedMidwayAreCoded: a call whose context ends at any point
// fails with a *wserr.Error of code store.canceled, not with the bare
// context error that only CodeOf's fallback reads (diffs, checkpoint
// views, exports and gc's re-encoding checked the context themselves).
func TestCallsEndedMidwayAreCoded(t *testing.T) {
	ctx := context.Background()
	st, err := wsstore.Open(ctx, t.TempDir(), wsstore.Options{})
	require.NoError(t, err)
	defer st.Close()
	var ids []string
	for i := range 2 {
		r, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "chat", StableChatID: fmt.Sprint(i)}})
		require.NoError(t, err)
		ws := st.Runs.Workspace(r.ID, runs.ModelScope)
		for k := range 6 {
			_, err = ws.Write(ctx, vfs.MustPath(fmt.Sprintf("output/d%d/f%d.txt", k%3, k)), []byte(strings.Repeat(fmt.Sprint(i, k), 200)), vfs.WriteOptions{})
			require.NoError(t, err)
		}
		ids = append(ids, r.ID)
	}
	calls := map[string]func(ctx context.Context) error{
		"Diff": func(ctx context.Context) error {
			_, err := st.Runs.Diff(ctx, ids[0], 1, runs.Live, runs.DiffOptions{})
			return err
		},
		"DiffRuns": func(ctx context.Context) error {
			_, err := st.Runs.DiffRuns(ctx, runs.TreeRef{RunID: ids[0]}, runs.TreeRef{RunID: ids[1]}, runs.DiffOptions{})
			return err
		},
		"View": func(ctx context.Context) error { _, err := st.Checkpoints.View(ctx, ids[0], 4); return err },
		"GC":   func(ctx context.Context) error { _, err := st.GC(ctx, wsstore.GCOptions{Grace: -1}); return err },
		"Export": func(ctx context.Context) error {
			_, err := st.Archive.Export(ctx, io.Discard, archive.Scope{All: true}, archive.Options{})
			return err
		},
		"Fsck": func(ctx context.Context) error { _, err := st.Fsck(ctx, nil); return err },
	}
	for name, call := range calls {
		for n := int64(0); n < 1000; n++ {
			c := newCountdown(n)
			err := call(c)
			c.cancel()
			if err == nil {
				if c.n.Load() >= 0 {
					break // it ended before the countdown did
				}
				continue
			}
			_, coded := errors.AsType[*wserr.Error](err)
			if !assert.True(t, coded, "%s ended at check %d: %v", name, n, err) ||
				!assert.Equal(t, wserr.Canceled, wserr.CodeOf(err), "%s ended at check %d: %v", name, n, err) {
				break
			}
		}
	}
}

// TestTreeFSAfterCloseIsCoded: a tree's fs.FS view fails with store.closed
// once the store is closed, also for the trees and directories it read
// before (which its cache of trees still holds).
func TestTreeFSAfterCloseIsCoded(t *testing.T) {
	ctx := context.Background()
	st, err := wsstore.Open(ctx, t.TempDir(), wsstore.Options{})
	require.NoError(t, err)
	run, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "chat", StableChatID: "c1"}})
	require.NoError(t, err)
	ws := st.Runs.Workspace(run.ID, runs.ModelScope)
	_, err = ws.Write(ctx, vfs.MustPath("output/main.md"), []byte("text\n"), vfs.WriteOptions{})
	require.NoError(t, err)
	run, err = st.Runs.Run(ctx, run.ID)
	require.NoError(t, err)
	fsys := st.Trees.FS(ctx, run.Root)
	_, err = fs.ReadFile(fsys, "output/main.md")
	require.NoError(t, err)
	dir, err := fsys.Open("output")
	require.NoError(t, err)
	require.NoError(t, st.Close())

	calls := map[string]func() error{
		"Stat root": func() error { _, err := fs.Stat(fsys, "."); return err },
		"Stat file": func() error { _, err := fs.Stat(fsys, "output/main.md"); return err },
		"Open dir":  func() error { _, err := fsys.Open("output"); return err },
		"Open file": func() error { _, err := fsys.Open("output/main.md"); return err },
		"ReadDir":   func() error { _, err := fs.ReadDir(fsys, "output"); return err },
		"ReadFile":  func() error { _, err := fs.ReadFile(fsys, "output/main.md"); return err },
		"open dir's ReadDir": func() error {
			_, err := dir.(fs.ReadDirFile).ReadDir(-1)
			return err
		},
	}
	for name, call := range calls {
		err := call()
		assert.Equal(t, wserr.Closed, wserr.CodeOf(err), "%s: %v", name, err)
	}
}
