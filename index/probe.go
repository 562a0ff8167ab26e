package index

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/wsstore/wsstore/wserr"
)

// A store file either does not exist or is a whole store: create builds
// the new database under a temporary name and links it into place only
// once its migrations are applied, so an existing file that is empty,
// cut short or foreign is never mistaken for a store being made and is
// refused by probe instead of being written over.

// CheckNoLogLeft refuses, with store.invalid_options naming it, a log
// (path's -wal or -journal, not empty) that a database no longer at path
// left beside it: SQLite would apply it to a database placed at path when
// it is first opened, bringing the old one's pages back into it. op names
// the caller.
func CheckNoLogLeft(op, path string) error {
	for _, f := range []string{path + "-wal", path + "-journal"} {
		if fi, err := os.Stat(f); err == nil && fi.Size() > 0 {
			return wserr.New(wserr.InvalidOptions, op, f, "the log of a store database no longer there is left here, and would be applied to a new one: remove it (and its -shm), or use another directory")
		}
	}
	return nil
}

// create makes a new store database at path and returns the rows each of
// its tables holds (but meta's), for removeCreated. If another opener
// links its own first, create returns nil rows and no error and leaves
// that one in place. A log
// left beside path by a database no longer there (its -wal or -journal,
// not empty) is refused with store.invalid_options and left as it is:
// SQLite would apply it to the new database when it is first opened,
// bringing the old one's pages back into it.
func create(ctx context.Context, path string, opts Options) (map[string]int64, error) {
	// The log first, then the file: a store another opener links
	// meanwhile has no log before it is linked.
	if err := CheckNoLogLeft("create", path); err != nil {
		if _, serr := os.Stat(path); errors.Is(serr, fs.ErrNotExist) {
			return nil, err
		}
	}
	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	tmp := path + ".new-" + hex.EncodeToString(suffix[:])
	defer func() {
		for _, p := range []string{tmp, tmp + "-wal", tmp + "-shm", tmp + "-journal"} {
			_ = os.Remove(p)
		}
	}()
	db := &DB{path: tmp, fresh: true, opts: opts}
	var err error
	if db.write, err = sqlx.Open("sqlite", db.dsn(false)); err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	db.write.SetMaxOpenConns(1)
	err = db.connect(ctx, db.write)
	if err == nil {
		err = db.migrate(ctx)
	}
	var rows map[string]int64
	if err == nil {
		rows, err = tableRows(ctx, db.write, nil)
	}
	if err == nil {
		// A self-contained file: nothing of the new store is left in a
		// log beside the temporary name.
		_, err = db.write.ExecContext(ctx, `PRAGMA journal_mode=DELETE`)
		err = Translate(err)
	}
	if cerr := db.write.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, nil // another opener's
		}
		return nil, fmt.Errorf("create %s: %w", path, translateOS(err))
	}
	return rows, nil
}

// tableRows counts the rows of every table of the database on conn but
// meta (where opening a store notes settings), each up to its count in
// upTo plus one when upTo is not nil.
func tableRows(ctx context.Context, conn sqlx.QueryerContext, upTo map[string]int64) (map[string]int64, error) {
	var names []string
	if err := sqlx.SelectContext(ctx, conn, &names, `SELECT name FROM sqlite_master WHERE type = 'table' AND name != 'meta'`); err != nil {
		return nil, Translate(err)
	}
	rows := make(map[string]int64, len(names))
	for _, name := range names {
		limit := int64(-1)
		if upTo != nil {
			limit = upTo[name] + 1
		}
		// A name from the schema, not from a caller: quoted, it is safe.
		q := `SELECT count(*) FROM (SELECT 1 FROM "` + strings.ReplaceAll(name, `"`, `""`) + `" LIMIT ?)`
		var n int64
		if err := sqlx.GetContext(ctx, conn, &n, q, limit); err != nil {
			return nil, Translate(err)
		}
		rows[name] = n
	}
	return rows, nil
}

// removeCreated removes the store database at path, which this process
// created (created holds the rows create left in it) and then failed to
// open, with its log and its index, unless another opener may have begun
// to use it: it is left if any other connection has it open (the
// exclusive lock removeCreated takes first is refused), if any of its
// tables but meta holds other rows than create left there, or if any
// step fails. It reports whether it removed the file.
func removeCreated(path string, created map[string]int64) bool {
	ctx := context.Background()
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(0)")
	q.Add("_pragma", "locking_mode(EXCLUSIVE)")
	pool, err := sqlx.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath()+"?"+q.Encode())
	if err != nil {
		return false
	}
	defer pool.Close()
	pool.SetMaxOpenConns(1)
	conn, err := pool.Connx(ctx)
	if err != nil {
		return false
	}
	defer conn.Close()
	// The lock stays held once taken (locking_mode EXCLUSIVE), past the
	// transaction, until the connection closes.
	if _, err := conn.ExecContext(ctx, `BEGIN EXCLUSIVE`); err != nil {
		return false
	}
	rows, err := tableRows(ctx, conn, created)
	if _, rerr := conn.ExecContext(ctx, `ROLLBACK`); err != nil || rerr != nil || !maps.Equal(rows, created) {
		return false
	}
	// Out of WAL mode, the log folded in and removed by SQLite while the
	// file is still this one: closing the connection then removes
	// nothing by name, where another opener may have made a new store.
	var mode string
	if err := conn.GetContext(ctx, &mode, `PRAGMA journal_mode=DELETE`); err != nil || mode != "delete" {
		return false
	}
	files := FilesOf(path)
	for _, f := range files[1:] {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return false
		}
	}
	return os.Remove(path) == nil
}

