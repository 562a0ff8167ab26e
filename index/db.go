package index

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"
	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/wsstore/wsstore/wserr"
)

// Synchronous selects SQLite's durability level for the write connection.
type Synchronous string

const (
	// SyncNormal loses at most the last transactions on power failure, never
	// consistency; it is the default and the right choice for WAL.
	SyncNormal Synchronous = "NORMAL"
	// SyncFull makes every commit durable before it returns.
	SyncFull Synchronous = "FULL"
)

// Options configure Open. The zero value means the defaults of
// DefaultOptions.
type Options struct {
	// Synchronous is SyncNormal (default) or SyncFull.
	Synchronous Synchronous
	// BusyTimeout is the deadline a write waits for the write lock
	// another process holds before it fails with store.busy; default 30s.
	// Writers queue meanwhile: the write connection asks SQLite for the
	// lock in short attempts and retries BEGIN IMMEDIATE with a jittered
	// backoff, so a waiting writer is not starved by busier processes.
	// Readers wait up to the same deadline for the rare locks they need.
	BusyTimeout time.Duration
	// ReadConns is the size of the read pool; default 4.
	ReadConns int
	// ReadOnly opens the store without a write connection and without
	// running migrations; Update fails with store.read_only, and a store
	// with pending migrations is refused with store.older_format.
	ReadOnly bool
	// Trace, if set, is called with the text of every statement a
	// transaction runs through Tx's methods (ExecContext, GetContext,
	// SelectContext, QueryRowContext, QueryxContext), from the goroutine
	// running it: tests count a call's statements and check their query
	// plans with it.
	Trace func(query string)
}

// DefaultOptions returns the options Open uses for zero fields.
func DefaultOptions() Options {
	return Options{Synchronous: SyncNormal, BusyTimeout: 30 * time.Second, ReadConns: 4}
}

// Validate reports what Open would refuse in o, store.invalid_options,
// without opening anything.
func (o Options) Validate() error {
	_, err := o.withDefaults()
	return err
}

func (o Options) withDefaults() (Options, error) {
	d := DefaultOptions()
	if o.Synchronous == "" {
		o.Synchronous = d.Synchronous
	}
	if o.Synchronous != SyncNormal && o.Synchronous != SyncFull {
		return o, wserr.New(wserr.InvalidOptions, "open", "", "synchronous must be NORMAL or FULL, not %q", o.Synchronous)
	}
	if o.BusyTimeout == 0 {
		o.BusyTimeout = d.BusyTimeout
	}
	if o.BusyTimeout < 0 {
		return o, wserr.New(wserr.InvalidOptions, "open", "", "busy timeout must not be negative")
	}
	if o.ReadConns == 0 {
		o.ReadConns = d.ReadConns
	}
	if o.ReadConns < 0 {
		return o, wserr.New(wserr.InvalidOptions, "open", "", "read connections must not be negative")
	}
	return o, nil
}

// DB is an open store database.
type DB struct {
	path  string
	fresh bool // a new database that create is making
	// immutable: the file cannot be written (a read-only file system), so
	// it is opened with immutable=1, without locks or a log index.
	immutable bool
	opts      Options
	write     *sqlx.DB         // nil when read-only
	guard     txGuard          // write's (guard.go)
	stmts     stmtCache        // statements prepared on write
	ckpt      *walCheckpointer // nil when read-only
	// shm is the process's registration on the store's -shm file
	// (walckpt.go), held from before the first connection to Close.
	shm  *shmFile
	read *sqlx.DB
	// readStmts are prepared on the read pool; database/sql prepares
	// each again, once, on every pool connection a transaction uses.
	readStmts stmtCache

	// created holds the rows of each table (but meta) of the store this
	// Open created, as create left them; nil when it found one (Discard).
	created map[string]int64
	// clock, when set, is the store's clock: a write while its last
	// reading is out of range fails (SetClock).
	clock *Clock

	// writes counts the write transactions begun (Writes).
	writes atomic.Uint64

	closeOnce sync.Once
	closeErr  error
	closed    atomic.Bool // Close has begun: every later transaction is refused
}

