package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
)

// seededStore makes a store with one run and closes it, so the database
// file is complete on its own and can be compared byte for byte.
func seededStore(t *testing.T) *cli {
	t.Helper()
	c := newCLI(t)
	st, err := wsstore.Open(context.Background(), c.store, wsstore.Options{})
	require.NoError(t, err)
	c.seedRun(st, "run_a")
	require.NoError(t, st.Close())
	return c
}

func TestSQLQueries(t *testing.T) {
	t.Parallel()
	c := seededStore(t)

	out := c.ok("sql", "SELECT id, status FROM runs")
	assert.Equal(t, "id     status\nrun_a  running\n(1 row)\n", out)

	out = c.ok("sql", "SELECT hash, size, codec FROM blobs ORDER BY size DESC LIMIT 1", "--json")
	var rows []map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &rows))
	require.Len(t, rows, 1)
	assert.Regexp(t, `^[0-9a-f]{64}$`, rows[0]["hash"], "BLOBs print as hex")
	assert.Less(t, strings.Index(out, `"hash"`), strings.Index(out, `"size"`), "keys keep the column order")
	assert.Less(t, strings.Index(out, `"size"`), strings.Index(out, `"codec"`))

	out = c.ok("sql", "VALUES (1, x'00ff', NULL, 'a\tb', 2.5)")
	assert.Contains(t, out, "1        00ff     NULL     a\\tb     2.5")
	out = c.ok("sql", "SELECT cast(x'ff41' AS text) AS a, 'b' AS b UNION ALL SELECT 'xxxxxxxx', 'yy'")
	assert.Equal(t, "a         b\n\\xffA     b\nxxxxxxxx  yy\n(2 rows)\n", out, "a byte that is not UTF-8 is escaped, and the columns stay aligned")
	out = c.ok("sql", "SELECT 9007199254740993 AS n, cast(x'ff41' AS text) AS t", "--json")
	assert.Equal(t, "[\n  {\n    \"n\": 9007199254740993,\n    \"t\": \"\\ufffdA\"\n  }\n]\n", out,
		"integers are exact past 2^53; a byte that is not UTF-8 is U+FFFD, as the help says")
	out = c.ok("sql", "VALUES (1, x'00ff', NULL)", "--json")
	assert.JSONEq(t, `[{"column1":1,"column2":"00ff","column3":null}]`, out)
	// Columns of one name are told apart, as SQLite names them in a
	// CREATE TABLE … AS: a JSON object holds each name once.
	out = c.ok("sql", "SELECT 1 AS root, 2 AS root, 3 AS root, 4 AS \"root:1\"", "--json")
	assert.Equal(t, "[\n  {\n    \"root\": 1,\n    \"root:1\": 2,\n    \"root:2\": 3,\n    \"root:1:1\": 4\n  }\n]\n", out)

	for _, q := range []string{
		"PRAGMA table_info(runs)",
		"PRAGMA journal_mode",
		"SELECT name FROM pragma_table_info('runs')",
		"WITH r AS (SELECT id FROM runs) SELECT count(*) FROM r",
		"  -- a comment\n  select count(*) from events;  ",
		"EXPLAIN QUERY PLAN SELECT * FROM runs",
	} {
		c.ok("sql", q)
	}
	assert.Equal(t, "[]\n", c.ok("sql", "SELECT * FROM runs WHERE 0", "--json"))
	assert.Contains(t, c.fails(2, "sql", "SELECT FROM WHERE"), "wsctl.invalid_argument")
	// SQLite's parse error comes before the read-only refusal: a typo is
	// a syntax error, not a write.
	for _, q := range []string{"SELEKT 1", "SELEC 1", "(SELECT 1)"} {
		errOut := c.fails(2, "sql", q)
		assert.Contains(t, errOut, "syntax error", q)
		assert.Contains(t, errOut, "wsctl.invalid_argument", q)
		assert.NotContains(t, errOut, "not read-only", q)
	}
	assert.Contains(t, c.fails(8, "sql", "VACUUM"), "refused: VACUUM statements", "valid SQL that is no read is refused")
	assert.Contains(t, c.fails(2, "sql", "SELECT * FROM nosuchtable"), "no such table")
	c.fails(2, "sql", "  ;; -- nothing")
}

