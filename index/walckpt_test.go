package index

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// walEnv is a store with one table and writes of 64 KiB rows, 17 frames
// of the log each.
type walEnv struct {
	t    *testing.T
	ctx  context.Context
	path string
	db   *DB
	k    int
}

var walRow = bytes.Repeat([]byte("x"), 64<<10)

func newWALEnv(t *testing.T) *walEnv {
	e := &walEnv{t: t, ctx: context.Background(), path: filepath.Join(t.TempDir(), "s.db")}
	var err error
	e.db, err = Open(e.ctx, e.path, Options{})
	require.NoError(t, err)
	t.Cleanup(func() { e.db.Close() })
	require.NoError(t, e.db.Update(e.ctx, func(tx *Tx) error {
		_, err := tx.ExecContext(e.ctx, `CREATE TABLE kv (k INTEGER PRIMARY KEY, v BLOB)`)
		return err
	}))
	return e
}

func (e *walEnv) insert(tx *Tx) error {
	e.k++
	_, err := tx.ExecContext(e.ctx, `INSERT INTO kv (k, v) VALUES (?, ?)`, e.k, walRow)
	return err
}

func (e *walEnv) write(n int) {
	for range n {
		require.NoError(e.t, e.db.Update(e.ctx, e.insert))
	}
}

// reopen closes the store, opens it again and checks every row reads.
func (e *walEnv) reopen() {
	require.NoError(e.t, e.db.Close())
	var err error
	e.db, err = Open(e.ctx, e.path, Options{})
	require.NoError(e.t, err)
	var n int
	require.NoError(e.t, e.db.View(e.ctx, func(tx *Tx) error {
		return tx.GetContext(e.ctx, &n, `SELECT count(*) FROM kv WHERE length(v) = ?`, len(walRow))
	}))
	assert.Equal(e.t, e.k, n)
}

// TestConcurrentBackgroundCheckpoint: writes that take the log past
// walPages frames not yet in the database file wake the background
// checkpoint, which copies them there (1,700 frames written, fewer than
// walPages left) while readers go on: each sees every row committed
// before it began, and none that is not whole.
func TestConcurrentBackgroundCheckpoint(t *testing.T) {
	e := newWALEnv(t)
	stop := make(chan struct{})
	var readers sync.WaitGroup
	for range 2 {
		readers.Go(func() {
			last := 0
			for {
				select {
				case <-stop:
					return
				default:
				}
				var n, whole int
				err := e.db.View(e.ctx, func(tx *Tx) error {
					if err := tx.GetContext(e.ctx, &n, `SELECT count(*) FROM kv`); err != nil {
						return err
					}
					return tx.GetContext(e.ctx, &whole, `SELECT count(*) FROM kv WHERE v = ?`, walRow)
				})
				if !assert.NoError(t, err) {
					return
				}
				assert.Equal(t, n, whole)
				assert.GreaterOrEqual(t, n, last, "a later read sees every row an earlier one saw")
				last = n
			}
		})
	}
	e.write(100)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, pending := e.db.ckpt.log(); pending < walPages && e.db.ckpt.runs.Load() > 0 {
			break
		}
		if !time.Now().Before(deadline) {
			f, p := e.db.ckpt.log()
			t.Fatalf("the background checkpoint did not copy the log: %d frames, %d not copied, %d checkpoints", f, p, e.db.ckpt.runs.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(stop)
	readers.Wait()
	e.reopen()
}

// TestCheckpointAfterAReaderLetsGo: a reader that holds its snapshot
// while writes take the log past walPages frames keeps the background
// checkpoint from copying them; once it lets go, the checkpoint copies
// them without another write to wake it.
func TestCheckpointAfterAReaderLetsGo(t *testing.T) {
	e := newWALEnv(t)
	held, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- e.db.View(e.ctx, func(tx *Tx) error {
			var n int
			if err := tx.GetContext(e.ctx, &n, `SELECT count(*) FROM kv`); err != nil {
				return err
			}
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	e.write(100)
	_, pending := e.db.ckpt.log()
	require.GreaterOrEqual(t, pending, int64(walPages), "the reader held the copy back")
	// Let the passes the writes woke end first (a wake left over could
	// otherwise run one after the reader lets go).
	for runs, quiet, start := e.db.ckpt.runs.Load(), time.Now(), time.Now(); time.Since(quiet) < 100*time.Millisecond && time.Since(start) < 5*time.Second; {
		time.Sleep(5 * time.Millisecond)
		if n := e.db.ckpt.runs.Load(); n != runs || len(e.db.ckpt.kick) > 0 {
			runs, quiet = n, time.Now()
		}
	}
	close(release)
	require.NoError(t, <-done)
	require.Eventually(t, func() bool {
		_, pending := e.db.ckpt.log()
		return pending < walPages
	}, 30*time.Second, 5*time.Millisecond, "the background checkpoint copied the log")
	e.reopen()
}

// TestCheckpointCatchUp: when a checkpoint ends while a write transaction
// is open, the log holds only that commit's frames beyond the database
// file, and would never start over while writes follow one another; the
// write connection copies them itself after its commit, so the next write
// starts the log over.
func TestCheckpointCatchUp(t *testing.T) {
	e := newWALEnv(t)
	e.db.ckpt.manual = true
	e.write(100)
	frames, pending := e.db.ckpt.log()
	require.GreaterOrEqual(t, pending, int64(walPages), "no checkpoint ran")
	require.NoError(t, e.db.Update(e.ctx, func(tx *Tx) error {
		if err := e.insert(tx); err != nil {
			return err
		}
		_, err := e.db.ckpt.conn.ExecContext(e.ctx, `PRAGMA wal_checkpoint(PASSIVE)`)
		return err
	}))
	e.write(1)
	n, _ := e.db.ckpt.log()
	assert.Less(t, n, frames, "the write after the catch-up started the log over")
	e.reopen()
}

// TestCheckpointWaitsForBackground: a checkpoint asked for (Checkpoint,
// which truncates the log) right after writes that woke the background
// one waits for it instead of finding the log busy, so the log is empty
// after it every time.
func TestCheckpointWaitsForBackground(t *testing.T) {
	e := newWALEnv(t)
	for round := range 5 {
		e.write(70)
		require.NoError(t, e.db.Checkpoint(e.ctx))
		fi, err := os.Stat(e.path + "-wal")
		require.NoError(t, err)
		require.Zero(t, fi.Size(), "round %d: the log is truncated", round)
	}
	e.reopen()
}

// TestLogStartsOverUnderBackToBackWrites: large writes that follow one
// another without a pause keep the background checkpoint a few commits
// behind, so the log never has every frame copied at a commit; the write
// connection copies the rest once the log holds walLongPages frames, and
// the log starts over instead of growing with the writes (a gc's steps).
func TestLogStartsOverUnderBackToBackWrites(t *testing.T) {
	e := newWALEnv(t)
	var longest int64
	for range 300 {
		require.NoError(t, e.db.Update(e.ctx, func(tx *Tx) error {
			for range 32 { // about 550 frames
				if err := e.insert(tx); err != nil {
					return err
				}
			}
			return nil
		}))
		longest = max(longest, e.db.ckpt.frames())
	}
	assert.Less(t, longest, int64(5*walPages), "the log started over, once past walLongPages (4,000 frames)")
	e.reopen()
}
