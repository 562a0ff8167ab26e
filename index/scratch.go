package index

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strconv"

	sqlite3 "modernc.org/sqlite/lib"

	"github.com/wsstore/wsstore/wserr"
)

// scratchCacheKiB is the page cache of a Scratch: what it holds in memory
// before its pages go to its file.
const scratchCacheKiB = 4096

// scratchPage is how many rows ScratchMap.Each reads at a time.
const scratchPage = 1024

// Scratch is a private temporary database on disk for work sets larger than
// memory should hold: the mark sets and lists of a walk over every object
// of a store. SQLite keeps it in its page cache (4 MiB) and the rest in a
// file of its own that it deletes when the Scratch closes; it is no part
// of any store and survives no process. Nothing in it is durable: it runs
// without a journal or syncs, in one transaction never committed. A
// Scratch is not safe for concurrent use.
//
// Its errors carry the store's codes: a full disk or quota under its file
// is store.disk_full and a read-only one store.read_only, as for the
// store's own writes; a Scratch never reports store.corrupt, its file
// being no part of the store. Once a statement fails, every later use
// fails with that first error: without a journal, what SQLite would say
// of the half-written file is no cause of anything.
type Scratch struct {
	db   *sql.DB
	conn *sql.Conn
	maps int
	err  error // the first failure, coded
}

// OpenScratch opens a new, empty Scratch. Close it when done.
func OpenScratch(ctx context.Context) (*Scratch, error) {
	// The empty file name is SQLite's private temporary database: every
	// connection has its own, so the Scratch keeps to one.
	db, err := sql.Open("sqlite", "")
	if err != nil {
		return nil, fmt.Errorf("open scratch: %w", scratchError(err))
	}
	db.SetMaxOpenConns(1)
	conn, err := db.Conn(ctx)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open scratch: %w", scratchError(err))
	}
	s := &Scratch{db: db, conn: conn}
	for _, q := range []string{
		`PRAGMA journal_mode = OFF`, `PRAGMA synchronous = OFF`, `PRAGMA locking_mode = EXCLUSIVE`,
		`PRAGMA cache_size = -` + strconv.Itoa(scratchCacheKiB), `PRAGMA temp_store = FILE`, `BEGIN`,
	} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			s.Close()
			return nil, fmt.Errorf("open scratch: %w", scratchError(err))
		}
	}
	return s, nil
}

// fail keeps err as the Scratch's first failure, unless one came before,
// and returns the first failure prefixed with op.
func (s *Scratch) fail(op string, err error) error {
	if s.err == nil {
		s.err = scratchError(err)
	}
	return fmt.Errorf("%s: %w", op, s.err)
}

// failed returns the Scratch's first failure prefixed with op, or nil.
func (s *Scratch) failed(op string) error {
	if s.err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", op, s.err)
}

// scratchError codes err, a Scratch's failure. SQLite reports a file it
// could not create or write as SQLITE_CANTOPEN or SQLITE_IOERR without the
// system's error, so then a page is written to a new file beside its
// temporary files: the file system's refusal, a full disk, a quota or a
// read-only file system, is the code. A damaged file is the Scratch's
// own, never the store's: uncoded, so store.internal.
func scratchError(err error) error {
	switch sqliteCode(err) {
	case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
		return err
	case sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_IOERR:
		if perr := probeDir(sqliteTempDir()); perr != nil {
			return fmt.Errorf("%w (%v)", perr, err)
		}
		return err
	}
	return Translate(err)
}

// probeDir writes a page to a new file in dir, removes it, and returns the
// file system's refusal coded (wserr.FSFault) if it is a full disk, a
// quota or a read-only file system, or nil.
func probeDir(dir string) error {
	f, err := os.CreateTemp(dir, "wsstore-probe-*")
	if err == nil {
		_, err = f.Write(make([]byte, 4096))
		err = errors.Join(err, f.Close(), os.Remove(f.Name()))
	}
	if coded, ok := wserr.FSFault("scratch", dir, err).(*wserr.Error); ok {
		return coded
	}
	return nil
}

// Close releases the Scratch and deletes its file.
func (s *Scratch) Close() error {
	if s == nil || s.db == nil {
		return nil
	}
	err := errors.Join(s.conn.Close(), s.db.Close())
	s.db = nil
	return scratchError(err)
}

// ScratchMap maps byte keys to integers in a Scratch, kept in key order.
type ScratchMap struct {
	s                *Scratch
	add, set, get, n *sql.Stmt
	page             *sql.Stmt
	len              int64
}

// NewMap returns a new, empty map in s.
func (s *Scratch) NewMap(ctx context.Context) (*ScratchMap, error) {
	if err := s.failed("scratch map"); err != nil {
		return nil, err
	}
	s.maps++
	name := "m" + strconv.Itoa(s.maps)
	if _, err := s.conn.ExecContext(ctx, `CREATE TABLE `+name+` (k BLOB PRIMARY KEY, v INTEGER NOT NULL) WITHOUT ROWID`); err != nil {
		return nil, s.fail("scratch map", err)
	}
	m := &ScratchMap{s: s}
	for _, p := range []struct {
		dst **sql.Stmt
		q   string
	}{
		{&m.add, `INSERT INTO ` + name + ` (k, v) VALUES (?, ?) ON CONFLICT DO NOTHING`},
		{&m.set, `INSERT INTO ` + name + ` (k, v) VALUES (?, ?) ON CONFLICT (k) DO UPDATE SET v = excluded.v`},
		{&m.get, `SELECT v FROM ` + name + ` WHERE k = ?`},
		{&m.n, `SELECT count(*) FROM ` + name},
		{&m.page, `SELECT k, v FROM ` + name + ` WHERE k > ? ORDER BY k LIMIT ` + strconv.Itoa(scratchPage)},
	} {
		st, err := s.conn.PrepareContext(ctx, p.q)
		if err != nil {
			return nil, s.fail("scratch map", err)
		}
		*p.dst = st
	}
	return m, nil
}

