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
	// BusyTimeout is how long a connection waits for SQLite's lock before
	// failing; default 10s.
	BusyTimeout time.Duration
	// ReadConns is the size of the read pool; default 4.
	ReadConns int
	// ReadOnly opens the store without a write connection and without
	// running migrations; Update fails with store.read_only, and a store
	// with pending migrations is refused with store.older_format.
	ReadOnly bool
}

// DefaultOptions returns the options Open uses for zero fields.
func DefaultOptions() Options {
	return Options{Synchronous: SyncNormal, BusyTimeout: 10 * time.Second, ReadConns: 4}
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
	opts  Options
	write *sqlx.DB  // nil when read-only
	stmts stmtCache // statements prepared on write
	read  *sqlx.DB
	// readStmts are prepared on the read pool; database/sql prepares
	// each again, once, on every pool connection a transaction uses.
	readStmts stmtCache

	closeOnce sync.Once
	closeErr  error
}

// Open opens the SQLite database at path, applies pending migrations and
// checks the store format. A missing file is created as a new store (not
// when ReadOnly); an existing one is never written over: a file that is
// empty or not a wsstore store fails with store.not_a_store and one that is
// damaged or truncated with store.corrupt, both left untouched. It fails
// with store.newer_format if the store was written by a newer build and
// with store.invalid_options for bad options.
func Open(ctx context.Context, path string, opts Options) (*DB, error) {
	opts, err := opts.withDefaults()
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
	_, statErr := os.Stat(abs)
	if errors.Is(statErr, fs.ErrNotExist) {
		if opts.ReadOnly {
			return nil, fmt.Errorf("open %s: %w", path, statErr)
		}
		if err := create(ctx, abs, opts); err != nil {
			return nil, err
		}
	}
	if err := db.probe(ctx); err != nil {
		return nil, err
	}
	if !opts.ReadOnly {
		db.write, err = sqlx.Open("sqlite", db.dsn(false))
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", path, err)
		}
		db.write.SetMaxOpenConns(1)
		db.write.SetMaxIdleConns(1)
		db.write.SetConnMaxLifetime(0)
		db.write.SetConnMaxIdleTime(0)
		if err := db.connect(ctx, db.write); err != nil {
			db.write.Close()
			return nil, fmt.Errorf("open %s: %w", path, err)
		}
		if err := db.migrate(ctx); err != nil {
			db.write.Close()
			return nil, err
		}
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
	deadline := time.Now().Add(db.opts.BusyTimeout)
	for delay := time.Millisecond; ; delay = min(2*delay, 100*time.Millisecond) {
		err := Translate(conn.PingContext(ctx))
		if err == nil || !wserr.Is(err, wserr.Busy) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
	}
}

// probeDSN opens the file read-only and sets nothing, so probing writes
// no byte of a file that may not be a store.
func (db *DB) probeDSN() string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout("+strconv.FormatInt(db.opts.BusyTimeout.Milliseconds(), 10)+")")
	q.Set("mode", "ro")
	return "file:" + (&url.URL{Path: db.path}).EscapedPath() + "?" + q.Encode()
}

// cacheKiB is the page cache of each connection, in KiB.
const cacheKiB = 1024

func (db *DB) dsn(read bool) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout("+strconv.FormatInt(db.opts.BusyTimeout.Milliseconds(), 10)+")")
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
	} else {
		if db.fresh {
			// Before the first page is written, so a new database gives
			// freed pages back with IncrementalVacuum; an existing one
			// keeps its setting until a VACUUM rebuilds it.
			q.Add("_pragma", "auto_vacuum(INCREMENTAL)")
		}
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous("+string(db.opts.Synchronous)+")")
		q.Set("_txlock", "immediate")
	}
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

// Path returns the absolute path of the database file.
func (db *DB) Path() string { return db.path }

// Close closes every connection. It is safe to call more than once.
func (db *DB) Close() error {
	db.closeOnce.Do(func() {
		var errs []error
		if db.read != nil {
			db.readStmts.close()
			errs = append(errs, db.read.Close())
		}
		if db.write != nil {
			// Fold the WAL back so the file is self-contained when closed.
			db.stmts.close()
			_, _ = db.write.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
			errs = append(errs, db.write.Close())
		}
		db.closeErr = errors.Join(errs...)
	})
	return db.closeErr
}
