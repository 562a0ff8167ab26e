package index

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jmoiron/sqlx"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"

	"github.com/wsstore/wsstore/migrations"
	"github.com/wsstore/wsstore/wserr"
)

// Several processes may open the same store at once, each running the
// migrations. goose's SQLite dialect has no lock, so two openers can both
// find a migration pending. Each migration runs in its own BEGIN IMMEDIATE
// transaction (the write pool's _txlock), so the two run one after the
// other; versionStore makes the second one fail inside its transaction, so
// it rolls back whole instead of applying twice, and migrate then starts
// over and finds that migration applied.

// errApplied is returned, inside the migration's transaction, when another
// connection recorded the migration first.
var errApplied = errors.New("migration already applied by another connection")

// versionStore is goose's SQLite version store, made safe for concurrent
// openers: it records a version only if no one has, and creates the
// version table only if it is missing, both checked in the transaction
// that writes.
type versionStore struct {
	database.Store
}

var _ database.StoreExtender = versionStore{}

func newVersionStore() (versionStore, error) {
	s, err := database.NewStore(database.DialectSQLite3, goose.DefaultTablename)
	if err != nil {
		return versionStore{}, err
	}
	return versionStore{s}, nil
}

// TableExists reports whether the version table exists. (goose's SQLite
// dialect has no such query and would probe by reading a version.)
func (s versionStore) TableExists(ctx context.Context, db database.DBTxConn) (bool, error) {
	var n int
	err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?`,
		s.Tablename()).Scan(&n)
	return n > 0, err
}

func (s versionStore) CreateVersionTable(ctx context.Context, db database.DBTxConn) error {
	// goose checked outside a transaction; check again inside it.
	if ok, err := s.TableExists(ctx, db); err != nil || ok {
		return err
	}
	return s.Store.CreateVersionTable(ctx, db)
}

func (s versionStore) Insert(ctx context.Context, db database.DBTxConn, req database.InsertRequest) error {
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM `+s.Tablename()+` WHERE version_id = ? AND is_applied`,
		req.Version).Scan(&n); err != nil {
		return err
	}
	switch {
	case n == 0:
		return s.Store.Insert(ctx, db, req)
	case req.Version == 0:
		return nil // the version table's first row, written by whoever created it
	}
	return fmt.Errorf("version %d: %w", req.Version, errApplied)
}

// migrate refuses a newer store, then applies pending migrations. If
// another opener applies a migration first, it starts over.
func (db *DB) migrate(ctx context.Context) error {
	store, err := newVersionStore()
	if err != nil {
		return fmt.Errorf("open: migrations: %w", err)
	}
	known, err := knownVersion()
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	// Every retry follows a migration someone else applied, so there are
	// at most as many as there are migrations.
	for attempt := int64(0); ; attempt++ {
		if err := db.checkFormat(ctx, db.write); err != nil {
			return err
		}
		p, err := goose.NewProvider(goose.DialectCustom, db.write.DB, migrations.FS,
			goose.WithStore(store), goose.WithDisableGlobalRegistry(true))
		if err != nil {
			return fmt.Errorf("open: migrations: %w", err)
		}
		// Each migration takes the write lock: wait for it as Update does.
		err = db.whileBusy(ctx, func() error {
			_, err := p.Up(ctx)
			if err != nil && wserr.Is(Translate(err), wserr.Busy) {
				return Translate(err)
			}
			return err
		})
		if err == nil {
			return db.checkFormat(ctx, db.write)
		}
		if cerr := ctx.Err(); cerr != nil && endedByRollback(err) {
			// database/sql rolled the migration back when ctx ended, and
			// goose's commit met that: the end is what happened.
			return fmt.Errorf("open: apply migrations: %w", wserr.Wrap(wserr.Canceled, "", "", fmt.Errorf("%w: %w", cerr, err)))
		}
		if attempt > known || !db.appliedMeanwhile(ctx, store, err) {
			return fmt.Errorf("open: apply migrations: %w", Translate(err))
		}
	}
}

// appliedMeanwhile reports whether the migration that failed with err is
// now recorded as applied, by another connection.
func (db *DB) appliedMeanwhile(ctx context.Context, store versionStore, err error) bool {
	var pe *goose.PartialError
	if !errors.As(err, &pe) || pe.Failed == nil || pe.Failed.Source == nil {
		return false
	}
	m, gerr := store.GetMigration(ctx, db.write.DB, pe.Failed.Source.Version)
	return gerr == nil && m.IsApplied
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

// checkCurrent fails with store.older_format if migrations are pending: a
// read-only open cannot apply them, and this build's queries would meet
// columns that are not there yet.
func (db *DB) checkCurrent(ctx context.Context, conn *sqlx.DB) error {
	known, err := knownVersion()
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	var v sql.NullInt64
	err = conn.GetContext(ctx, &v, `SELECT max(version_id) FROM goose_db_version WHERE is_applied`)
	if err != nil && !strings.Contains(err.Error(), "no such table") {
		return fmt.Errorf("open %s: %w", db.path, Translate(err))
	}
	if !v.Valid || v.Int64 < known {
		return wserr.New(wserr.OlderFormat, "open", "", "store %s has schema version %d; this build needs %d: open it once for writing to upgrade it", db.path, v.Int64, known)
	}
	return nil
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
