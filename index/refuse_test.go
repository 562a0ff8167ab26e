package index_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/wserr"
)

// TestOpenRefusesWhatIsNotAStore: an existing database file that is
// empty, not SQLite, a foreign SQLite database or a store cut short is
// refused with its code, by a writing and a read-only open alike, and no
// byte of it changes; no log files are left beside it.
func TestOpenRefusesWhatIsNotAStore(t *testing.T) {
	ctx := context.Background()
	store := func(t *testing.T) []byte {
		path := storetest.NewPath(t)
		db, err := index.Open(ctx, path, index.Options{})
		require.NoError(t, err)
		require.NoError(t, db.Update(ctx, func(tx *index.Tx) error {
			_, err := tx.ExecContext(ctx, `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200)
				INSERT INTO meta (key, value) SELECT 'pad' || i, hex(randomblob(1500)) FROM n`)
			return err
		}))
		require.NoError(t, db.Close())
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		return b
	}
	foreign := func(t *testing.T, stmts ...string) []byte {
		path := storetest.NewPath(t)
		rawExec(t, path, stmts...)
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		return b
	}
	garbage := make([]byte, 16384)
	_, _ = rand.Read(garbage)
	tests := []struct {
		name    string
		content func(t *testing.T) []byte
		code    wserr.Code
	}{
		{"NotAStore/Empty", func(*testing.T) []byte { return nil }, wserr.NotAStore},
		{"NotAStore/Garbage", func(*testing.T) []byte { return garbage }, wserr.NotAStore},
		{"NotAStore/ZeroedHeader", func(t *testing.T) []byte {
			b := store(t)
			clear(b[:100])
			return b
		}, wserr.NotAStore},
		{"NotAStore/ForeignSQLite", func(t *testing.T) []byte {
			return foreign(t, `CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)`, `INSERT INTO notes (body) VALUES ('mine')`)
		}, wserr.NotAStore},
		{"NotAStore/EmptySQLite", func(t *testing.T) []byte { return foreign(t, `PRAGMA user_version = 7`) }, wserr.NotAStore},
		{"Corrupt/Truncated", func(t *testing.T) []byte {
			b := store(t)
			return b[:len(b)/2]
		}, wserr.Corrupt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			content := tt.content(t)
			dir := t.TempDir()
			path := filepath.Join(dir, "store.db")
			require.NoError(t, os.WriteFile(path, content, 0o644))
			for _, readOnly := range []bool{false, true} {
				db, err := index.Open(ctx, path, index.Options{ReadOnly: readOnly})
				if err == nil {
					db.Close()
				}
				requireCode(t, err, tt.code)
				got, err := os.ReadFile(path)
				require.NoError(t, err)
				assert.True(t, bytes.Equal(content, got), "read-only %v: the file changed", readOnly)
				entries, err := os.ReadDir(dir)
				require.NoError(t, err)
				assert.Len(t, entries, 1, "only the file itself: %v", entries)
			}
		})
	}
}

// TestOpenCreatesWhole: a new store appears under its name only whole, and
// the temporary file it was built in is gone.
func TestOpenCreatesWhole(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "store.db")
	db, err := index.Open(ctx, path, index.Options{})
	require.NoError(t, err)
	require.NoError(t, db.Close())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1)
	assert.Equal(t, "store.db", entries[0].Name())
	storetest.OpenDBAt(t, path, index.Options{ReadOnly: true})
}

