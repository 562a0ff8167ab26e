package index

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/jmoiron/sqlx"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/wsstore/wsstore/wserr"
)

// On a full disk, an I/O error or a failed allocation, SQLite may roll
// back the whole transaction rather than the statement that failed, and
// the connection goes back to autocommit: every statement a caller runs
// after passing over that error would commit on its own. A txGuard,
// hooked into the write connection, makes that impossible. While an
// Update's function runs, SQLite ending the transaction marks it ended,
// and any commit (there can be none but such a statement's) is turned
// into a rollback. Tx's statements then fail at once, and Update fails
// whatever its function returns.
type txGuard struct {
	open  atomic.Bool // an Update's function is running on the connection
	ended atomic.Bool // SQLite ended its transaction meanwhile
}

// begin and end bracket an Update's function.
func (g *txGuard) begin() { g.ended.Store(false); g.open.Store(true) }
func (g *txGuard) end()   { g.open.Store(false) }

// onCommit is SQLite's commit hook: non-zero turns the commit into a
// rollback.
func (g *txGuard) onCommit() int32 {
	if g.open.Load() {
		g.ended.Store(true)
		return 1
	}
	return 0
}

// onRollback is SQLite's rollback hook, called when a whole transaction
// rolls back (not for ROLLBACK TO a savepoint).
func (g *txGuard) onRollback() {
	if g.open.Load() {
		g.ended.Store(true)
	}
}

// hooks is what modernc's connections offer for the hooks.
type hooks interface {
	RegisterCommitHook(sqlite.CommitHookFn)
	RegisterRollbackHook(sqlite.RollbackHookFn)
}

// guardedConnector opens connections with g's hooks.
type guardedConnector struct {
	driver.Connector
	g *txGuard
}

func (c guardedConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	h, ok := conn.(hooks)
	if !ok {
		conn.Close()
		return nil, fmt.Errorf("sqlite connection %T has no commit and rollback hooks", conn)
	}
	h.RegisterCommitHook(c.g.onCommit)
	h.RegisterRollbackHook(c.g.onRollback)
	return conn, nil
}

// openGuarded opens the write connection's pool with g's hooks.
func openGuarded(dsn string, g *txGuard) (*sqlx.DB, error) {
	base, err := sqlite.NewConnector(dsn)
	if err != nil {
		return nil, err
	}
	return sqlx.NewDb(sql.OpenDB(guardedConnector{Connector: base, g: g}), "sqlite"), nil
}

// Ended reports whether SQLite has ended tx, a write transaction, by
// itself: a caller that passes over an error asks it to know whether the
// transaction can go on (it cannot; every later statement fails).
func (tx *Tx) Ended() bool { return tx.guard != nil && tx.guard.ended.Load() }

// usable fails once SQLite has ended tx.
func (tx *Tx) usable() error {
	if tx.Ended() {
		return tx.errEnded()
	}
	return nil
}

// done returns a statement's err, noting it as what ended tx if SQLite
// ended tx while running it.
func (tx *Tx) done(err error) error {
	if tx.Ended() {
		tx.noteEnd(err)
	}
	return err
}

// noteEnd notes err as what ended tx unless a cause is noted already or
// err is the guard's own: errEnded's, or the commit hook's refusal.
func (tx *Tx) noteEnd(err error) {
	var se *sqlite.Error
	if err == nil || tx.endedBy != nil || errors.Is(err, errRolledBack) ||
		errors.As(err, &se) && se.Code() == sqlite3.SQLITE_CONSTRAINT_COMMITHOOK {
		return
	}
	tx.endedBy = err
}

// errRolledBack is in the chain of every error errEnded returns.
var errRolledBack = errors.New("SQLite rolled the write transaction back after an error; nothing of it was committed")

// errEnded is the error of a statement run in a transaction SQLite has
// ended, and of its Update: with the code of the statement's error that
// ended it where known.
func (tx *Tx) errEnded() error {
	if tx.endedBy != nil {
		return fmt.Errorf("%w: %w", errRolledBack, Translate(tx.endedBy))
	}
	return wserr.Wrap(wserr.Internal, "update", "", errRolledBack)
}
