package replica_test

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/remote/replica"
	"github.com/wsstore/wsstore/remote/s3fake"
)

// TestMain runs replicateChild when the test binary is started as a
// replicator to be killed (killedReplicator).
func TestMain(m *testing.M) {
	if path := os.Getenv("WSSTORE_REPLICA_CHILD"); path != "" {
		os.Exit(replicateChild(path, os.Getenv("WSSTORE_REPLICA_URL")))
	}
	if path := os.Getenv("WSSTORE_REPLICA_WRITER"); path != "" {
		os.Exit(writerChild(path))
	}
	os.Exit(m.Run())
}

// replicateChild ships the database at path to url, says so on standard
// output and waits to be killed. Given a line on standard input first, it
// then syncs (whether or not the object store takes what it ships) and
// writes a snapshot, and says so.
func replicateChild(path, url string) int {
	ctx := context.Background()
	rep, err := replica.Start(ctx, path, url, snapshotDaily(replica.Options{Interval: time.Hour, Owner: testOwner}))
	if err == nil {
		err = rep.Sync(ctx)
	}
	if err != nil {
		fmt.Println(err)
		return 1
	}
	fmt.Println("shipped")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err == nil {
		_ = rep.Sync(ctx)
		if err := replica.SnapshotNow(ctx, rep); err != nil {
			fmt.Println(err)
			return 1
		}
		fmt.Println("snapshot")
	}
	select {}
}

// killedReplicator ships the database at path to url from a process of
// its own, which it SIGKILLs once that has shipped and written a snapshot
// to srv.
func killedReplicator(t *testing.T, srv *s3fake.Server, path, url string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "WSSTORE_REPLICA_CHILD="+path, "WSSTORE_REPLICA_URL="+url)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line == "shipped\n" {
		// Litestream writes a snapshot soon after it starts; a newer one
		// than a day old is not written again (snapshotDaily).
		for len(srv.Keys("wsb", "meta/0009/")) == 0 {
			time.Sleep(10 * time.Millisecond)
		}
	}
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	require.Equal(t, "shipped\n", line)
}

// snapshotDaily is opts with a snapshot a day: a replicator started
// after killedReplicator writes none, which would hide a replica's
// missing transactions from a restore.
func snapshotDaily(opts replica.Options) replica.Options {
	opts.SnapshotInterval = 24 * time.Hour
	return opts
}

// checkpoint copies every frame of the log into the database file: the
// next write starts the log over.
// shipThenStartLogOver ships the source at path once (a replicator
// started, synced and closed), then rewrites rows, checkpoints and writes
// again, which starts the log over: the next first sync ships the whole
// database.
func shipThenStartLogOver(t *testing.T, path, url string, db *sql.DB, rnd *rand.ChaCha8) {
	t.Helper()
	ctx := context.Background()
	rep, err := replica.Start(ctx, path, url, snapshotDaily(replica.Options{Interval: time.Hour, Owner: testOwner}))
	require.NoError(t, err)
	require.NoError(t, rep.Sync(ctx))
	require.NoError(t, rep.Close(ctx))
	for id := range 32 {
		rewrite(t, db, rnd, id)
	}
	checkpoint(t, db)
	rewrite(t, db, rnd, 40)
}