// TestSQLRefusesWrites: every write, DDL, ATTACH, writing PRAGMA and
// multi-statement script is refused with status 8, and the store's file is
// unchanged byte for byte.
func TestSQLRefusesWrites(t *testing.T) {
	t.Parallel()
	c := seededStore(t)
	db := filepath.Join(c.store, wsstore.DBName)
	before := hashFile(t, db)
	other := filepath.Join(t.TempDir(), "other.db")

	for _, q := range []string{
		"INSERT INTO meta (key, value) VALUES ('x', 'y')",
		"UPDATE runs SET status = 'failed'",
		"DELETE FROM events",
		"REPLACE INTO meta (key, value) VALUES ('format_version', '9')",
		"DROP TABLE events",
		"CREATE TABLE t (x)",
		"CREATE TEMP TABLE t (x)",
		"CREATE INDEX i ON runs (status)",
		"ALTER TABLE runs ADD COLUMN x",
		"ATTACH DATABASE '" + other + "' AS o",
		"DETACH DATABASE main",
		"PRAGMA query_only=0; INSERT INTO meta (key, value) VALUES ('x', 'y')",
		"PRAGMA query_only = 0",
		"PRAGMA journal_mode=DELETE",
		"PRAGMA user_version = 7",
		"PRAGMA wal_checkpoint(TRUNCATE)",
		"PRAGMA wal_checkpoint",
		"PRAGMA optimize",
		"PRAGMA main.user_version = 7",
		"VACUUM",
		"VACUUM INTO '" + other + "'",
		"REINDEX",
		"ANALYZE",
		"BEGIN",
		"COMMIT",
		"SAVEPOINT s",
		"SELECT 1; SELECT 2",
		"SELECT 1; DELETE FROM events",
		"SELECT 1;\n-- x\nDROP TABLE runs",
		"WITH x AS (SELECT 1) INSERT INTO meta (key, value) SELECT 'a', 'b' FROM x",
		"WITH x AS (SELECT 1) DELETE FROM events",
		"/* comment */ DELETE FROM events",
		"SELECT 'a;b'; UPDATE runs SET status = 'x'",
		`SELECT "x"";"; DELETE FROM events`,
	} {
		t.Run(strings.Fields(q)[0], func(t *testing.T) {
			errOut := c.fails(8, "sql", q)
			assert.Contains(t, errOut, "store.read_only: refused", q)
		})
	}
	assert.Equal(t, before, hashFile(t, db), "the store file is unchanged")
	assert.NoFileExists(t, other, "no attached or vacuumed-into file was created")
	out := c.ok("sql", "SELECT count(*) AS n FROM events")
	assert.Regexp(t, regexp.MustCompile(`(?m)^9$`), out)
	entries, err := os.ReadDir(c.store)
	require.NoError(t, err)
	for _, e := range entries {
		assert.True(t, strings.HasPrefix(e.Name(), wsstore.DBName), "no stray file %s", e.Name())
	}
}

func TestSplitStatements(t *testing.T) {
	t.Parallel()
	tests := []struct {
		q    string
		want []string
	}{
		{"", nil},
		{" ; ;", nil},
		{"select 1", []string{"select"}},
		{"SELECT 1;", []string{"SELECT"}},
		{"/* c */SELECT 1 -- x;\n", []string{"SELECT"}},
		{"SELECT ';' ; VALUES(1)", []string{"SELECT", "VALUES"}},
		{`SELECT "a;""b"`, []string{"SELECT"}},
		{"SELECT [a;b], `c;d`", []string{"SELECT"}},
		{"SELECT 1 /* ; */", []string{"SELECT"}},
		{"SELECT 1 /* unterminated ; DELETE", []string{"SELECT"}},
		{"SELECT 'unterminated ; DELETE", []string{"SELECT"}},
		{"PRAGMA x;DELETE FROM y", []string{"PRAGMA", "DELETE"}},
	}
	for _, tt := range tests {
		stmts, _ := scanSQL(tt.q)
		assert.Equal(t, tt.want, stmts, "%q", tt.q)
	}
}