// TestOpenRefusesADirectoryOrPipe: a directory, or a named pipe, where the
// database file should be is store.not_a_store, whether the store is
// opened to write or to read, and is left as it was with nothing beside
// it.
func TestOpenRefusesADirectoryOrPipe(t *testing.T) {
	ctx := context.Background()
	for _, kind := range []string{"directory", "named pipe"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "store.db")
			if kind == "directory" {
				require.NoError(t, os.Mkdir(path, 0o755))
			} else if err := mkfifo(path); err != nil {
				t.Skipf("no named pipes here: %v", err)
			}
			for _, readOnly := range []bool{false, true} {
				db, err := index.Open(ctx, path, index.Options{ReadOnly: readOnly})
				if err == nil {
					db.Close()
				}
				requireCode(t, err, wserr.NotAStore)
				assert.Contains(t, err.Error(), kind)
				entries, err := os.ReadDir(dir)
				require.NoError(t, err)
				assert.Len(t, entries, 1, "only the %s itself: %v", kind, entries)
			}
		})
	}
}

// TestOpenRemovesStaleCreations: a creation killed midway leaves its
// temporary files beside the store's name. A writable open removes those
// over an hour old, and leaves young ones (a creation maybe still going
// on in another process) and files of other names.
func TestOpenRemovesStaleCreations(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "wsstore.db")
	old := time.Now().Add(-2 * time.Hour)
	stale := []string{"wsstore.db.new-0123456789ab", "wsstore.db.new-0123456789ab-journal", "wsstore.db.new-a1b2c3d4e5f6-wal", "wsstore.db.new-a1b2c3d4e5f6-shm"}
	kept := []string{"wsstore.db.new-ffffffffffff", "wsstore.db.new-notours", "notes.db.new-0123456789ab"}
	for _, name := range append(stale, kept...) {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte("x"), 0o600))
		if name != "wsstore.db.new-ffffffffffff" {
			require.NoError(t, os.Chtimes(p, old, old))
		}
	}
	db, err := index.Open(ctx, path, index.Options{})
	require.NoError(t, err)
	require.NoError(t, db.Close())
	for _, name := range stale {
		assert.NoFileExists(t, filepath.Join(dir, name))
	}
	for _, name := range kept {
		assert.FileExists(t, filepath.Join(dir, name))
	}
}

// TestOpenRefusesAPathNoDatabaseCanHave: a database path below a file, in
// a loop of symbolic links or with a name longer than the file system
// takes is store.invalid_options, whether the store is opened to write or
// to read: neither store.internal nor a store.read_only that sends the
// user to the permissions of a file that cannot exist.
func TestOpenRefusesAPathNoDatabaseCanHave(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "file"), []byte("x"), 0o644))
	require.NoError(t, os.Symlink("loop", filepath.Join(dir, "loop")))
	for name, path := range map[string]string{
		"ErrBelowAFile":  filepath.Join(dir, "file", "store.db"),
		"ErrLinkLoop":    filepath.Join(dir, "loop", "store.db"),
		"ErrNameTooLong": filepath.Join(dir, strings.Repeat("n", 300)),
		"ErrDirTooLong":  filepath.Join(dir, strings.Repeat("n", 300), "store.db"),
		"ErrIsALinkLoop": filepath.Join(dir, "loop"),
	} {
		t.Run(name, func(t *testing.T) {
			for _, readOnly := range []bool{false, true} {
				db, err := index.Open(ctx, path, index.Options{ReadOnly: readOnly})
				if err == nil {
					db.Close()
				}
				requireCode(t, err, wserr.InvalidOptions)
			}
		})
	}
}

// TestOpenRefusesALinkToNothing: a symbolic link to nothing where the
// database file should be is store.invalid_options for a writing open,
// which would otherwise make a whole store it cannot put in place and
// then blame the file system (store.read_only), and is left as it is.
func TestOpenRefusesALinkToNothing(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "store.db")
	require.NoError(t, os.Symlink(filepath.Join(dir, "nowhere.db"), path))
	db, err := index.Open(ctx, path, index.Options{})
	if err == nil {
		db.Close()
	}
	requireCode(t, err, wserr.InvalidOptions)
	assert.Contains(t, err.Error(), "symbolic link")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "only the link: %v", entries)
	_, err = index.Open(ctx, path, index.Options{ReadOnly: true})
	requireCode(t, err, wserr.NotFound)
}
