package main

import (
	"context"
	"database/sql"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
