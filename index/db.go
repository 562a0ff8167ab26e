package index

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/pressly/goose/v3"
	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/wsstore/wsstore/migrations"
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
	// running migrations; Update fails with store.read_only.
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
	opts  Options
	write *sqlx.DB // nil when read-only
	read  *sqlx.DB

	closeOnce sync.Once
	closeErr  error
}

// Open opens (creating if needed) the SQLite database at path, applies
// pending migrations and checks the store format. It fails with
// store.newer_format if the store was written by a newer build and with
// store.invalid_options for bad options.
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
	if opts.ReadOnly {
		if _, err := os.Stat(abs); err != nil {
			return nil, fmt.Errorf("open %s: %w", path, err)
		}
	}
	db := &DB{path: abs, opts: opts}
	if !opts.ReadOnly {
		db.write, err = sqlx.Open("sqlite", db.dsn(false))
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", path, err)
		}
		db.write.SetMaxOpenConns(1)
		db.write.SetMaxIdleConns(1)
		db.write.SetConnMaxLifetime(0)
		db.write.SetConnMaxIdleTime(0)
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
		if err := db.checkFormat(ctx, db.read); err != nil {
			db.Close()
			return nil, err
		}
	}
	return db, nil
}

func (db *DB) dsn(read bool) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout("+strconv.FormatInt(db.opts.BusyTimeout.Milliseconds(), 10)+")")
	q.Add("_pragma", "foreign_keys(1)")
	if read {
		q.Add("_pragma", "query_only(1)")
		if db.opts.ReadOnly {
			q.Set("mode", "ro")
		}
	} else {
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous("+string(db.opts.Synchronous)+")")
		q.Set("_txlock", "immediate")
	}
	return "file:" + (&url.URL{Path: db.path}).EscapedPath() + "?" + q.Encode()
}

// migrate refuses a newer store, then applies pending migrations.
func (db *DB) migrate(ctx context.Context) error {
	if err := db.checkFormat(ctx, db.write); err != nil {
		return err
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, db.write.DB, migrations.FS,
		goose.WithDisableGlobalRegistry(true))
	if err != nil {
		return fmt.Errorf("open: migrations: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("open: apply migrations: %w", err)
	}
	return db.checkFormat(ctx, db.write)
}

// knownVersion is the highest migration version embedded in this build.
func knownVersion() (int64, error) {
	entries, err := migrations.FS.ReadDir(".")
	if err != nil {
		return 0, err
	}
	var max int64
	for _, e := range entries {
		var v int64
		if _, err := fmt.Sscanf(e.Name(), "%d_", &v); err == nil && v > max {
			max = v
		}
	}
	return max, nil
}

// checkFormat fails if the database records a migration version or a format
// version this build does not know. A new, empty database passes.
func (db *DB) checkFormat(ctx context.Context, conn *sqlx.DB) error {
	known, err := knownVersion()
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	var n int
	if err := conn.GetContext(ctx, &n, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'goose_db_version'`); err != nil {
		return fmt.Errorf("open %s: %w", db.path, Translate(err))
	}
	if n > 0 {
		var v sql.NullInt64
		if err := conn.GetContext(ctx, &v, `SELECT max(version_id) FROM goose_db_version WHERE is_applied`); err != nil {
			return fmt.Errorf("open %s: %w", db.path, Translate(err))
		}
		if v.Valid && v.Int64 > known {
			return wserr.New(wserr.NewerFormat, "open", "", "store %s has schema version %d; this build knows up to %d: upgrade wsstore", db.path, v.Int64, known)
		}
	}
	if err := conn.GetContext(ctx, &n, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'meta'`); err != nil {
		return fmt.Errorf("open %s: %w", db.path, Translate(err))
	}
	if n > 0 {
		var s string
		err := conn.GetContext(ctx, &s, `SELECT value FROM meta WHERE key = 'format_version'`)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("open %s: %w", db.path, Translate(err))
		}
		if err == nil {
			v, perr := strconv.Atoi(s)
			if perr != nil {
				return wserr.New(wserr.Corrupt, "open", "", "store %s has an unreadable format version %q", db.path, s)
			}
			if v > migrations.FormatVersion {
				return wserr.New(wserr.NewerFormat, "open", "", "store %s has format %d; this build knows up to %d: upgrade wsstore", db.path, v, migrations.FormatVersion)
			}
		}
	}
	return nil
}

// Path returns the absolute path of the database file.
func (db *DB) Path() string { return db.path }

// Close closes every connection. It is safe to call more than once.
func (db *DB) Close() error {
	db.closeOnce.Do(func() {
		var errs []error
		if db.read != nil {
			errs = append(errs, db.read.Close())
		}
		if db.write != nil {
			// Fold the WAL back so the file is self-contained when closed.
			_, _ = db.write.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
			errs = append(errs, db.write.Close())
		}
		db.closeErr = errors.Join(errs...)
	})
	return db.closeErr
}
