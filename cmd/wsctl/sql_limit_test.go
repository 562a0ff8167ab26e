package main

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/wsstore/wsstore"
)

// TestSQLLimits: a query that makes a huge value, returns a huge result or
// runs too long stops with wsctl.query_limit (exit status 2) before it
// costs what it asks for; within the limits it runs.
func TestSQLLimits(t *testing.T) {
	c := seededStore(t)
	tests := []struct {
		name string
		args []string
		msg  string
	}{
		{"ErrHugeValue", []string{"sql", "SELECT length(randomblob(900000000))"}, "a value over"},
		{"ErrHugeValueSmallLimit", []string{"sql", "--max-memory", "4194304", "SELECT randomblob(2000000)"}, "a value over"},
		{"ErrHugeResult", []string{"sql", "--max-memory", "8388608",
			"WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 100) SELECT randomblob(100000) FROM n"}, "the result is over"},
		{"ErrTimeout", []string{"sql", "--timeout", "200ms",
			"WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n) SELECT count(*) FROM n"}, "--timeout 200ms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errOut := c.fails(2, tt.args...)
			assert.Contains(t, errOut, "wsctl.query_limit")
			assert.Contains(t, errOut, tt.msg)
		})
	}
	t.Run("OK", func(t *testing.T) {
		out := c.ok("sql", "--max-memory", "4194304", "SELECT length(randomblob(500000))")
		assert.Contains(t, out, "500000")
	})
	t.Run("ErrBadFlags", func(t *testing.T) {
		c.fails(2, "sql", "--max-memory", "10", "SELECT 1")
		c.fails(2, "sql", "--timeout", "-1s", "SELECT 1")
	})
}

// TestSQLMemory: the query that once took 11 GB is stopped before it
// allocates, in a wsctl process whose peak RSS stays small.
func TestSQLMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("runs wsctl as a child")
	}
	c := seededStore(t)
	r := childRun(t, c.store, "", nil, "sql", "SELECT randomblob(900000000)")
	assert.Equal(t, 2, r.code, r.err)
	assert.Contains(t, r.err, "wsctl.query_limit")
	t.Logf("sql randomblob(900000000): peak RSS %.1f MiB", float64(r.hwm)/(1<<20))
	assert.Less(t, r.hwm, int64(64<<20))
}

// TestSQLWideRowMemory: a row of many values, each under a quarter of
// --max-memory, is held to a quarter as a whole: the query stops before
// SQLite makes the row, in a wsctl process whose peak RSS stays small.
func TestSQLWideRowMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("runs wsctl as a child")
	}
	c := seededStore(t)
	query := "SELECT 1" + strings.Repeat(", randomblob(3000000)", 50)
	errOut := c.fails(2, "sql", "--max-memory", "16777216", query)
	assert.Contains(t, errOut, "wsctl.query_limit: the query makes a value over 82241 bytes, a quarter of --max-memory 16777216 shared by its 51 columns")

	r := childRun(t, c.store, "", nil, "sql", "--max-memory", "16777216", query)
	assert.Equal(t, 2, r.code, r.err)
	assert.Contains(t, r.err, "wsctl.query_limit")
	t.Logf("sql of 50 values of 3 MB under --max-memory 16 MiB: peak RSS %.1f MiB", float64(r.hwm)/(1<<20))
	assert.Less(t, r.hwm, int64(64<<20))

	out := c.ok("sql", "--max-memory", "16777216", "SELECT length(randomblob(2000000)), 2")
	assert.Contains(t, out, "2000000", "a query of 2 columns makes values of up to an eighth")

	// A row SQLite sorts is one value to it, held to the same bound whole.
	two := "SELECT length(a), length(b) FROM (SELECT randomblob(1200000) AS a, randomblob(1200000) AS b)"
	assert.Contains(t, c.ok("sql", "--max-memory", "16777216", two), "1200000")
	errOut = c.fails(2, "sql", "--max-memory", "16777216", "SELECT randomblob(1200000) AS a, randomblob(1200000) AS b FROM (VALUES (1)) ORDER BY random()")
	assert.Contains(t, errOut, "wsctl.query_limit: the query makes a value over 2097152 bytes, a quarter of --max-memory 16777216 shared by its 2 columns (a row it sorts, groups or materializes is one value)")
}

// TestSQLResultMemory: a result within --max-memory is printed, as a table
// or as JSON, by a wsctl process whose peak RSS stays under
// --max-memory: each value is held once, as it prints, and the output is
// written a line at a time rather than built whole.
func TestSQLResultMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("runs wsctl as a child")
	}
	c := seededStore(t)
	const maxMemory = 64 << 20
	query := "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 100) SELECT i, randomblob(100000) AS b FROM n"
	for _, format := range []string{"table", "json"} {
		args := []string{"sql", "--max-memory", strconv.Itoa(maxMemory), query}
		if format == "json" {
			args = append(args, "--json")
		}
		var out countingWriter
		r := childRun(t, c.store, "", &out, args...)
		require.Equal(t, 0, r.code, r.err)
		assert.Greater(t, int64(out), int64(100*200000), "every row printed, BLOBs as hex")
		t.Logf("sql %s of 100 BLOBs of 100 kB under --max-memory 64 MiB: peak RSS %.1f MiB", format, float64(r.hwm)/(1<<20))
		assert.Less(t, r.hwm, int64(maxMemory), format)
	}
}

