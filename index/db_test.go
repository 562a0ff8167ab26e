package index_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/migrations"
	"github.com/wsstore/wsstore/wserr"
)

// requireCode fails unless err is a *wserr.Error (anywhere in its chain)
// carrying code.
func requireCode(t *testing.T, err error, code wserr.Code) {
	t.Helper()
	require.Error(t, err)
	var we *wserr.Error
	require.True(t, errors.As(err, &we), "want *wserr.Error, got %T: %v", err, err)
	assert.Equal(t, code, we.Code, "%v", err)
	assert.True(t, errors.Is(err, &wserr.Error{Code: code}))
}

func TestOpenOptions(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		path string // "" means a fresh temporary file
		opts index.Options
		code wserr.Code // "" means Open succeeds
	}{
		{name: "OK/Defaults"},
		{name: "OK/SyncFull", opts: index.Options{Synchronous: index.SyncFull}},
		{name: "OK/SyncNormal", opts: index.Options{Synchronous: index.SyncNormal, BusyTimeout: time.Second, ReadConns: 1}},
		{name: "InvalidOptions/Synchronous", opts: index.Options{Synchronous: "OFF"}, code: wserr.InvalidOptions},
		{name: "InvalidOptions/LowercaseSynchronous", opts: index.Options{Synchronous: "full"}, code: wserr.InvalidOptions},
		{name: "InvalidOptions/NegativeBusyTimeout", opts: index.Options{BusyTimeout: -time.Second}, code: wserr.InvalidOptions},
		{name: "InvalidOptions/NegativeReadConns", opts: index.Options{ReadConns: -1}, code: wserr.InvalidOptions},
		{name: "InvalidOptions/EmptyPath", path: "-", code: wserr.InvalidOptions},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.code == "" {
				db := storetest.OpenDB(t, tt.opts)
				assert.True(t, filepath.IsAbs(db.Path()))
				require.NoError(t, db.Update(ctx, func(tx *index.Tx) error {
					assert.True(t, tx.Writable())
					_, err := tx.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES ('test', 'x')`)
					return err
				}))
				var mode, sync string
				require.NoError(t, db.Update(ctx, func(tx *index.Tx) error {
					if err := tx.GetContext(ctx, &mode, `PRAGMA journal_mode`); err != nil {
						return err
					}
					return tx.GetContext(ctx, &sync, `PRAGMA synchronous`)
				}))
				assert.Equal(t, "wal", mode)
				want := map[index.Synchronous]string{"": "1", index.SyncNormal: "1", index.SyncFull: "2"}[tt.opts.Synchronous]
				assert.Equal(t, want, sync, "PRAGMA synchronous")
				return
			}
			path := storetest.NewPath(t)
			if tt.path == "-" {
				path = ""
			}
			db, err := index.Open(ctx, path, tt.opts)
			requireCode(t, err, tt.code)
			assert.Nil(t, db)
			if path != "" {
				_, statErr := os.Stat(path)
				assert.True(t, os.IsNotExist(statErr), "a refused Open must not create the file")
			}
		})
	}
}

// gooseVersion returns the highest applied migration and the number of
// rows in goose's table.
func gooseVersion(t *testing.T, db *index.DB) (version int64, rows int) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, db.View(ctx, func(tx *index.Tx) error {
		if err := tx.GetContext(ctx, &version, `SELECT max(version_id) FROM goose_db_version WHERE is_applied`); err != nil {
			return err
		}
		return tx.GetContext(ctx, &rows, `SELECT count(*) FROM goose_db_version`)
	}))
	return version, rows
}

// latestMigration is the highest migration number embedded in this build.
func latestMigration(t *testing.T) int64 {
	t.Helper()
	entries, err := migrations.FS.ReadDir(".")
	require.NoError(t, err)
	var max int64
	for _, e := range entries {
		var v int64
		if _, err := fmt.Sscanf(e.Name(), "%d_", &v); err == nil && v > max {
			max = v
		}
	}
	require.Positive(t, max)
	return max
}

func TestOpenReopenIsIdempotent(t *testing.T) {
	ctx := context.Background()
	path := storetest.NewPath(t)

	db, err := index.Open(ctx, path, index.Options{})
	require.NoError(t, err)
	version, rows := gooseVersion(t, db)
	assert.Equal(t, latestMigration(t), version)
	require.NoError(t, db.Update(ctx, func(tx *index.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES ('test.kept', 'yes')`)
		return err
	}))
	require.NoError(t, db.Close())
	require.NoError(t, db.Close(), "Close twice")

	for i := range 2 {
		db, err := index.Open(ctx, path, index.Options{})
		require.NoError(t, err, "reopen %d", i)
		v, r := gooseVersion(t, db)
		assert.Equal(t, version, v, "goose version after reopen %d", i)
		assert.Equal(t, rows, r, "goose rows after reopen %d", i)
		require.NoError(t, db.Close())
	}

	db = storetest.OpenDBAt(t, path, index.Options{})
	var kept, format string
	require.NoError(t, db.View(ctx, func(tx *index.Tx) error {
		if err := tx.GetContext(ctx, &kept, `SELECT value FROM meta WHERE key = 'test.kept'`); err != nil {
			return err
		}
		return tx.GetContext(ctx, &format, `SELECT value FROM meta WHERE key = 'format_version'`)
	}))
	assert.Equal(t, "yes", kept)
	assert.Equal(t, strconv.Itoa(migrations.FormatVersion), format)
}

