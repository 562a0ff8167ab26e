package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/protocol"
	"github.com/wsstore/wsstore/wserr"
)

// sqlLimits bound what one query may take.
type sqlLimits struct {
	maxMemory int64         // bytes; see the --max-memory help
	timeout   time.Duration // 0: none
}

// Defaults of wsctl sql's limits.
const (
	defaultSQLMaxMemory = 256 << 20
	defaultSQLTimeout   = 30 * time.Second
)

func newSQLCmd(a *app) *cobra.Command {
	var g globals
	lim := sqlLimits{maxMemory: defaultSQLMaxMemory, timeout: defaultSQLTimeout}
	cmd := &cobra.Command{
		Use:   `sql "SELECT …"`,
		Short: "Run one read-only SQL query on the store's database",
		Long: `sql runs one SELECT (or WITH, VALUES, EXPLAIN, or a read-only PRAGMA such
as table_info) on the store's SQLite database and prints the rows as an
aligned table, or with --json as an array of row objects (BLOBs as hex,
infinite REALs as the strings "+Inf" and "-Inf"; a column name that
came before gets ":1", ":2", … so no key repeats). Integers are JSON
numbers, exact at any size: a reader that takes numbers as doubles
(JavaScript's JSON.parse) rounds those past 2^53, such as events.at, so
select cast(x AS TEXT) for it. Text that is not UTF-8 has each bad byte
replaced by U+FFFD in JSON (the table prints it escaped, \xff): select
hex(x) for its bytes.

A query reads one snapshot of the store. Writers go on meanwhile, but the
write-ahead log cannot be folded into the database past a running query,
so it grows by what they write until the query ends.

Nothing it runs can change the store. The query runs on a connection of its
own opened with mode=ro and query_only, inside a transaction that is always
rolled back, under an authorizer that denies every write, DDL, ATTACH and
writing PRAGMA; and wsctl refuses statements that do not start with one of
the keywords above (VACUUM, ATTACH, INSERT, …) and scripts of more than one
statement. A refused statement exits with status 8 (read-only). A query
binds no values: one holding a parameter (?, :name, @name, $name) is
wsctl.invalid_argument (status 2).

The events table stores most payloads packed, as BLOBs; payload_json(payload)
returns any payload as JSON text, for SQLite's JSON functions:

  wsctl sql "SELECT seq, json_extract(payload_json(payload), '$.path') FROM events"

A query runs under limits: --timeout (default 30s) stops it when it runs
longer, counted from the start, a wait for a lock another process holds
included, and --max-memory (default 256 MiB) bounds what it holds: what
SQLite holds for the query takes at most a quarter of it (at most
512 MiB), as SQLite counts it: its page cache, the tables and indexes it
materializes (WITH … AS MATERIALIZED, DISTINCT, IN (SELECT …)), its
sorts (ORDER BY, GROUP BY) and the values it makes, all kept in memory:
a query writes no temporary file. Any one value (a string or BLOB it
reads or makes, such as randomblob(N)) of a query of N columns takes at
most a quarter over N, as does a whole row the query sorts, groups or
materializes, which SQLite holds as one value; and the rows wsctl holds
to print take at most half (counted as printed, BLOBs as hex). A query
over any of these limits stops and exits with status 2, code
wsctl.query_limit.

The tables are internal and may change between versions: use it to
explore, not to build on.`,
		Args: exactArgs(1),
		RunE: a.runWith(&g, func(ctx context.Context, args []string) error {
			return runSQL(ctx, g, lim, args)
		}),
	}
	int64Var(cmd.Flags(), &lim.maxMemory, "max-memory", lim.maxMemory, "bound the `BYTES` the query may hold (at least 1 MiB)")
	cmd.Flags().DurationVar(&lim.timeout, "timeout", lim.timeout, "stop the query after this long (0: no limit)")
	return cmd
}

// sqlResult is a query's columns and its rows as they print: each value
// its table cell (sqlCell), or its JSON (sqlJSON).
type sqlResult struct {
	cols []string
	rows [][]string
}

func runSQL(ctx context.Context, g globals, lim sqlLimits, args []string) error {
	// Before the store is opened: SQLite counts its heap only if told so
	// before its first use (limitSQLiteHeap reports it if it was not).
	_ = enableMemStatus()
	query := args[0]
	if lim.maxMemory < 1<<20 {
		return argError("sql", "--max-memory %d is under 1 MiB", lim.maxMemory)
	}
	if lim.timeout < 0 {
		return argError("sql", "--timeout %s is negative", lim.timeout)
	}
	if err := checkReadOnlySQL(query); err != nil {
		return err
	}
	if err := storeExists(g.storeDir); err != nil {
		return err
	}
	// --timeout bounds the whole command: a wait for a lock another
	// process holds too, as the store is opened or the query starts.
	if lim.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, lim.timeout)
		defer cancel()
	}
	err := runSQLQuery(ctx, g, lim, query)
	if err != nil && ctx.Err() == context.DeadlineExceeded {
		return queryTimeout(lim)
	}
	return err
}