func checkpoint(t *testing.T, db *sql.DB) {
	t.Helper()
	var busy, frames, copied int
	require.NoError(t, db.QueryRow(`PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &frames, &copied))
	require.Equal(t, frames, copied, "every frame copied")
}

// logSalt1 is the first salt in the header of the log of the database at
// path, which SQLite raises by one each time the log starts over.
func logSalt1(t *testing.T, path string) uint32 {
	t.Helper()
	b, err := os.ReadFile(path + "-wal")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(b), 32)
	return uint32(b[16])<<24 | uint32(b[17])<<16 | uint32(b[18])<<8 | uint32(b[19])
}

// assertRestores restores the replica at url and requires SQLite's
// integrity check to pass and every row of db to be there, the same.
func assertRestores(t *testing.T, url string, db *sql.DB) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "restored.db")
	require.NoError(t, replica.Restore(context.Background(), url, out, replica.Options{}))
	r := openDB(t, out)
	var check string
	require.NoError(t, r.QueryRow(`PRAGMA integrity_check`).Scan(&check))
	assert.Equal(t, "ok", check)
	want, got := rowSums(t, db), rowSums(t, r)
	assert.Equal(t, len(want), len(got), "rows")
	differ := 0
	for id, sum := range want {
		if got[id] != sum {
			differ++
		}
	}
	assert.Zero(t, differ, "rows missing or different in the restored database, of %d", len(want))
}

// rowSums maps each row of table t to a digest of its value.
func rowSums(t *testing.T, db *sql.DB) map[int64]string {
	t.Helper()
	rows, err := db.Query(`SELECT id, hex(substr(v, 1, 16)) || length(v) FROM t`)
	require.NoError(t, err)
	defer rows.Close()
	m := map[int64]string{}
	for rows.Next() {
		var id int64
		var sum string
		require.NoError(t, rows.Scan(&id, &sum))
		m[id] = sum
	}
	require.NoError(t, rows.Err())
	return m
}

// TestLogStartedOverWhileNoReplicatorRan: a replicator is killed after it
// shipped; the store writes on (the database grows), folds the log back
// and starts it over three times, with no replicator running; then a
// replicator starts. Litestream alone went on from the offset where the
// killed one stopped, whose frame the shorter logs since had not
// overwritten, and shipped only the last log: the replica lacked every
// row written meanwhile. The replica restores to the source, sound.
func TestLogStartedOverWhileNoReplicatorRan(t *testing.T) {
	srv, url, path, db := newSource(t)
	ctx := context.Background()
	rnd := rewriteRows(t, db, 3, 64)
	killedReplicator(t, srv, path, url)

	salt := logSalt1(t, path)
	for id := range 32 {
		rewrite(t, db, rnd, id) // past the offset the killed one shipped
	}
	for i := range 3 {
		// Each log longer than the one before: the last one overwrites
		// every frame of the others.
		checkpoint(t, db)
		for k := range 1 + 2*i {
			rewrite(t, db, rnd, 40+10*i+k)
		}
	}
	require.Equal(t, salt+3, logSalt1(t, path), "the log started over three times")

	rep, err := replica.Start(ctx, path, url, snapshotDaily(replica.Options{Interval: time.Hour, Owner: testOwner}))
	require.NoError(t, err)
	require.NoError(t, rep.Sync(ctx))
	rewrite(t, db, rnd, 300)
	require.NoError(t, rep.Sync(ctx))
	require.NoError(t, rep.Close(ctx))
	assertRestores(t, url, db)
}

// hook calls fn at the first record Litestream logs with message msg.
type hook struct {
	msg  string
	once sync.Once
	fn   func()
}

func (h *hook) Enabled(context.Context, slog.Level) bool { return true }

func (h *hook) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.once.Do(h.fn)
	}
	return nil
}

func (h *hook) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *hook) WithGroup(string) slog.Handler      { return h }

// TestLogStartedOverDuringFirstSync: every frame of the log is in the
// database file when a replicator starts, so Litestream's read
// transaction reads the database file only, which does not keep a writer
// from starting the log over. A writer does so after Litestream mapped
// the frames it is to ship and before it read them (the hook, at
// Litestream's "encode header", between the two), and overwrites them:
// Litestream shipped pages of the writer's transactions under other
// page numbers, and the replica failed SQLite's integrity check. The
// writer writes on, but must not start the log over before Litestream's
// first sync has read it.
func TestLogStartedOverDuringFirstSync(t *testing.T) {
	_, url, path, db := newSource(t)
	ctx := context.Background()
	rnd := rewriteRows(t, db, 2, 64)
	rep, err := replica.Start(ctx, path, url, replica.Options{Interval: time.Hour, Owner: testOwner})
	require.NoError(t, err)
	require.NoError(t, rep.Sync(ctx))
	require.NoError(t, rep.Close(ctx))
	for id := range 32 {
		rewrite(t, db, rnd, id) // the frames the next replicator ships
	}
	checkpoint(t, db)

	// The writer: a connection that tries the write lock once, and waits
	// for it only if that fails.
	writer := openWriter(t, path, 0)
	wrnd := rand.NewChaCha8([32]byte{4})
	waited := make(chan error, 1)
	writes := func() error {
		// About as many frames as the replicator is to ship: the log
		// starts over and its first frames are overwritten.
		for id := range 75 {
			if err := writeRow(writer, wrnd, 200+id); err != nil {
				return err
			}
		}
		return nil
	}
	h := &hook{msg: "encode header", fn: func() {
		if _, err := writer.Exec(`BEGIN IMMEDIATE`); err != nil {
			// The lock is held: write once it is let go.
			_, err := writer.Exec(`PRAGMA busy_timeout = 60000`)
			require.NoError(t, err)
			go func() { waited <- writes() }()
			return
		}
		_, err := writer.Exec(`COMMIT`)
		require.NoError(t, err)
		waited <- writes()
	}}
	rep, err = replica.Start(ctx, path, url, replica.Options{Interval: time.Hour, Owner: testOwner, Logger: slog.New(h)})
	require.NoError(t, err)
	require.NoError(t, rep.Sync(ctx))
	require.NoError(t, <-waited)
	require.NoError(t, rep.Sync(ctx))
	require.NoError(t, rep.Close(ctx))
	assertRestores(t, url, db)
}

// cancelAtCheckpoint is a handler that calls cancel once Litestream's
// checkpoint has sealed the log (the second of its syncs marked chkpt,
// under its write barrier, found nothing new) and is about to let go of
// its read transaction for the checkpoint.
type cancelAtCheckpoint struct {
	mu     sync.Mutex
	seals  int
	cancel context.CancelFunc
}

func (h *cancelAtCheckpoint) Enabled(context.Context, slog.Level) bool { return true }

func (h *cancelAtCheckpoint) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case r.Message == "sync":
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "chkpt" {
				h.seals++
			}
			return true
		})
	case r.Message == "sync: skip" && h.seals == 2 && h.cancel != nil:
		h.cancel()
		h.cancel = nil
	}
	return nil
}

func (h *cancelAtCheckpoint) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *cancelAtCheckpoint) WithGroup(string) slog.Handler      { return h }

// TestSyncCancelledInACheckpoint: a Sync whose context ends while
// Litestream checkpoints (a signal stopping wsctl replicate) made
// Litestream let go of its read transaction and not take it again, and
// it went on without it: the store then folded the log back and started
// it over behind it, and the frames written before that, after its last
// sync, never reached the replica. Reading the log is never cut short.
func TestSyncCancelledInACheckpoint(t *testing.T) {
	_, url, path, db := newSource(t)
	ctx := context.Background()
	rnd := rewriteRows(t, db, 5, 64)
	h := &cancelAtCheckpoint{}
	rep, err := replica.Start(ctx, path, url, snapshotDaily(replica.Options{Interval: time.Hour, Owner: testOwner, Logger: slog.New(h)}))
	require.NoError(t, err)
	require.NoError(t, rep.Sync(ctx))
	// Enough frames for Litestream to checkpoint at its next sync (1,000).
	for i := range 400 {
		rewrite(t, db, rnd, i%64)
	}
	cctx, cancel := context.WithCancel(ctx)
	h.mu.Lock()
	h.seals, h.cancel = 0, cancel
	h.mu.Unlock()
	_ = rep.Sync(cctx) // its upload may fail: cancelled
	h.mu.Lock()
	require.Nil(t, h.cancel, "cancelled in the checkpoint")
	h.mu.Unlock()

	for id := range 32 {
		rewrite(t, db, rnd, id) // after Litestream's last sync
	}
	// Folds the log back, unless Litestream's read transaction holds it,
	// and starts it over with a longer log, which overwrites every frame
	// of the one before.
	_, err = db.Exec(`PRAGMA wal_checkpoint(PASSIVE)`)
	require.NoError(t, err)
	for id := range 40 {
		rewrite(t, db, rnd, 32+id%32)
	}
	require.NoError(t, rep.Sync(ctx))
	require.NoError(t, rep.Close(ctx))
	assertRestores(t, url, db)
}

// TestSnapshotOfTransactionsNeverShipped: a replicator is killed after it
// read transactions into its local state and wrote a snapshot of them,
// but before it shipped them (the object store refused them); the store
// writes on and starts the log over; a replicator starts. It shipped the
// whole database after the replica's last transaction, under the number
// the killed one had given one of its own, and its later transactions
// were restored on top of the killed one's snapshot, which lacked what
// was written meanwhile. The replica restores to the source, sound,
// whether the killed replicator's local state is still there or not.
func TestSnapshotOfTransactionsNeverShipped(t *testing.T) {
	for _, tc := range []struct {
		name string
		lost bool
	}{{"LocalStateKept", false}, {"LocalStateLost", true}} {
		lost := tc.lost
		t.Run(tc.name, func(t *testing.T) {
			srv, url, path, db := newSource(t)
			ctx := context.Background()
			rnd := rewriteRows(t, db, 6, 64)

			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "WSSTORE_REPLICA_CHILD="+path, "WSSTORE_REPLICA_URL="+url)
			in, err := cmd.StdinPipe()
			require.NoError(t, err)
			stdout, err := cmd.StdoutPipe()
			require.NoError(t, err)
			out := bufio.NewReader(stdout)
			require.NoError(t, cmd.Start())
			line, _ := out.ReadString('\n')
			require.Equal(t, "shipped\n", line)
			shipped := len(srv.Keys("wsb", "meta/0000/"))
			srv.SetFault(func(r *http.Request) int {
				if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/meta/0000/") {
					return http.StatusForbidden
				}
				return 0
			})
			for id := range 16 {
				rewrite(t, db, rnd, id)
			}
			_, err = in.Write([]byte("go\n"))
			require.NoError(t, err)
			line, _ = out.ReadString('\n')
			require.NoError(t, cmd.Process.Kill())
			_ = cmd.Wait()
			require.Equal(t, "snapshot\n", line)
			srv.SetFault(nil)
			require.Len(t, srv.Keys("wsb", "meta/0000/"), shipped, "the transactions after the fault not shipped")
			require.Len(t, srv.Keys("wsb", "meta/0009/"), 1, "the snapshot written")
			if lost {
				require.NoError(t, os.RemoveAll(filepath.Join(filepath.Dir(path), ".wsstore.db-litestream", "ltx")))
			}

			for id := range 32 {
				rewrite(t, db, rnd, 16+id)
			}
			checkpoint(t, db)
			rewrite(t, db, rnd, 60) // starts the log over
			rep, err := replica.Start(ctx, path, url, snapshotDaily(replica.Options{Interval: time.Hour, Owner: testOwner}))
			require.NoError(t, err)
			require.NoError(t, rep.Sync(ctx))
			rewrite(t, db, rnd, 61)
			require.NoError(t, rep.Sync(ctx))
			require.NoError(t, rep.Close(ctx))
			assertRestores(t, url, db)
		})
	}
}

// writerChild is another process writing to the database at path: 32
// rows rewritten, a checkpoint, 40 rows rewritten (which start the log
// over if the checkpoint folded every frame back).
func writerChild(path string) int {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		fmt.Println(err)
		return 1
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	rnd := rand.NewChaCha8([32]byte{8})
	write := func(id int) error { return writeRow(db, rnd, id) }
	for id := range 32 {
		if err := write(id); err != nil {
			fmt.Println(err)
			return 1
		}
	}
	if _, err := db.Exec(`PRAGMA wal_checkpoint(PASSIVE)`); err != nil {
		fmt.Println(err)
		return 1
	}
	for id := range 40 {
		if err := write(32 + id%32); err != nil {
			fmt.Println(err)
			return 1
		}
	}
	return 0
}

// TestStoreClosedBeforeReplicator: wsctl replicate closes the store before
// the replicator. The store's close of its descriptor of the -shm file
// dropped every lock the process held on it, Litestream's read lock too,
// and another process then folded the log back and started it over
// behind Litestream's last sync: what it wrote before that never reached
// the replica. The descriptor stays open until the replicator is closed.
func TestStoreClosedBeforeReplicator(t *testing.T) {
	_, url := fakeReplica(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "wsstore.db")
	// The store: its writes read the log's index through its descriptor.
	st, err := index.Open(ctx, path, index.Options{})
	require.NoError(t, err)
	rnd := rand.NewChaCha8([32]byte{7})
	require.NoError(t, st.Update(ctx, func(tx *index.Tx) error {
		if _, err := tx.ExecContext(ctx, `CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB)`); err != nil {
			return err
		}
		for id := range 64 {
			v := make([]byte, 4096)
			_, _ = rnd.Read(v)
			if _, err := tx.ExecContext(ctx, `INSERT INTO t (id, v) VALUES (?, ?)`, id, v); err != nil {
				return err
			}
		}
		return nil
	}))
	rep, err := replica.Start(ctx, path, url, snapshotDaily(replica.Options{Interval: time.Hour, Owner: testOwner}))
	require.NoError(t, err)
	require.NoError(t, rep.Sync(ctx))
	require.NoError(t, st.Close())

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "WSSTORE_REPLICA_WRITER="+path)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)

	require.NoError(t, rep.Sync(ctx))
	require.NoError(t, rep.Close(ctx))
	assertRestores(t, url, openDB(t, path))
}

// TestWritersGoOnWhileTheWholeDatabaseIsShipped: a replicator starts
// after the log started over, so its first sync ships the whole database.
// That was read under the write lock, and the store's writers waited for
// it all (about 1 s per 70 MB; past their busy timeout they failed). Now
// it is read through a read transaction the log cannot start over under:
// a writer that never waits commits while it is read, folds the log back
// and writes on (which would start the log over, were it not held), and
// the replica restores to the source, sound.
func TestWritersGoOnWhileTheWholeDatabaseIsShipped(t *testing.T) {
	_, url, path, db := newSource(t)
	ctx := context.Background()
	rnd := rewriteRows(t, db, 11, 64)
	shipThenStartLogOver(t, path, url, db, rnd)

	writer := openWriter(t, path, 0)
	wrnd := rand.NewChaCha8([32]byte{12})
	write := func(id int) error { return writeRow(writer, wrnd, id) }
	var salt, saltAfter uint32
	wrote := make(chan error, 1)
	h := &hook{msg: "shipping the whole database", fn: func() {
		salt = logSalt1(t, path)
		for id := range 32 {
			if err := write(100 + id); err != nil {
				wrote <- err
				return
			}
		}
		if _, err := writer.Exec(`PRAGMA wal_checkpoint(PASSIVE)`); err != nil {
			wrote <- err
			return
		}
		for id := range 40 {
			if err := write(200 + id); err != nil {
				wrote <- err
				return
			}
		}
		saltAfter = logSalt1(t, path)
		wrote <- nil
	}}
	opts := snapshotDaily(replica.Options{Interval: time.Hour, Owner: testOwner, Logger: slog.New(h)})
	rep, err := replica.Start(ctx, path, url, opts)
	require.NoError(t, err)
	require.NoError(t, rep.Sync(ctx))
	select {
	case err := <-wrote:
		require.NoError(t, err, "the writer commits while the whole database is read")
	default:
		t.Fatal("the whole database was not shipped")
	}
	assert.Equal(t, salt, saltAfter, "the log did not start over while it was read")
	rewrite(t, db, rnd, 41)
	require.NoError(t, rep.Sync(ctx))
	require.NoError(t, rep.Close(ctx))
	assertRestores(t, url, db)
}
