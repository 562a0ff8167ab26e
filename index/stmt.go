package index

import (
	"context"
	"database/sql"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"
)

// Compiling SQL costs more than running the small statements the store
// issues (a quarter of a workspace write, measured), so write transactions
// reuse statements prepared on the single write connection. A statement
// cannot be prepared while a transaction holds that connection, so a query
// seen for the first time runs unprepared and is prepared once the
// transaction has ended; from then on every transaction binds the prepared
// statement to itself, which database/sql does without compiling again
// because it is the same connection. Read transactions do the same on the
// read pool: a statement prepared there is compiled again, once, on each
// pool connection a transaction binds it to.

// maxStmts bounds the cache; the store's own queries number a few dozen.
const maxStmts = 256

type stmtCache struct {
	mu      sync.Mutex
	stmts   map[string]*sqlx.Stmt
	pending map[string]struct{}
}

// lookup returns the prepared statement for query, or nil after noting the
// query for preparing later.
func (c *stmtCache) lookup(query string) *sqlx.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.stmts[query]; ok {
		return st
	}
	if len(c.stmts)+len(c.pending) < maxStmts {
		if c.pending == nil {
			c.pending = map[string]struct{}{}
		}
		c.pending[query] = struct{}{}
	}
	return nil
}

// prepare compiles the pending queries on conn, which no transaction may
// hold. A query that fails to prepare is dropped: it runs unprepared.
func (c *stmtCache) prepare(ctx context.Context, conn *sqlx.DB) {
	c.mu.Lock()
	pending := c.pending
	c.pending = nil
	c.mu.Unlock()
	for q := range pending {
		st, err := conn.PreparexContext(ctx, q)
		if err != nil {
			continue
		}
		c.mu.Lock()
		if c.stmts == nil {
			c.stmts = map[string]*sqlx.Stmt{}
		}
		if _, ok := c.stmts[q]; ok {
			st.Close()
		} else {
			c.stmts[q] = st
		}
		c.mu.Unlock()
	}
}

func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.stmts {
		st.Close()
	}
	c.stmts = nil
}

// prepareIdle is prepare for the read pool, where other readers may hold
// every connection (and the caller may be inside a read transaction of
// its own): it waits for a free connection only briefly, leaving the
// queries pending for a later turn rather than stalling a reader.
func (c *stmtCache) prepareIdle(ctx context.Context, pool *sqlx.DB) {
	c.mu.Lock()
	n := len(c.pending)
	c.mu.Unlock()
	if n == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Millisecond)
	defer cancel()
	c.prepare(ctx, pool)
}

// stmt returns query's prepared statement bound to tx, or nil if it has
// none yet.
func (tx *Tx) stmt(ctx context.Context, query string) *sqlx.Stmt {
	if tx.trace != nil {
		tx.trace(query)
	}
	if tx.cache == nil {
		return nil
	}
	// database/sql keeps every statement bound to a transaction until it
	// ends, so each is bound once per transaction, however often it runs.
	if st, ok := tx.bound[query]; ok {
		return st
	}
	st := tx.cache.lookup(query)
	if st == nil {
		return nil
	}
	st = tx.Tx.StmtxContext(ctx, st)
	if tx.bound == nil {
		tx.bound = map[string]*sqlx.Stmt{}
	}
	tx.bound[query] = st
	return st
}

// ExecContext runs a statement in the transaction, prepared once per store.
func (tx *Tx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if err := tx.usable(); err != nil {
		return nil, err
	}
	ctx = txContext(ctx, tx.writable)
	var res sql.Result
	var err error
	if st := tx.stmt(ctx, query); st != nil {
		res, err = st.ExecContext(ctx, args...)
	} else {
		res, err = tx.Tx.ExecContext(ctx, query, args...)
	}
	return res, tx.done(err)
}

// GetContext scans one row into dest, like sqlx's, with a prepared
// statement where one exists.
func (tx *Tx) GetContext(ctx context.Context, dest any, query string, args ...any) error {
	if err := tx.usable(); err != nil {
		return err
	}
	ctx = txContext(ctx, tx.writable)
	if st := tx.stmt(ctx, query); st != nil {
		return tx.done(st.GetContext(ctx, dest, args...))
	}
	return tx.done(tx.Tx.GetContext(ctx, dest, query, args...))
}

// SelectContext scans rows into dest, like sqlx's, with a prepared
// statement where one exists.
func (tx *Tx) SelectContext(ctx context.Context, dest any, query string, args ...any) error {
	if err := tx.usable(); err != nil {
		return err
	}
	ctx = txContext(ctx, tx.writable)
	if st := tx.stmt(ctx, query); st != nil {
		return tx.done(st.SelectContext(ctx, dest, args...))
	}
	return tx.done(tx.Tx.SelectContext(ctx, dest, query, args...))
}

// QueryRowContext runs a query that returns at most one row, like
// database/sql's, with a prepared statement where one exists. In a
// transaction SQLite has ended, it still reaches the driver (a Row
// carries its error only from there), where the write transaction's
// guard refuses any commit.
func (tx *Tx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	ctx = txContext(ctx, tx.writable)
	if st := tx.stmt(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return tx.Tx.QueryRowContext(ctx, query, args...)
}

// QueryxContext runs a query, like sqlx's, with a prepared statement where
// one exists.
func (tx *Tx) QueryxContext(ctx context.Context, query string, args ...any) (*sqlx.Rows, error) {
	if err := tx.usable(); err != nil {
		return nil, err
	}
	ctx = txContext(ctx, tx.writable)
	var rows *sqlx.Rows
	var err error
	if st := tx.stmt(ctx, query); st != nil {
		rows, err = st.QueryxContext(ctx, args...)
	} else {
		rows, err = tx.Tx.QueryxContext(ctx, query, args...)
	}
	return rows, tx.done(err)
}