// queryTimeout is the error of a query that ran longer than --timeout.
func queryTimeout(lim sqlLimits) error {
	return wserr.New(protocol.CodeQueryLimit, "sql", "", "the query ran longer than --timeout %s", lim.timeout)
}

// runSQLQuery runs query on g's store, checked, and prints its rows.
func runSQLQuery(ctx context.Context, g globals, lim sqlLimits, query string) error {
	// A file that is not a store is refused (store.not_a_store) before
	// the query reads it, as every command refuses it; the check writes
	// nothing, and a store of an older format is queried as it is.
	// A store nothing can write here is read as immutable, as every
	// reading command reads it.
	db, err := index.Open(ctx, filepath.Join(g.storeDir, wsstore.DBName), index.Options{ReadOnly: true})
	immutable := false
	if err == nil {
		immutable = db.Immutable()
		err = db.Close()
	}
	if err != nil && !wserr.Is(err, wserr.OlderFormat) {
		return err
	}
	// What the query holds is counted against --max-memory; wsctl's heap
	// is collected before it grows past it, rather than at twice what is
	// live.
	defer softMemoryLimit(lim.maxMemory)()
	res, err := queryReadOnly(ctx, filepath.Join(g.storeDir, wsstore.DBName), query, immutable, lim, g.json)
	if err != nil {
		return err
	}
	if g.json {
		return writeSQLJSON(g.out, uniqueKeys(res.cols), res.rows)
	}
	return writeSQLTable(g.out, res.cols, res.rows)
}