// TestSQLPayloadJSON: payload_json gives every event's payload as the JSON
// text wsctl log prints, packed or not, so SQLite's JSON functions work on
// it through the read-only connection.
func TestSQLPayloadJSON(t *testing.T) {
	t.Parallel()
	c := seededStore(t)

	var stored []struct {
		Type   string `json:"type"`
		Stored string `json:"stored"`
	}
	c.jsonOut(&stored, "sql", "SELECT type, typeof(payload) AS stored FROM events WHERE run_id = 'run_a' ORDER BY seq")
	require.NotEmpty(t, stored)
	for _, s := range stored {
		if s.Type == "workspace_file_written" {
			assert.Equal(t, "blob", s.Stored, "a payload with hashes is stored packed")
		}
	}

	out := c.ok("sql", "SELECT json_extract(payload_json(payload), '$.path') AS path FROM events WHERE type = 'workspace_file_written' ORDER BY seq")
	assert.Equal(t, "path\noutput/a.md\noutput/a.md\nscratch/b.bin\n(3 rows)\n", out)

	type event struct {
		Seq     int64           `json:"seq"`
		Payload json.RawMessage `json:"payload"`
	}
	var logged []event
	for _, line := range strings.Split(strings.TrimSpace(c.ok("log", "run_a", "--json")), "\n") {
		var e event
		require.NoError(t, json.Unmarshal([]byte(line), &e), line)
		logged = append(logged, e)
	}
	var rows []struct {
		Seq     int64  `json:"seq"`
		Payload string `json:"payload"`
	}
	c.jsonOut(&rows, "sql", "SELECT seq, payload_json(payload) AS payload FROM events WHERE run_id = 'run_a' ORDER BY seq")
	require.Len(t, rows, len(logged))
	for i, r := range rows {
		assert.Equal(t, logged[i].Seq, r.Seq)
		assert.Equal(t, string(logged[i].Payload), r.Payload, "seq %d", r.Seq)
		assert.True(t, json.Valid([]byte(r.Payload)), "seq %d", r.Seq)
	}
	assert.Regexp(t, `"hash":"[0-9a-f]{64}"`, c.ok("sql", "SELECT payload_json(payload) FROM events WHERE type = 'workspace_file_written'"),
		"hashes come back as hex")
}

// TestSQLParameters: sql binds no values, so a query with a parameter is
// the caller's mistake, wsctl.invalid_argument (exit 2) naming it, not an
// internal error; the same characters in quotes, comments and
// identifiers are no parameter.
func TestSQLParameters(t *testing.T) {
	t.Parallel()
	c := seededStore(t)
	for q, param := range map[string]string{
		"SELECT ?":                             "?",
		"SELECT ?2":                            "?2",
		"SELECT * FROM runs WHERE id = :id":    ":id",
		"SELECT @a":                            "@a",
		"SELECT $a":                            "$a",
		"SELECT 'x?', -- ?\n :b /* @c */":      ":b",
		"WITH r AS (SELECT $x(1)) SELECT 1 \n": "$x",
		"SELECT@a":                             "@a",
		"SELECT 1 LIMIT:n":                     ":n",
		"SELECT 1 WHERE 1 IS#p":                "#p",
	} {
		errOut := c.fails(2, "sql", q)
		assert.Contains(t, errOut, "wsctl.invalid_argument", q)
		assert.Contains(t, errOut, "parameter, "+param+";", q)
	}
	out := c.ok("sql", "SELECT 'a?b:c' AS \"d@e\", [f$g] AS `h?`, f$g AS a$b FROM (SELECT 1 AS f$g) -- ?x\n/* :y */")
	assert.Equal(t, "d@e    h?  a$b\na?b:c  1   1\n(1 row)\n", out)
	assert.Contains(t, c.fails(8, "sql", "DELETE FROM events WHERE seq = ?"), "store.read_only", "a write is refused first")
}
