package index

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/jmoiron/sqlx"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/wsstore/wsstore/wserr"
)

// Tx is a transaction handed to Update and View functions. It must not be
// used after the function returns.
type Tx struct {
	*sqlx.Tx
	writable bool
	cache    *stmtCache
	bound    map[string]*sqlx.Stmt // cache's statements bound to this transaction
	trace    func(query string)
	guard    *txGuard // a write transaction's (guard.go)
	endedBy  error    // the statement error on which SQLite ended the transaction
}

// Writable reports whether the transaction may write.
func (tx *Tx) Writable() bool { return tx.writable }

// Savepoint runs fn in a savepoint of tx, for work the transaction can do
// without. If fn fails, what it did in tx is rolled back, the transaction
// goes on, and fn's error is returned as failed. err is set when the
// transaction itself cannot go on: the savepoint could not be taken, or
// not be rolled back to (SQLite ends a whole transaction on some
// full-disk, I/O and memory errors; see guard.go); the caller must then
// fail with it.
func (tx *Tx) Savepoint(ctx context.Context, fn func() error) (failed, err error) {
	if _, err := tx.ExecContext(ctx, `SAVEPOINT optional`); err != nil {
		return nil, fmt.Errorf("savepoint: %w", Translate(err))
	}
	if failed = fn(); failed != nil {
		if _, err := tx.ExecContext(ctx, `ROLLBACK TO optional`); err != nil {
			return failed, fmt.Errorf("roll back to savepoint after %w: %w", failed, Translate(err))
		}
	}
	if _, err := tx.ExecContext(ctx, `RELEASE optional`); err != nil {
		return failed, fmt.Errorf("release savepoint: %w", Translate(err))
	}
	return failed, nil
}

// Update runs fn in a write transaction (BEGIN IMMEDIATE on the single write
// connection) and commits if fn returns nil. While another process holds
// the write lock it waits, up to Options.BusyTimeout, before failing with
// store.busy. If fn returns an error or
// panics, the transaction is rolled back and the error returned (the panic
// re-raised). It fails with store.read_only on a read-only DB.
func (db *DB) Update(ctx context.Context, fn func(tx *Tx) error) error {
	if db.closed.Load() {
		return errClosed("update")
	}
	if db.write == nil {
		return wserr.New(wserr.ReadOnly, "update", "", "store opened read-only")
	}
	db.writes.Add(1)
	var before int64
	if db.ckpt != nil {
		before = db.ckpt.frames()
	}
	if c := db.clock; c != nil {
		inner := fn
		fn = func(tx *Tx) error {
			if err := inner(tx); err != nil {
				return err
			}
			// After fn: the times it stamped were read by now.
			return c.Err()
		}
	}
	err := run(ctx, db.write, &db.guard, &db.stmts, db.opts.Trace, fn, db.whileBusy)
	// The connection is free again: compile what the transaction ran
	// unprepared, for the next ones.
	db.stmts.prepare(context.WithoutCancel(ctx), db.write)
	if err == nil && db.ckpt != nil {
		if catchUp, wait := db.ckpt.committed(before); catchUp {
			// The rest of the log, so that the next write starts it
			// over (walckpt.go); a failure leaves it to a later turn.
			// A long log waits for the background's pass, which would
			// make it fail busy; a short one does not hold the write up.
			if wait {
				db.ckpt.pass.Lock()
			}
			_, _ = db.write.ExecContext(context.WithoutCancel(ctx), `PRAGMA wal_checkpoint(PASSIVE)`)
			if wait {
				db.ckpt.pass.Unlock()
			}
		}
	}
	return db.closedMeanwhile("update", err)
}

// closedMeanwhile is err, or store.closed for an error without a code of
// its own met by a call that began before Close and ran into it.
func (db *DB) closedMeanwhile(op string, err error) error {
	if err != nil && db.closed.Load() && wserr.CodeOf(err) == wserr.Internal {
		return fmt.Errorf("%w: %w", errClosed(op), err)
	}
	return err
}

// View runs fn in a read transaction on the read pool; it sees one
// consistent committed snapshot and never blocks writers.
func (db *DB) View(ctx context.Context, fn func(tx *Tx) error) error {
	if db.closed.Load() {
		return errClosed("view")
	}
	err := run(ctx, db.read, nil, &db.readStmts, db.opts.Trace, fn, nil)
	db.readStmts.prepareIdle(ctx, db.read)
	return db.closedMeanwhile("view", err)
}

