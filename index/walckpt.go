package index

import (
	"context"
	"encoding/binary"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"
)

// The write-ahead log is folded into the database file mostly by a
// connection of its own, in the background. SQLite's automatic checkpoint
// runs inside the commit that takes the log past 1,000 pages: it copies
// them into the database file and syncs both files, so about one write in
// sixty of a session waited 10–25 ms for it (measured here, with a small
// write taking about 1 ms). Instead, after every write transaction the DB
// reads the log's length and how much of it the database file holds, from
// the header of the log's index (the -shm file, whose layout is part of
// SQLite's file format). Past walPages frames not yet copied it wakes a
// goroutine that runs PASSIVE checkpoints on its own connection, which
// block no writer or reader, until few frames are left (trying again
// while readers' snapshots hold the copy back). The log starts
// over only at a write that begins with every frame copied, which a
// checkpoint running beside the writes rarely leaves; so once the log is
// long and the background has copied all but walCatchUp frames and this
// commit's own, the write connection copies the rest itself, after its
// commit: a few pages and the syncs, not a thousand pages. Writes that
// follow one another without a pause (a gc's steps, a batch) keep the
// background a few commits behind, so that never happens by itself, and
// SQLite's automatic checkpoint, at walOwnPages, finds the background's
// pass holding the checkpoint lock and gives up: the log grew to several
// times the database. So once the log holds walLongPages frames the
// write connection, after its commit, waits for the background's pass
// to end and copies the rest itself, and the next write starts the log
// over.

const (
	// walPages is the count of frames not yet in the database file at
	// which the background checkpoint runs (SQLite's own default).
	walPages = 1000
	// walCatchUp is the most frames, besides a commit's own, that the
	// write connection copies to let the log start over.
	walCatchUp = 128
	// walOwnPages is the write connection's automatic checkpoint.
	walOwnPages = 16 * walPages
	// walLongPages is the log's length at which the write connection
	// copies what is left after its commit, however much that is.
	walLongPages = 4 * walPages
	// walRetry is how long the background checkpoint waits to try again
	// when readers held its copy back, doubled at each try up to
	// walRetryMax.
	walRetry    = 20 * time.Millisecond
	walRetryMax = time.Second
)

// Offsets in the wal-index header (https://www.sqlite.org/walformat.html):
// mxFrame, the last valid frame of the log, in the first copy of the
// header, and nBackfill, the frames copied back into the database, in the
// checkpoint information after the two copies. Both are 32-bit integers
// in the machine's byte order.
const (
	shmMxFrame   = 16
	shmNBackfill = 96
	shmHeader    = shmNBackfill + 4
)

// walCheckpointer runs the background checkpoints of one DB.
type walCheckpointer struct {
	conn *sqlx.DB
	kick chan struct{}
	done chan struct{}
	runs atomic.Int64 // checkpoints run
	// pass is held through each background checkpoint, and by Exec, so
	// that a checkpoint asked for (one that truncates the log, a vacuum)
	// waits for a background one rather than finding the log busy.
	pass sync.Mutex

	mu     sync.Mutex
	shm    *shmFile // the process's descriptor of the -shm file
	closed bool
	manual bool // tests: no background checkpoint is woken
}

func newWALCheckpointer(conn *sqlx.DB, shm *shmFile) *walCheckpointer {
	c := &walCheckpointer{conn: conn, kick: make(chan struct{}, 1), done: make(chan struct{}), shm: shm}
	go c.loop()
	return c
}

// A process must never close a descriptor of a file SQLite holds POSIX
// locks on: closing any descriptor of a file drops every lock the process
// holds on it, whatever descriptor took them. SQLite keeps its WAL locks
// (the writer's, the checkpointer's, the readers' marks, and the one that
// says the log's index is in use) on the -shm file, so a close of the
// descriptor the header is read through, while any connection of the
// process still had the store open, let another process write or
// checkpoint beside it, or start the log's index over under it: the
// database was corrupted by two processes that closed and wrote at once.
// So the process keeps one descriptor per -shm file, shared by every DB
// open on the store, registered before the DB's first connection (Open)
// and closed only once the last of them has closed all its connections
// (releaseShm, at the end of DB.Close).

// shmFile is the process's descriptor of one store's -shm file, opened on
// first read, and the count of DBs using the store.
type shmFile struct {
	db    os.FileInfo // the database file, to know it by whatever path
	path  string      // the -shm file
	f     *os.File    // nil until first read
	users int
}

var shmFiles = struct {
	mu   sync.Mutex
	list []*shmFile
}{}

// acquireShm registers a user of the store whose database file is at
// dbPath (it exists): every path to the same file (a symbolic link, a
// bind mount, another case on a case-insensitive file system) shares one
// entry.
func acquireShm(dbPath string) *shmFile {
	fi, err := os.Stat(dbPath)
	shmFiles.mu.Lock()
	defer shmFiles.mu.Unlock()
	for _, s := range shmFiles.list {
		if err == nil && os.SameFile(s.db, fi) {
			s.users++
			return s
		}
	}
	s := &shmFile{db: fi, path: dbPath + "-shm", users: 1}
	if err == nil {
		shmFiles.list = append(shmFiles.list, s)
	}
	return s
}