// errClosed is what a transaction begun after Close fails with.
func errClosed(op string) error {
	return wserr.New(wserr.Closed, op, "", "the store is closed")
}

// CheckOpen fails with store.closed, naming op, once Close has begun: a
// read answered from memory (a cache) checks it, so that it fails after
// Close as a read of the database does.
func (db *DB) CheckOpen(op string) error {
	if db.closed.Load() {
		return errClosed(op)
	}
	return nil
}

// Writes returns how many write transactions this DB has begun since it
// was opened, so background work can tell whether the store has been idle
// (the count did not move) while it waited.
func (db *DB) Writes() uint64 { return db.writes.Load() }

// Open opens the SQLite database at path, applies pending migrations and
// checks the store format. A missing file is created as a new store (not
// when ReadOnly); an existing one is never written over: a file that is
// empty or not a wsstore store fails with store.not_a_store and one that is
// damaged or truncated with store.corrupt, both left untouched. It fails
// with store.newer_format if the store was written by a newer build and
// with store.invalid_options for bad options, and with store.not_found for
// a missing file when ReadOnly, with store.invalid_options for a path no
// file can have (below a file, say) and, unless ReadOnly, for a symbolic
// link to nothing, and for a file this user may not read (or one under a
// directory the user may not enter). A file on a read-only file
// system, or one this user may not write, fails with store.read_only
// unless ReadOnly, which reads it as immutable.
func Open(ctx context.Context, path string, opts Options) (_ *DB, err error) {
	opts, err = opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if path == "" {
		return nil, wserr.New(wserr.InvalidOptions, "open", "", "empty database path")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	db := &DB{path: abs, opts: opts}
	fi, statErr := os.Stat(abs)
	if statErr == nil && !fi.Mode().IsRegular() {
		return nil, wserr.New(wserr.NotAStore, "open", abs, "is a %s, not a database file", fileKind(fi.Mode()))
	}
	if statErr != nil && !errors.Is(statErr, fs.ErrNotExist) && !errors.Is(statErr, fs.ErrPermission) {
		// A parent that is a file, a loop of symbolic links, a name too
		// long: no database is there, and none can be made there.
		return nil, wserr.Wrap(wserr.InvalidOptions, "open", abs, fmt.Errorf("no database file can be at this path: %w", statErr))
	}
	if errors.Is(statErr, fs.ErrPermission) || (statErr == nil && !readable(abs)) {
		return nil, wserr.New(wserr.InvalidOptions, "open", abs, "this user may not read the store's database file, or a directory on its path: it can be neither read nor changed")
	}
	if errors.Is(statErr, fs.ErrNotExist) {
		if opts.ReadOnly {
			return nil, wserr.Wrap(wserr.NotFound, "open", abs, statErr)
		}
		if fi, err := os.Lstat(abs); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			// create links the new store into place, which a link
			// there, leading nowhere, stops.
			return nil, wserr.New(wserr.InvalidOptions, "open", abs, "is a symbolic link to nothing: a store is not created through one; remove it, or make it lead to a store")
		}
		if db.created, err = create(ctx, abs, opts); err != nil {
			return nil, err
		}
		if db.created != nil {
			// Every failure from here on has closed db before it
			// returns: the store this call made goes again.
			defer func() {
				if err != nil {
					removeCreated(abs, db.created)
				}
			}()
		}
	}
	if !writable(abs) {
		if !opts.ReadOnly {
			return nil, wserr.New(wserr.ReadOnly, "open", "", "%s is on a read-only file system or not writable by this user: it can be read, not changed", abs)
		}
		// Nothing can change the file, and SQLite could not make the
		// write-ahead log's index beside it: read it as immutable, which
		// takes no lock and needs no other file.
		if wal, err := os.Stat(abs + "-wal"); err == nil && wal.Size() > 0 {
			return nil, wserr.New(wserr.ReadOnly, "open", "", "%s has a write-ahead log that is not folded in, and neither can be written here: open it once where it is writable", abs)
		}
		db.immutable = true
	}
	// Before the first connection (the probe's): from here on the
	// process's locks on the store's -shm file are held for this DB too,
	// and every failure goes through Close, which releases it last.
	db.shm = acquireShm(abs)
	if err := db.probe(ctx); err != nil {
		db.Close()
		return nil, err
	}
	if !opts.ReadOnly {
		db.write, err = openGuarded(db.dsn(false), &db.guard)
		if err != nil {
			db.Close()
			return nil, fmt.Errorf("open %s: %w", path, err)
		}
		db.write.SetMaxOpenConns(1)
		db.write.SetMaxIdleConns(1)
		db.write.SetConnMaxLifetime(0)
		db.write.SetConnMaxIdleTime(0)
		if err := db.connect(ctx, db.write); err != nil {
			db.Close()
			return nil, fmt.Errorf("open %s: %w", path, err)
		}
		if err := db.migrate(ctx); err != nil {
			db.Close()
			return nil, err
		}
		removeStaleCreations(abs, time.Now())
		conn, err := sqlx.Open("sqlite", db.checkpointDSN())
		if err != nil {
			db.Close()
			return nil, fmt.Errorf("open %s: %w", path, err)
		}
		conn.SetMaxOpenConns(1)
		conn.SetMaxIdleConns(1)
		conn.SetConnMaxLifetime(0)
		conn.SetConnMaxIdleTime(0)
		db.ckpt = newWALCheckpointer(conn, db.shm)
	}
	db.read, err = sqlx.Open("sqlite", db.dsn(true))
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	db.read.SetMaxOpenConns(opts.ReadConns)
	db.read.SetMaxIdleConns(opts.ReadConns)
	if opts.ReadOnly {
		err := db.checkFormat(ctx, db.read)
		if err == nil {
			err = db.checkCurrent(ctx, db.read)
		}
		if err != nil {
			db.Close()
			return nil, err
		}
	}
	return db, nil
}