// run runs fn in a transaction on conn, a write transaction if guard,
// the write connection's, is set. A write transaction's BEGIN IMMEDIATE
// is retried through retry while another process holds the lock.
func run(ctx context.Context, conn *sqlx.DB, guard *txGuard, cache *stmtCache, trace func(string), fn func(tx *Tx) error,
	retry func(context.Context, func() error) error) (err error) {
	writable := guard != nil
	var stx *sqlx.Tx
	begin := func() error {
		var err error
		stx, err = conn.BeginTxx(txContext(ctx, writable), nil)
		return Translate(err)
	}
	if retry != nil {
		err = retry(ctx, begin)
	} else {
		err = begin()
	}
	if err != nil {
		return fmt.Errorf("begin: %w", Translate(err))
	}
	tx := &Tx{Tx: stx, writable: writable, cache: cache, trace: trace, guard: guard}
	if writable {
		guard.begin()
	}
	committed := false
	defer func() {
		if committed {
			// The connection is another Update's already: its guard is
			// not this one's to end.
			return
		}
		if writable {
			guard.end() // fn panicked
		}
		// A read transaction whose context ended after fn's last read
		// was rolled back by database/sql already: what fn read stands.
		if rerr := stx.Rollback(); rerr != nil && err == nil && !errors.Is(rerr, sql.ErrTxDone) {
			err = fmt.Errorf("rollback: %w", rerr)
		}
	}()
	ferr := fn(tx)
	if writable {
		guard.end()
		if guard.ended.Load() {
			// Unless fn returns a statement's report of the end, what
			// happened is the end's, whether fn passed over the error
			// that ended the transaction or went on to a later one.
			if errors.Is(ferr, errRolledBack) {
				return Translate(ferr)
			}
			tx.noteEnd(ferr)
			return tx.errEnded()
		}
	}
	if ferr != nil {
		if cerr := ctx.Err(); cerr != nil && !writable && endedByRollback(ferr) {
			// database/sql rolled the read back when ctx ended, and the
			// statement after failed with an error of its own: the end is
			// what happened.
			return wserr.Wrap(wserr.Canceled, "", "", fmt.Errorf("%w: %w", cerr, ferr))
		}
		// Whatever path the driver's error took up through fn, it leaves
		// with its code: corruption, a full disk, a lock held too long.
		return Translate(ferr)
	}
	if !writable {
		// A read transaction has nothing to commit; rolling back releases
		// its snapshot just the same.
		return nil
	}
	if err := ctx.Err(); err != nil {
		// What database/sql checks before committing a transaction begun
		// with ctx, checked here for one begun without its cancellation.
		return Translate(err)
	}
	if err := stx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", Translate(err))
	}
	committed = true
	if testHookCommitted != nil {
		testHookCommitted()
	}
	return nil
}

// endedByRollback reports whether err is database/sql's answer to a
// statement of a transaction it has rolled back, or to one of that
// transaction's statements or rows it closed with it: a statement begun
// just before the rollback has its rows closed under it when the
// transaction's context ends, and its Scan fails "sql: Rows are closed".
func endedByRollback(err error) bool {
	return errors.Is(err, sql.ErrTxDone) || strings.Contains(err.Error(), "sql: statement is closed") ||
		strings.Contains(err.Error(), "sql: Rows are closed")
}

// testHookCommitted, when set by a test, runs after a commit, before run
// returns.
var testHookCommitted func()

// txContext is the context a transaction and its statements run under.
// A write transaction's statements are short and hold the store's single
// write lock, so it runs them without ctx's cancellation and checks ctx
// itself, before each statement and before committing: for a context
// that can end, modernc's driver starts a goroutine for each statement to
// interrupt it, which costs a write of a dozen statements tens of
// microseconds (BenchmarkStatements). (database/sql starts its own, one
// for the transaction and one for each query's rows, whatever the
// context.) A read transaction keeps the driver's, so a long scan stops
// when ctx ends.
// A context that has ended already is kept too: the statement fails with
// its error before reaching the driver.
func txContext(ctx context.Context, writable bool) context.Context {
	if writable && ctx.Err() == nil {
		return context.WithoutCancel(ctx)
	}
	return ctx
}