// queryReadOnly runs query on a connection of its own: mode=ro and
// query_only (and immutable=1 for a file nothing can write), a
// transaction always rolled back, and an authorizer that lets the query
// only read; under lim (see the command's help). Each value is turned into
// its JSON when asJSON is set, else into its table cell, as it is read.
func queryReadOnly(ctx context.Context, dbPath, query string, immutable bool, lim sqlLimits, asJSON bool) (sqlResult, error) {
	abs, err := filepath.Abs(dbPath)
	if err != nil {
		return sqlResult{}, err
	}
	// Temporary tables and indexes are kept in memory (temp_store 2),
	// and so are a sort's rows: a sort spills to a file only once it
	// holds the page cache's size, set to all SQLite may hold. Nothing
	// goes to disk, and SQLite's heap limit bounds it all.
	heapMax := sqliteHeapMax(lim)
	dsn := "file:" + (&url.URL{Path: filepath.ToSlash(abs)}).EscapedPath() +
		"?mode=ro&_pragma=query_only(1)&_pragma=busy_timeout(10000)&_pragma=temp_store(2)" +
		fmt.Sprintf("&_pragma=cache_size(-%d)", heapMax>>10)
	if immutable {
		dsn += "&immutable=1"
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return sqlResult{}, fmt.Errorf("sql: %w", err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	conn, err := db.Conn(ctx)
	if err != nil {
		return sqlResult{}, fmt.Errorf("sql: %w", sqlError(err, nil))
	}
	defer conn.Close()

	auth := &readAuthorizer{}
	if err := conn.Raw(func(dc any) error {
		r, ok := dc.(sqlite.AuthorizerRegisterer)
		if !ok {
			return errors.New("the sqlite driver has no authorizer")
		}
		return r.RegisterAuthorizer(auth.authorize)
	}); err != nil {
		return sqlResult{}, fmt.Errorf("sql: %w", err)
	}
	// The row SQLite makes, whatever its number of columns, and so any
	// one string or BLOB the query makes, as a row's value, a part of one
	// or a record of a sort, takes at most a quarter: a query of n
	// columns may make values of a quarter over n each, and SQLite
	// refuses a larger one (SQLITE_TOOBIG) before it allocates it.
	valueMax := min(lim.maxMemory/4, 1<<30)
	ncols := int64(1)
	limitErr := func(err error) error {
		if ctx.Err() == context.DeadlineExceeded {
			return queryTimeout(lim)
		}
		var se *sqlite.Error
		if errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_TOOBIG {
			if ncols > 1 {
				return wserr.New(protocol.CodeQueryLimit, "sql", "", "the query makes a value over %d bytes, a quarter of --max-memory %d shared by its %d columns (a row it sorts, groups or materializes is one value)", valueMax/ncols, lim.maxMemory, ncols)
			}
			return wserr.New(protocol.CodeQueryLimit, "sql", "", "the query makes a value over %d bytes, a quarter of --max-memory %d", valueMax, lim.maxMemory)
		}
		if errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_NOMEM {
			return wserr.New(protocol.CodeQueryLimit, "sql", "", "the query needs more than the %d bytes SQLite may hold for it under --max-memory %d (a quarter, at most 512 MiB: the tables it materializes, its sorts and its page cache, all in memory)", heapMax, lim.maxMemory)
		}
		return sqlError(err, auth)
	}
	restoreHeap, err := limitSQLiteHeap(heapMax/2, heapMax)
	if err != nil {
		return sqlResult{}, fmt.Errorf("sql: %w", err)
	}
	defer restoreHeap()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return sqlResult{}, fmt.Errorf("sql: %w", sqlError(err, nil))
	}
	defer tx.Rollback() // always: nothing a query does is kept

	// The read starts here, under ctx, which ends a wait for a lock
	// another process holds: describing the query's columns below loads
	// the schema with no context to end it.
	var tables int64
	if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema").Scan(&tables); err != nil {
		return sqlResult{}, limitErr(err)
	}
	auth.setUser(true)
	defer auth.setUser(false)
	if err := conn.Raw(func(dc any) error {
		ci, ok := dc.(interface {
			ColumnInfo(query string) ([]sqlite.ColumnInfo, error)
		})
		if !ok {
			return errors.New("the sqlite driver does not describe a query's columns")
		}
		info, err := ci.ColumnInfo(query)
		ncols = max(int64(len(info)), 1)
		return err
	}); err != nil {
		return sqlResult{}, limitErr(err)
	}
	if _, err := sqlite.Limit(conn, sqlite3.SQLITE_LIMIT_LENGTH, int(max(valueMax/ncols, 1))); err != nil {
		return sqlResult{}, fmt.Errorf("sql: %w", err)
	}
	rows, err := tx.QueryContext(ctx, query)
	if err != nil {
		return sqlResult{}, limitErr(err)
	}
	defer rows.Close()
	var res sqlResult
	if res.cols, err = rows.Columns(); err != nil {
		return sqlResult{}, limitErr(err)
	}
	held, budget := int64(0), lim.maxMemory/2
	overErr := wserr.New(protocol.CodeQueryLimit, "sql", "", "the result is over %d bytes, half of --max-memory %d; select fewer rows or columns (LIMIT, length(x) for large values)", budget, lim.maxMemory)
	vals := make([]printedValue, len(res.cols))
	ptrs := make([]any, len(vals))
	for i := range vals {
		vals[i] = printedValue{asJSON: asJSON, held: &held, budget: budget, overErr: overErr}
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		held += 24 // the row's slice
		if err := rows.Scan(ptrs...); err != nil {
			if errors.Is(err, overErr) {
				return sqlResult{}, overErr
			}
			return sqlResult{}, limitErr(err)
		}
		row := make([]string, len(vals))
		for i := range vals {
			row[i], vals[i].out = vals[i].out, ""
		}
		res.rows = append(res.rows, row)
	}
	if err := rows.Err(); err != nil {
		return sqlResult{}, limitErr(err)
	}
	return res, nil
}

// sqliteHeapMax is the most SQLite's heap may grow by for a query: a
// quarter of --max-memory (its allocator may take up to twice what it
// counts; the rows wsctl prints take half), and at most SQLite's largest
// in-memory sort, so that a sort meets the limit before it would spill
// to a temporary file.
func sqliteHeapMax(lim sqlLimits) int64 {
	return min(lim.maxMemory/4, sqlite3.SQLITE_MAX_PMASZ)
}

// printedValue is a Scan destination that turns a value into its printed
// form as it is read, so that a large value is held once, as it prints,
// rather than as the driver's copy, database/sql's copy and the text
// made from them; it counts what it holds in *held, and fails with
// overErr past budget.
type printedValue struct {
	asJSON  bool
	out     string
	held    *int64
	budget  int64
	overErr error
}

func (p *printedValue) Scan(src any) error {
	if p.asJSON {
		p.out = sqlJSON(src)
	} else {
		p.out = sqlCell(src)
	}
	*p.held += 16 + int64(len(p.out))
	if *p.held > p.budget {
		p.out = ""
		return p.overErr
	}
	return nil
}