// connect opens conn's first connection, retrying while SQLite reports
// the file busy, up to the busy timeout: the first connections to a new
// store race to switch it to WAL, and SQLite refuses the losers at once
// rather than through the busy handler.
func (db *DB) connect(ctx context.Context, conn *sqlx.DB) error {
	return db.whileBusy(ctx, func() error { return Translate(conn.PingContext(ctx)) })
}

// probeDSN opens the file read-only and sets nothing, so probing writes
// no byte of a file that may not be a store.
func (db *DB) probeDSN() string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout("+strconv.FormatInt(db.opts.BusyTimeout.Milliseconds(), 10)+")")
	q.Set("mode", "ro")
	if db.immutable {
		q.Set("immutable", "1")
	}
	return "file:" + (&url.URL{Path: db.path}).EscapedPath() + "?" + q.Encode()
}

// cacheKiB is the page cache of each connection, in KiB.
const cacheKiB = 1024

func (db *DB) dsn(read bool) string {
	q := url.Values{}
	wait := db.opts.BusyTimeout
	if !read {
		// One attempt at the lock; beginWrite retries up to BusyTimeout.
		wait = min(wait, writeAttempt)
	}
	q.Add("_pragma", "busy_timeout("+strconv.FormatInt(wait.Milliseconds(), 10)+")")
	q.Add("_pragma", "foreign_keys(1)")
	// SQLite's page cache holds each 4 KiB page in an 8 KiB slot of the
	// allocator, so the default 2 MB cache costs 4 MB of memory per
	// connection, most of it overflow pages of large blobs passing
	// through; the metadata a transaction touches fits in far less.
	q.Add("_pragma", "cache_size("+strconv.Itoa(-cacheKiB)+")")
	if read {
		q.Add("_pragma", "query_only(1)")
		if db.opts.ReadOnly {
			q.Set("mode", "ro")
		}
		if db.immutable {
			q.Set("immutable", "1")
		}
	} else {
		if db.fresh {
			// Before the first page is written, so a new database gives
			// freed pages back with IncrementalVacuum; an existing one
			// keeps its setting until a VACUUM rebuilds it.
			q.Add("_pragma", "auto_vacuum(INCREMENTAL)")
		}
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous("+string(db.opts.Synchronous)+")")
		q.Add("_pragma", "wal_autocheckpoint("+strconv.Itoa(walOwnPages)+")")
		q.Set("_txlock", "immediate")
	}
	return "file:" + (&url.URL{Path: db.path}).EscapedPath() + "?" + q.Encode()
}