// Translate maps SQLite driver errors that callers must tell apart to coded
// errors (busy, read-only, corrupt), and a context's end to store.canceled
// (the cause kept in the chain); other errors are returned unchanged.
func Translate(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := errors.AsType[*wserr.Error](err); ok {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return wserr.Wrap(wserr.Canceled, "", "", err)
	}
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return translateOS(err)
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_FULL:
		return wserr.Wrap(wserr.DiskFull, "", "", err)
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return &wserr.Error{Code: wserr.Busy, Msg: "another connection (this process's or another's) holds a lock on the store", Err: err}
	case sqlite3.SQLITE_READONLY:
		return wserr.Wrap(wserr.ReadOnly, "", "", err)
	case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
		return wserr.Wrap(wserr.Corrupt, "", "", err)
	case sqlite3.SQLITE_IOERR:
		if se.Code() == sqlite3.SQLITE_IOERR_WRITE || se.Code() == sqlite3.SQLITE_IOERR_FSYNC {
			// SQLite reports a full disk met while writing its log this way.
			if errors.Is(err, syscall.ENOSPC) {
				return wserr.Wrap(wserr.DiskFull, "", "", err)
			}
		}
	}
	return err
}

// TranslateRow is Translate for a row an import inserts, or a row read,
// named what: a failure of the store's own (a full disk, a busy or
// damaged file) keeps its code, and a row SQLite refuses (a constraint: a
// duplicate, a key naming nothing) or a value read that does not scan (a
// NULL or text where the schema has a number: a damaged page) is
// store.corrupt.
func TranslateRow(op, what string, err error) error {
	err = Translate(err)
	if _, coded := errors.AsType[*wserr.Error](err); coded {
		return fmt.Errorf("%s %s: %w", op, what, err)
	}
	return wserr.Wrap(wserr.Corrupt, op, "", fmt.Errorf("%s: %w", what, err))
}

// IsForeignKey reports whether err is SQLite refusing a row whose
// foreign key names a row that is not there.
func IsForeignKey(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code() == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY
}

// IsCorruptDB reports whether err is SQLite finding the database file
// damaged (rather than a row a caller judged corrupt).
func IsCorruptDB(err error) bool {
	switch sqliteCode(err) {
	case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
		return true
	}
	return false
}

// sqliteCode returns the primary result code of the SQLite error in err's
// chain, or 0.
func sqliteCode(err error) int {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code() & 0xff
	}
	return 0
}

// translateOS codes the file-system errors a caller must tell apart: a
// read-only file system and a full disk; and SQLite's corruption errors
// that reach here as text only, a library having flattened them with %v.
func translateOS(err error) error {
	switch msg := err.Error(); {
	case strings.Contains(msg, "database disk image is malformed"), strings.Contains(msg, "file is not a database"):
		return wserr.Wrap(wserr.Corrupt, "", "", err)
	case errors.Is(err, syscall.EROFS):
		return wserr.Wrap(wserr.ReadOnly, "", "", err)
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT), errors.Is(err, syscall.EFBIG):
		return wserr.Wrap(wserr.DiskFull, "", "", err)
	}
	return err
}

// IntegrityCheck runs SQLite's integrity_check and foreign_key_check and
// returns a store.corrupt error listing what they report.
func (db *DB) IntegrityCheck(ctx context.Context) error {
	var problems []string
	err := db.View(ctx, func(tx *Tx) error {
		var rows []string
		if err := tx.SelectContext(ctx, &rows, `PRAGMA integrity_check`); err != nil {
			return Translate(err)
		}
		for _, r := range rows {
			if r != "ok" {
				problems = append(problems, r)
			}
		}
		fk, err := tx.QueryxContext(ctx, `PRAGMA foreign_key_check`)
		if err != nil {
			return Translate(err)
		}
		defer fk.Close()
		for fk.Next() {
			v, err := fk.SliceScan()
			if err != nil {
				return err
			}
			problems = append(problems, fmt.Sprintf("foreign key violation: %v", v))
		}
		return fk.Err()
	})
	if err != nil {
		return fmt.Errorf("integrity check: %w", err)
	}
	if len(problems) > 0 {
		return wserr.New(wserr.Corrupt, "integrity check", "", "%s", strings.Join(problems, "; "))
	}
	return nil
}