// staleCreation is the age past which a creation's temporary files are
// taken as left by a process that ended while it made them: a creation
// takes well under a second.
const staleCreation = time.Hour

// removeStaleCreations removes the temporary files (path.new-XXXXXXXXXXXX,
// with its -wal, -shm or -journal) of creations of the store at path that
// a process killed while it made them left, once they are staleCreation
// old; a writable open calls it. Failures are ignored: they are litter.
func removeStaleCreations(path string, now time.Time) {
	dir, prefix := filepath.Dir(path), filepath.Base(path)+".new-"
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || !e.Type().IsRegular() {
			continue
		}
		for _, suffix := range []string{"-wal", "-shm", "-journal"} {
			rest = strings.TrimSuffix(rest, suffix)
		}
		if len(rest) != 12 || strings.Trim(rest, "0123456789abcdef") != "" {
			continue // not a name create makes
		}
		if fi, err := e.Info(); err == nil && now.Sub(fi.ModTime()) > staleCreation {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// probe checks, through a read-only connection that writes nothing, that
// the existing file at path is a wsstore store. It fails with
// store.not_a_store for an empty file, a file that is not SQLite, or an
// SQLite database without the store's tables, and with store.corrupt for
// a damaged or truncated one.
func (db *DB) probe(ctx context.Context) (err error) {
	fi, err := os.Stat(db.path)
	if err != nil {
		return fmt.Errorf("open %s: %w", db.path, translateOS(err))
	}
	if fi.Size() == 0 {
		return wserr.New(wserr.NotAStore, "open", "", "%s is an empty file, not a store: it is left as it is", db.path)
	}
	// A read-only connection to a file in WAL mode makes the log and its
	// index beside it, empty; take away those it made, so a refused file
	// is left as it was found.
	var made []string
	for _, p := range []string{db.path + "-wal", db.path + "-shm"} {
		if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			made = append(made, p)
		}
	}
	conn, err := sqlx.Open("sqlite", db.probeDSN())
	if err != nil {
		return fmt.Errorf("open %s: %w", db.path, err)
	}
	defer func() {
		conn.Close()
		// Only a file refused (not a store, or damaged) is left as found:
		// after any other failure (busy, an I/O error) the log and its
		// index may be another process's, in use, and removing them would
		// corrupt the store.
		if !wserr.Is(err, wserr.NotAStore) && !wserr.Is(err, wserr.Corrupt) {
			return
		}
		for _, p := range made {
			if fi, err := os.Stat(p); err == nil && (fi.Size() == 0 || p == db.path+"-shm") {
				_ = os.Remove(p)
			}
		}
	}()
	conn.SetMaxOpenConns(1)
	var tables []string
	err = conn.SelectContext(ctx, &tables, `SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('goose_db_version', 'meta')`)
	if err != nil {
		return db.probeErr(err)
	}
	if len(tables) < 2 {
		return wserr.New(wserr.NotAStore, "open", "", "%s is an SQLite database but not a wsstore store: it is left as it is", db.path)
	}
	// A file cut short still opens; its header says how long it was.
	// With a non-empty log, pages past the file's end may live there. The
	// log is looked at after the page count, which counts the log's pages
	// too: another process that began writing in between (migrating the
	// store as it opens it) has left its pages in the log, and a
	// checkpoint that emptied the log wrote them to the file first.
	var pages, size int64
	if err := conn.GetContext(ctx, &pages, `PRAGMA page_count`); err != nil {
		return db.probeErr(err)
	}
	if err := conn.GetContext(ctx, &size, `PRAGMA page_size`); err != nil {
		return db.probeErr(err)
	}
	if wal, err := os.Stat(db.path + "-wal"); err != nil || wal.Size() == 0 {
		if fi, err := os.Stat(db.path); err == nil && fi.Size() < pages*size {
			return wserr.New(wserr.Corrupt, "open", "", "%s is truncated: %d bytes of %d", db.path, fi.Size(), pages*size)
		}
	}
	return nil
}

// probeErr codes an error of probe's queries: a file that is not a
// database is not a store; anything else is translated as usual.
func (db *DB) probeErr(err error) error {
	if sqliteCode(err) == sqlite3.SQLITE_NOTADB {
		return wserr.Wrap(wserr.NotAStore, "open", db.path, err)
	}
	return fmt.Errorf("open %s: %w", db.path, Translate(err))
}

// CheckStore fails with store.not_a_store unless the database holds the
// tables every wsstore store has, and with store.corrupt if its format
// version is missing or unreadable: fsck's first check, so a database that
// is not a store is never reported sound.
func (db *DB) CheckStore(ctx context.Context) error {
	return db.View(ctx, func(tx *Tx) error {
		var n int
		if err := tx.GetContext(ctx, &n, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ('goose_db_version', 'meta')`); err != nil {
			return fmt.Errorf("check store: %w", Translate(err))
		}
		if n < 2 {
			return wserr.New(wserr.NotAStore, "check store", "", "%s holds no wsstore store", db.path)
		}
		var v string
		err := tx.GetContext(ctx, &v, `SELECT value FROM meta WHERE key = 'format_version'`)
		if err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return wserr.New(wserr.Corrupt, "check store", "", "%s has no format version", db.path)
			}
			return fmt.Errorf("check store: %w", Translate(err))
		}
		if _, err := strconv.Atoi(v); err != nil {
			return wserr.New(wserr.Corrupt, "check store", "", "%s has an unreadable format version %q", db.path, v)
		}
		return nil
	})
}