// Add stores v under key unless key is there already, and reports whether
// it was added.
func (m *ScratchMap) Add(ctx context.Context, key []byte, v int64) (bool, error) {
	if err := m.s.failed("scratch add"); err != nil {
		return false, err
	}
	res, err := m.add.ExecContext(ctx, key, v)
	if err != nil {
		return false, m.s.fail("scratch add", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, m.s.fail("scratch add", err)
	}
	m.len += n
	return n > 0, nil
}

// Set stores v under key, replacing what was there.
func (m *ScratchMap) Set(ctx context.Context, key []byte, v int64) error {
	if err := m.s.failed("scratch set"); err != nil {
		return err
	}
	if _, err := m.set.ExecContext(ctx, key, v); err != nil {
		return m.s.fail("scratch set", err)
	}
	return nil
}

// Get returns the value under key and whether there is one.
func (m *ScratchMap) Get(ctx context.Context, key []byte) (int64, bool, error) {
	if err := m.s.failed("scratch get"); err != nil {
		return 0, false, err
	}
	var v int64
	err := m.get.QueryRowContext(ctx, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, m.s.fail("scratch get", err)
	}
	return v, true, nil
}

// Len returns how many keys the map holds.
func (m *ScratchMap) Len(ctx context.Context) (int64, error) {
	if err := m.s.failed("scratch len"); err != nil {
		return 0, err
	}
	var n int64
	if err := m.n.QueryRowContext(ctx).Scan(&n); err != nil {
		return 0, m.s.fail("scratch len", err)
	}
	return n, nil
}

// Each calls fn with every key and value in key order, reading a page at
// a time; fn may change the map (what it adds after the current page is
// then seen). key is fn's to keep. Each stops at fn's first error and
// returns it.
func (m *ScratchMap) Each(ctx context.Context, fn func(key []byte, v int64) error) error {
	type row struct {
		k []byte
		v int64
	}
	page := make([]row, 0, scratchPage)
	after := []byte{}
	for {
		if err := m.s.failed("scratch each"); err != nil {
			return err
		}
		page = page[:0]
		rows, err := m.page.QueryContext(ctx, after)
		if err != nil {
			return m.s.fail("scratch each", err)
		}
		for rows.Next() {
			var r row
			if err := rows.Scan(&r.k, &r.v); err != nil {
				rows.Close()
				return m.s.fail("scratch each", err)
			}
			page = append(page, r)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return m.s.fail("scratch each", err)
		}
		for _, r := range page {
			if err := fn(r.k, r.v); err != nil {
				return err
			}
		}
		if len(page) < scratchPage {
			return nil
		}
		after = page[len(page)-1].k
	}
}

// ScratchList is a list of byte strings in a Scratch, in the order they
// were pushed.
type ScratchList struct {
	s        *Scratch
	push, at *sql.Stmt
	len      int64
}

// NewList returns a new, empty list in s.
func (s *Scratch) NewList(ctx context.Context) (*ScratchList, error) {
	if err := s.failed("scratch list"); err != nil {
		return nil, err
	}
	s.maps++
	name := "l" + strconv.Itoa(s.maps)
	if _, err := s.conn.ExecContext(ctx, `CREATE TABLE `+name+` (i INTEGER PRIMARY KEY, b BLOB NOT NULL)`); err != nil {
		return nil, s.fail("scratch list", err)
	}
	l := &ScratchList{s: s}
	var err error
	if l.push, err = s.conn.PrepareContext(ctx, `INSERT INTO `+name+` (i, b) VALUES (?, ?)`); err != nil {
		return nil, s.fail("scratch list", err)
	}
	if l.at, err = s.conn.PrepareContext(ctx, `SELECT b FROM `+name+` WHERE i = ?`); err != nil {
		return nil, s.fail("scratch list", err)
	}
	return l, nil
}

// Push appends b.
func (l *ScratchList) Push(ctx context.Context, b []byte) error {
	if err := l.s.failed("scratch push"); err != nil {
		return err
	}
	if _, err := l.push.ExecContext(ctx, l.len, b); err != nil {
		return l.s.fail("scratch push", err)
	}
	l.len++
	return nil
}

// Len returns how many strings the list holds.
func (l *ScratchList) Len() int64 { return l.len }

// At returns the string at position i, counted from 0; it fails past the
// end.
func (l *ScratchList) At(ctx context.Context, i int64) ([]byte, error) {
	if err := l.s.failed("scratch at"); err != nil {
		return nil, err
	}
	var b []byte
	if err := l.at.QueryRowContext(ctx, i).Scan(&b); err != nil {
		return nil, l.s.fail(fmt.Sprintf("scratch at %d", i), err)
	}
	return b, nil
}