// HoldShm keeps the process's descriptor of the -shm file of the database
// file at dbPath open until release is called, as an open DB does, for
// connections to the database this package did not open (Litestream's):
// the close of the descriptor, once the last DB on the store closed,
// dropped every lock they held on the file, and another process could
// then fold the log back and start it over under them. Call release once
// those connections are closed.
func HoldShm(dbPath string) (release func()) {
	s := acquireShm(dbPath)
	var once sync.Once
	return func() { once.Do(func() { releaseShm(s) }) }
}

// releaseShm drops a user of s, closing the descriptor when none is left:
// the caller has closed every connection it had on the store.
func releaseShm(s *shmFile) {
	shmFiles.mu.Lock()
	defer shmFiles.mu.Unlock()
	if s.users--; s.users > 0 {
		return
	}
	if s.f != nil {
		s.f.Close()
		s.f = nil
	}
	for i, e := range shmFiles.list {
		if e == s {
			shmFiles.list = append(shmFiles.list[:i], shmFiles.list[i+1:]...)
			break
		}
	}
}

// readHeader reads the start of the -shm file into h.
func (s *shmFile) readHeader(h []byte) (int, error) {
	shmFiles.mu.Lock()
	if s.f == nil {
		f, err := os.Open(s.path)
		if err != nil {
			shmFiles.mu.Unlock()
			return 0, err
		}
		s.f = f
	}
	f := s.f
	shmFiles.mu.Unlock()
	return f.ReadAt(h, 0)
}

func (c *walCheckpointer) loop() {
	defer close(c.done)
	for range c.kick {
		// A pass that readers held back (a checkpoint copies no frame
		// past the oldest snapshot a reader holds) is tried again, since
		// no write may come to wake it: soon, then less and less often.
		for wait := walRetry; c.passes(); wait = min(2*wait, walRetryMax) {
			t := time.NewTimer(wait)
			select {
			case _, open := <-c.kick: // a write woke it sooner
				t.Stop()
				if !open {
					return
				}
			case <-t.C:
			}
		}
	}
}

// passes runs a checkpoint and, while writes go on, copies what they
// added meanwhile, a few times at most. It reports whether walPages
// frames or more are left: readers held the copy back. An error (the file
// busy in another process's checkpoint, a closing store) leaves the log to
// the next turn, or to the write connection.
func (c *walCheckpointer) passes() (heldBack bool) {
	for range 4 {
		c.pass.Lock()
		_, err := c.conn.ExecContext(context.Background(), `PRAGMA wal_checkpoint(PASSIVE)`)
		c.pass.Unlock()
		if err != nil {
			return false
		}
		c.runs.Add(1)
		if _, pending := c.log(); pending <= walCatchUp {
			return false
		}
	}
	_, pending := c.log()
	return pending >= walPages
}

// frames returns the log's length in frames, as the log's index says (0
// when it cannot be read), for committed.
func (c *walCheckpointer) frames() int64 {
	n, _ := c.log()
	return n
}

// committed is called after each write transaction with the log's length
// before it began: it wakes the background checkpoint when the log holds
// walPages frames or more that the database file does not, and reports
// whether the write connection should copy the rest itself: the log is
// long and all but the commit's own frames and walCatchUp more are
// copied, or it holds walLongPages frames or more, when it must wait for
// the background's pass first (wait).
func (c *walCheckpointer) committed(before int64) (catchUp, wait bool) {
	n, pending := c.log()
	own := n - before
	if own < 0 {
		own = n // the log started over in this transaction
	}
	if n < walPages {
		return false, false
	}
	if n >= walLongPages {
		return true, true
	}
	if pending <= own+walCatchUp {
		return true, false
	}
	if pending >= walPages {
		c.mu.Lock()
		defer c.mu.Unlock()
		if !c.closed && !c.manual {
			select {
			case c.kick <- struct{}{}:
			default:
			}
		}
	}
	return false, false
}

// log returns the log's length in frames and how many of them the
// database file does not hold yet, as the log's index says; zeros when it
// cannot be read.
func (c *walCheckpointer) log() (frames, pending int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, 0
	}
	var h [shmHeader]byte
	if n, err := c.shm.readHeader(h[:]); n < len(h) || err != nil {
		return 0, 0
	}
	mx := binary.NativeEndian.Uint32(h[shmMxFrame:])
	back := binary.NativeEndian.Uint32(h[shmNBackfill:])
	if back > mx {
		return int64(mx), 0 // a header read while it was rewritten
	}
	return int64(mx), int64(mx - back)
}

// close stops the goroutine, then closes the connection. The -shm file's
// descriptor stays open until the DB's other connections are closed too
// (DB.Close releases it).
func (c *walCheckpointer) close() error {
	c.mu.Lock()
	c.closed = true
	close(c.kick)
	c.mu.Unlock()
	<-c.done
	return c.conn.Close()
}