// TestSQLTimeoutBoundsLockWait: --timeout bounds the whole command, a wait
// for a lock another process holds too, and a query past it is
// wsctl.query_limit (exit 2), however early it ends: not store.busy once
// the store's busy timeout has passed, nor store.canceled, the code of
// an interrupt (exit 130).
func TestSQLTimeoutBoundsLockWait(t *testing.T) {
	t.Parallel()
	c := seededStore(t)
	assert.Contains(t, c.fails(2, "sql", "--timeout", "1ns", "SELECT 1"), "wsctl.query_limit: the query ran longer than --timeout 1ns")

	ctx := context.Background()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(c.store, wsstore.DBName))
	require.NoError(t, err)
	defer db.Close()
	conn, err := db.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	for _, stmt := range []string{"PRAGMA locking_mode = EXCLUSIVE", "BEGIN EXCLUSIVE", "UPDATE meta SET value = value"} {
		_, err := conn.ExecContext(ctx, stmt)
		require.NoError(t, err, stmt)
	}
	errOut := c.fails(2, "sql", "--timeout", "200ms", "SELECT count(*) FROM events")
	assert.Contains(t, errOut, "wsctl.query_limit: the query ran longer than --timeout 200ms")

	_, err = conn.ExecContext(ctx, "ROLLBACK")
	require.NoError(t, err)
	require.NoError(t, conn.Close())
	require.NoError(t, db.Close())
	assert.Contains(t, c.ok("sql", "--timeout", "10s", "SELECT count(*) AS n FROM events"), "9")
}

// materializedQuery is a query that materializes tables tables of rows
// rows (each with a BLOB of 1,000 bytes) and sums their row counts, as n.
func materializedQuery(tables, rows int) string {
	ctes := make([]string, tables)
	counts := make([]string, tables)
	for i := range tables {
		ctes[i] = fmt.Sprintf("t%d AS MATERIALIZED (SELECT i, randomblob(1000) AS b FROM n)", i)
		counts[i] = fmt.Sprintf("(SELECT count(*) FROM t%d)", i)
	}
	return fmt.Sprintf("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < %d), %s SELECT %s AS n",
		rows, strings.Join(ctes, ", "), strings.Join(counts, " + "))
}

// TestSQLMaterializedTablesMemory: the tables a query materializes are
// held with the rest of what SQLite holds for it, to a quarter of
// --max-memory: 60 tables of 3 MB under --max-memory 16 MiB stop with
// wsctl.query_limit in a wsctl process whose peak RSS stays small (each
// table kept a page cache of its own, and the process peaked at about
// 250 MiB), and 60 tables of 200 kB under 64 MiB are counted.
func TestSQLMaterializedTablesMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("runs wsctl as a child")
	}
	c := seededStore(t)
	r := childRun(t, c.store, "", nil, "sql", "--max-memory", "16777216", materializedQuery(60, 3000))
	assert.Equal(t, 2, r.code, r.err)
	assert.Contains(t, r.err, "wsctl.query_limit: the query needs more than the 4194304 bytes SQLite may hold for it under --max-memory 16777216")
	t.Logf("sql of 60 materialized tables of 3 MB under --max-memory 16 MiB: peak RSS %.1f MiB", mib(r.hwm))
	assert.Less(t, r.hwm, int64(64<<20))

	r = childRun(t, c.store, "", nil, "sql", "--max-memory", "67108864", materializedQuery(60, 200))
	require.Equal(t, 0, r.code, r.err)
	assert.Equal(t, "n\n12000\n(1 row)\n", string(r.out))
	t.Logf("sql of 60 materialized tables of 200 kB under --max-memory 64 MiB: peak RSS %.1f MiB", mib(r.hwm))
	assert.Less(t, r.hwm, int64(64<<20))
}

// TestSQLHeapLimit: what SQLite holds for a query, counted by SQLite
// itself, grows to the quarter of --max-memory and no further, and the
// process's SQLite is unbounded again once the query ends.
func TestSQLHeapLimit(t *testing.T) {
	c := seededStore(t)
	used, _ := sqliteHeapUsed(true)
	errOut := c.fails(2, "sql", "--max-memory", "16777216", materializedQuery(60, 3000))
	assert.Contains(t, errOut, "wsctl.query_limit")
	_, peak := sqliteHeapUsed(false)
	t.Logf("SQLite's heap: %d bytes before the query, %d at its peak", used, peak)
	assert.Greater(t, peak, used+3<<20, "the tables were held in memory, up to the bound")
	assert.LessOrEqual(t, peak, used+4<<20+256<<10, "and no further (the connection itself holds some 130 kB)")

	tls := libc.NewTLS()
	defer tls.Close()
	assert.Zero(t, sqlite3.Xsqlite3_hard_heap_limit64(tls, -1), "no hard limit left")
	assert.Zero(t, sqlite3.Xsqlite3_soft_heap_limit64(tls, -1), "no soft limit left")
}

// sqliteHeapUsed returns the bytes SQLite's heap holds in this process
// and the most it has held since the last call that reset it.
func sqliteHeapUsed(reset bool) (used, highwater int64) {
	tls := libc.NewTLS()
	defer tls.Close()
	r := int32(0)
	if reset {
		r = 1
	}
	return sqlite3.Xsqlite3_memory_used(tls), sqlite3.Xsqlite3_memory_highwater(tls, r)
}