// readAuthorizer is the SQLite authorizer of sql's connection. While the
// user's statement compiles it allows reading, functions and read-only
// PRAGMAs, and denies everything else; outside (the driver's BEGIN and
// ROLLBACK) it allows all.
type readAuthorizer struct {
	mu     sync.Mutex
	user   bool
	denied string // what it denied, for the error message
}

func (a *readAuthorizer) setUser(on bool) {
	a.mu.Lock()
	a.user = on
	a.mu.Unlock()
}

func (a *readAuthorizer) authorize(action sqlite.AuthorizerActionCode, arg1, arg2, dbName, _ string) sqlite.AuthorizerReturnCode {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.user {
		return sqlite.AuthorizerOK
	}
	switch action {
	case sqlite.AuthSelect, sqlite.AuthRead, sqlite.AuthFunction, sqlite.AuthRecursive:
		return sqlite.AuthorizerOK
	case sqlite.AuthPragma:
		if readOnlyPragma(arg1, arg2) {
			return sqlite.AuthorizerOK
		}
		if arg2 != "" {
			a.denied = fmt.Sprintf("PRAGMA %s = %s", arg1, arg2)
		} else {
			a.denied = "PRAGMA " + arg1
		}
	default:
		a.denied = authActionName(action)
	}
	return sqlite.AuthorizerDeny
}

func (a *readAuthorizer) deniedWhat() string {
	if a == nil {
		return ""
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.denied
}

// Read-only PRAGMAs: introspection that takes an argument, and settings
// that are only read when given none.
var (
	pragmasWithArg = map[string]bool{
		"table_info": true, "table_xinfo": true, "table_list": true, "index_list": true, "index_info": true,
		"index_xinfo": true, "foreign_key_list": true, "foreign_key_check": true, "integrity_check": true, "quick_check": true,
	}
	pragmasNoArg = map[string]bool{
		"application_id": true, "auto_vacuum": true, "collation_list": true, "compile_options": true,
		"data_version": true, "database_list": true, "encoding": true, "foreign_keys": true, "freelist_count": true,
		"function_list": true, "journal_mode": true, "module_list": true, "page_count": true, "page_size": true,
		"pragma_list": true, "query_only": true, "schema_version": true, "user_version": true, "synchronous": true,
		"busy_timeout": true, "cache_size": true,
	}
)

func readOnlyPragma(name, arg string) bool {
	name = strings.ToLower(name)
	if arg == "" {
		return pragmasNoArg[name] || pragmasWithArg[name]
	}
	return pragmasWithArg[name]
}

func authActionName(a sqlite.AuthorizerActionCode) string {
	names := map[sqlite.AuthorizerActionCode]string{
		sqlite.AuthInsert: "INSERT", sqlite.AuthUpdate: "UPDATE", sqlite.AuthDelete: "DELETE",
		sqlite.AuthAttach: "ATTACH", sqlite.AuthDetach: "DETACH", sqlite.AuthTransaction: "a transaction statement",
		sqlite.AuthSavepoint: "SAVEPOINT", sqlite.AuthAlterTable: "ALTER TABLE", sqlite.AuthReindex: "REINDEX",
		sqlite.AuthAnalyze: "ANALYZE",
	}
	if n, ok := names[a]; ok {
		return n
	}
	return "DDL (CREATE or DROP)"
}

// sqlError codes a driver error: refusals (authorizer, read-only) are
// store.read_only, other SQL errors (syntax, unknown table) are
// workspace.invalid_argument.
func sqlError(err error, auth *readAuthorizer) error {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return err
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_AUTH:
		what := auth.deniedWhat()
		if what == "" {
			what = "the statement"
		}
		return wserr.New(wserr.ReadOnly, "sql", "", "refused: %s would change the store; sql only reads", what)
	case sqlite3.SQLITE_READONLY:
		return wserr.New(wserr.ReadOnly, "sql", "", "refused: the statement would change the store; sql only reads (%v)", err)
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return wserr.Wrap(wserr.Busy, "sql", "", err)
	case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
		return wserr.Wrap(wserr.Corrupt, "sql", "", err)
	case sqlite3.SQLITE_ERROR:
		return argError("sql", "%v", err)
	}
	return fmt.Errorf("sql: %w", err)
}