func TestOpenReadOnly(t *testing.T) {
	ctx := context.Background()
	t.Run("ErrMissingFile", func(t *testing.T) {
		path := storetest.NewPath(t)
		_, err := index.Open(ctx, path, index.Options{ReadOnly: true})
		require.Error(t, err)
		assert.ErrorIs(t, err, os.ErrNotExist)
		assert.Equal(t, wserr.NotFound, wserr.CodeOf(err), "%v", err)
		_, statErr := os.Stat(path)
		assert.True(t, os.IsNotExist(statErr), "a read-only Open must not create the file")
	})
	t.Run("OK", func(t *testing.T) {
		path := storetest.NewPath(t)
		db, err := index.Open(ctx, path, index.Options{})
		require.NoError(t, err)
		require.NoError(t, db.Update(ctx, func(tx *index.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES ('test.ro', 'yes')`)
			return err
		}))
		require.NoError(t, db.Close())

		ro := storetest.OpenDBAt(t, path, index.Options{ReadOnly: true})
		var v string
		require.NoError(t, ro.View(ctx, func(tx *index.Tx) error {
			assert.False(t, tx.Writable())
			return tx.GetContext(ctx, &v, `SELECT value FROM meta WHERE key = 'test.ro'`)
		}))
		assert.Equal(t, "yes", v)
		called := false
		err = ro.Update(ctx, func(tx *index.Tx) error { called = true; return nil })
		requireCode(t, err, wserr.ReadOnly)
		assert.False(t, called, "Update must not run fn on a read-only store")
	})
}

// fileSum returns the SHA-256 of the database file and of its WAL. A
// missing WAL counts as an empty one: a read-only connection cannot remove
// the empty WAL it found or made, and neither holds any change.
func fileSum(t *testing.T, path string) [2][32]byte {
	t.Helper()
	var sums [2][32]byte
	for i, p := range []string{path, path + "-wal"} {
		b, err := os.ReadFile(p)
		if i == 1 && os.IsNotExist(err) {
			err = nil
		}
		require.NoError(t, err)
		sums[i] = sha256.Sum256(b)
	}
	return sums
}

// rawExec runs SQL on the database file through the driver directly,
// bypassing index.Open's format check, as an older or newer build would.
func rawExec(t *testing.T, path string, stmts ...string) {
	t.Helper()
	raw, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer raw.Close()
	for _, s := range stmts {
		_, err := raw.Exec(s)
		require.NoError(t, err, s)
	}
}

func TestOpenRefusesNewerFormat(t *testing.T) {
	ctx := context.Background()
	newerFormat := strconv.Itoa(migrations.FormatVersion + 1)
	newerMigration := strconv.Itoa(int(latestMigration(t)) + 1)
	tests := []struct {
		name        string
		spoil, mend []string
	}{
		{
			name:  "NewerFormat/FormatVersion",
			spoil: []string{`UPDATE meta SET value = '` + newerFormat + `' WHERE key = 'format_version'`},
			mend:  []string{`UPDATE meta SET value = '` + strconv.Itoa(migrations.FormatVersion) + `' WHERE key = 'format_version'`},
		},
		{
			name:  "NewerFormat/GooseVersion",
			spoil: []string{`INSERT INTO goose_db_version (version_id, is_applied) VALUES (` + newerMigration + `, 1)`},
			mend:  []string{`DELETE FROM goose_db_version WHERE version_id = ` + newerMigration},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := storetest.NewPath(t)
			db, err := index.Open(ctx, path, index.Options{})
			require.NoError(t, err)
			require.NoError(t, db.Close())
			rawExec(t, path, tt.spoil...)
			before := fileSum(t, path)

			for _, opts := range []index.Options{{}, {ReadOnly: true}, {Synchronous: index.SyncFull}} {
				db, err := index.Open(ctx, path, opts)
				requireCode(t, err, wserr.NewerFormat)
				assert.Nil(t, db)
				assert.Equal(t, before, fileSum(t, path), "a refused Open (%+v) must not modify the store", opts)
			}

			// Mended by the newer build's hand, the store opens again and
			// passes the checks.
			rawExec(t, path, tt.mend...)
			storetest.OpenDBAt(t, path, index.Options{})
		})
	}
}

func TestOpenCorruptFormatVersion(t *testing.T) {
	ctx := context.Background()
	path := storetest.NewPath(t)
	db, err := index.Open(ctx, path, index.Options{})
	require.NoError(t, err)
	require.NoError(t, db.Close())
	rawExec(t, path, `UPDATE meta SET value = 'one' WHERE key = 'format_version'`)
	_, err = index.Open(ctx, path, index.Options{})
	requireCode(t, err, wserr.Corrupt)
	rawExec(t, path, `UPDATE meta SET value = '`+strconv.Itoa(migrations.FormatVersion)+`' WHERE key = 'format_version'`)
	storetest.OpenDBAt(t, path, index.Options{})
}

// TestConcurrentOpen opens one store from many goroutines at once, as
// several processes would: every Open succeeds and every migration is
// recorded once, on a new store and on one an older build left at its
// first migration.
func TestConcurrentOpen(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		upTo int64 // migrations applied before the race; 0 for a new file
		skip bool
	}{
		{name: "OK/NewStore"},
		{name: "OK/OlderStore", upTo: 1, skip: latestMigration(t) < 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.skip {
				t.Skip("this build has a single migration")
			}
			for round := range 5 {
				path := storetest.NewPath(t)
				if tt.upTo > 0 {
					raw, err := sql.Open("sqlite", path)
					require.NoError(t, err)
					p, err := goose.NewProvider(goose.DialectSQLite3, raw, migrations.FS, goose.WithDisableGlobalRegistry(true))
					require.NoError(t, err)
					_, err = p.UpTo(ctx, tt.upTo)
					require.NoError(t, err)
					require.NoError(t, raw.Close())
				}
				const openers = 8
				var wg sync.WaitGroup
				errs := make([]error, openers)
				start := make(chan struct{})
				for i := range openers {
					wg.Go(func() {
						<-start
						db, err := index.Open(ctx, path, index.Options{})
						if err == nil {
							err = db.Close()
						}
						errs[i] = err
					})
				}
				close(start)
				wg.Wait()
				for i, err := range errs {
					require.NoError(t, err, "round %d opener %d", round, i)
				}
				db := storetest.OpenDBAt(t, path, index.Options{})
				var dups int
				require.NoError(t, db.View(ctx, func(tx *index.Tx) error {
					return tx.GetContext(ctx, &dups, `SELECT count(*) FROM (SELECT version_id FROM goose_db_version
						GROUP BY version_id HAVING count(*) > 1)`)
				}))
				assert.Zero(t, dups, "versions recorded more than once")
				v, _ := gooseVersion(t, db)
				assert.Equal(t, latestMigration(t), v)
			}
		})
	}
}

// TestCreateRefusesALogLeftBehind: a directory whose database file was
// removed but whose write-ahead log was left gets no new store: SQLite
// would apply that log to the new database when it is first opened. The
// log is left as it was, and nothing is made.
func TestCreateRefusesALogLeftBehind(t *testing.T) {
	ctx := context.Background()
	path := storetest.NewPath(t)
	db, err := index.Open(ctx, path, index.Options{})
	require.NoError(t, err)
	require.NoError(t, db.Exec(ctx, `CREATE TABLE old_data (v TEXT)`))
	require.NoError(t, db.Exec(ctx, `INSERT INTO old_data VALUES ('from the removed store')`))
	// The log as the removed database left it, before any checkpoint
	// folded it in.
	wal, err := os.ReadFile(path + "-wal")
	require.NoError(t, err)
	require.NotEmpty(t, wal)
	require.NoError(t, db.Close())
	for _, f := range []string{path, path + "-wal", path + "-shm"} {
		require.NoError(t, os.RemoveAll(f))
	}
	require.NoError(t, os.WriteFile(path+"-wal", wal, 0o644))

	_, err = index.Open(ctx, path, index.Options{})
	requireCode(t, err, wserr.InvalidOptions)
	_, err = os.Stat(path)
	assert.ErrorIs(t, err, os.ErrNotExist, "no store made")
	left, err := os.ReadFile(path + "-wal")
	require.NoError(t, err)
	assert.Equal(t, wal, left, "the log is left as it was")

	// Once the log is gone, the store is made.
	require.NoError(t, os.Remove(path+"-wal"))
	storetest.OpenDBAt(t, path, index.Options{})
}