// checkpointDSN is the background checkpoint's connection (walckpt.go):
// it writes nothing but the database file's pages from the log, syncing
// as the write connection does.
func (db *DB) checkpointDSN() string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(0)")
	q.Add("_pragma", "cache_size(-64)")
	q.Add("_pragma", "synchronous("+string(db.opts.Synchronous)+")")
	return "file:" + (&url.URL{Path: db.path}).EscapedPath() + "?" + q.Encode()
}

// FileBytes returns the size on disk of the database file plus its
// write-ahead log (absent when the store was closed cleanly).
func (db *DB) FileBytes() (int64, error) {
	var n int64
	for _, p := range []string{db.path, db.path + "-wal"} {
		fi, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) && p != db.path {
			continue
		}
		if err != nil {
			return 0, err
		}
		n += fi.Size()
	}
	return n, nil
}

// LogBytes returns the size of the database's write-ahead log file (0
// when there is none): the part of FileBytes not yet folded into the
// database file.
func (db *DB) LogBytes() (int64, error) {
	fi, err := os.Stat(db.path + "-wal")
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// Path returns the absolute path of the database file.
func (db *DB) Path() string { return db.path }

// Immutable reports whether db is read as immutable: opened ReadOnly on a
// file nothing can write (a read-only file system, or one this user may
// not write), without locks or a write-ahead log index. Another
// connection to the file must open it so too (SQLite's immutable=1).
func (db *DB) Immutable() bool { return db.immutable }

// Discard closes db and, if its Open created the store's database,
// removes it again, with its log and index: for a caller that could not
// go on opening the store it created. It is left if another opener may
// have begun to use it meanwhile: when another connection, in this
// process or another, has it open, or when any of its tables but meta
// holds rows other than the new store's. Discard reports whether it
// removed the database.
func (db *DB) Discard() bool {
	db.Close()
	return db.created != nil && removeCreated(db.path, db.created)
}

// FilesOf are the files SQLite keeps the database file db in: it, its
// write-ahead log, its shared-memory index and a rollback journal. A
// process that has the database open must never open and close one of
// them otherwise: that drops the locks its connections hold.
func FilesOf(db string) []string {
	return []string{db, db + "-wal", db + "-shm", db + "-journal"}
}

// Close closes every connection. It is safe to call more than once.
func (db *DB) Close() error {
	db.closed.Store(true)
	db.closeOnce.Do(func() {
		var errs []error
		if db.read != nil {
			db.readStmts.close()
			errs = append(errs, db.read.Close())
		}
		if db.ckpt != nil {
			errs = append(errs, db.ckpt.close())
		}
		if db.write != nil {
			// Fold the WAL back so the file is self-contained when closed,
			// without waiting long on readers that hold it (another
			// process, or Litestream's replication, which keeps a read
			// transaction open): what they hold is folded later.
			db.stmts.close()
			_, _ = db.write.Exec(`PRAGMA busy_timeout = 100`)
			_, _ = db.write.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
			errs = append(errs, db.write.Close())
		}
		if db.shm != nil {
			// Last: no connection of this DB holds a lock the close of
			// the -shm descriptor would drop (walckpt.go).
			releaseShm(db.shm)
		}
		db.closeErr = errors.Join(errs...)
	})
	return db.closeErr
}

// fileKind names what mode says a file that is not a regular one is.
func fileKind(mode fs.FileMode) string {
	switch {
	case mode.IsDir():
		return "directory"
	case mode&fs.ModeNamedPipe != 0:
		return "named pipe"
	case mode&fs.ModeSocket != 0:
		return "socket"
	case mode&fs.ModeDevice != 0:
		return "device"
	}
	return "special file"
}