// sqlCell renders a value for the table: NULL, hex for BLOBs, and text
// made single-line (cell).
func sqlCell(v any) string {
	switch v := v.(type) {
	case nil:
		return "NULL"
	case []byte:
		return hexText(v, "")
	case string:
		return cell(v)
	case time.Time:
		return v.UTC().Format(time.RFC3339Nano)
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	return cell(fmt.Sprint(v))
}

// sqlJSON renders a value as JSON: BLOBs as hex strings, and the REALs
// JSON has no number for (infinities, NaN) as the strings the table
// prints, "+Inf", "-Inf" and "NaN".
func sqlJSON(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case []byte:
		return hexText(v, `"`)
	case int64:
		return strconv.FormatInt(v, 10)
	case time.Time:
		return `"` + v.UTC().Format(time.RFC3339Nano) + `"`
	case float64:
		if math.IsInf(v, 0) || math.IsNaN(v) {
			return `"` + strconv.FormatFloat(v, 'g', -1, 64) + `"`
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "null" // every value the driver gives marshals
	}
	return string(b)
}

// hexText returns b in hex between quote and quote, made in place: a
// large BLOB costs its hex once.
func hexText(b []byte, quote string) string {
	var sb strings.Builder
	sb.Grow(2*len(b) + 2*len(quote))
	sb.WriteString(quote)
	var buf [1024]byte
	for len(b) > 0 {
		n := hex.Encode(buf[:], b[:min(len(b), len(buf)/2)])
		sb.Write(buf[:n])
		b = b[n/2:]
	}
	sb.WriteString(quote)
	return sb.String()
}

// uniqueKeys returns the column names as a row object's keys: a name
// that came before gets ":1", ":2", … as SQLite names the columns of a
// CREATE TABLE … AS, so no key repeats (a JSON reader would keep one).
func uniqueKeys(cols []string) []string {
	seen := map[string]bool{}
	out := make([]string, len(cols))
	for i, c := range cols {
		name := c
		for n := 1; seen[name]; n++ {
			name = fmt.Sprintf("%s:%d", c, n)
		}
		seen[name] = true
		out[i] = name
	}
	return out
}

// writeSQLJSON prints rows of JSON values as an array of objects with
// keys, indented as writeJSON indents, a row at a time: nothing but the
// rows is held whole.
func writeSQLJSON(w io.Writer, keys []string, rows [][]string) error {
	bw := bufio.NewWriter(w)
	if len(rows) == 0 {
		bw.WriteString("[]\n")
		return bw.Flush()
	}
	quoted := make([]string, len(keys))
	for i, k := range keys {
		b, err := json.Marshal(k)
		if err != nil {
			return err
		}
		quoted[i] = string(b)
	}
	bw.WriteString("[\n")
	for i, r := range rows {
		bw.WriteString("  {\n")
		for j, v := range r {
			bw.WriteString("    ")
			bw.WriteString(quoted[j])
			bw.WriteString(": ")
			bw.WriteString(v)
			if j < len(r)-1 {
				bw.WriteByte(',')
			}
			bw.WriteByte('\n')
		}
		bw.WriteString("  }")
		if i < len(rows)-1 {
			bw.WriteByte(',')
		}
		bw.WriteByte('\n')
		rows[i] = nil // printed: the collector may take it
	}
	bw.WriteString("]\n")
	return bw.Flush()
}

// writeSQLTable prints the columns and rows of cells aligned as table
// aligns them (two spaces between columns, a line's trailing spaces
// dropped), then the row count, a line at a time: nothing but the rows
// is held whole.
func writeSQLTable(w io.Writer, cols []string, rows [][]string) error {
	header := make([]string, len(cols))
	for i, c := range cols {
		header[i] = cell(c)
	}
	widths := make([]int, len(cols))
	widen := func(r []string) {
		for j := range len(r) - 1 {
			widths[j] = max(widths[j], utf8.RuneCountInString(r[j]))
		}
	}
	widen(header)
	for _, r := range rows {
		widen(r)
	}
	bw := bufio.NewWriter(w)
	spaces := strings.Repeat(" ", 64)
	// printLine writes a line's spaces only once text follows them, so
	// that none ends it.
	printLine := func(r []string) {
		pending := 0
		for j, c := range r {
			if text := strings.TrimRight(c, " "); text != "" {
				for ; pending > 0; pending -= min(pending, len(spaces)) {
					bw.WriteString(spaces[:min(pending, len(spaces))])
				}
				bw.WriteString(text)
			}
			pending += len(c) - len(strings.TrimRight(c, " "))
			if j < len(r)-1 {
				pending += widths[j] + 2 - utf8.RuneCountInString(c)
			}
		}
		bw.WriteByte('\n')
	}
	printLine(header)
	n := len(rows)
	for i, r := range rows {
		printLine(r)
		rows[i] = nil // printed: the collector may take it
	}
	fmt.Fprintf(bw, "(%d row%s)\n", n, plural(int64(n)))
	return bw.Flush()
}
