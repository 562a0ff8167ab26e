package main

import (
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

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
came before gets ":1", ":2", … so no key repeats).

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
longer, and --max-memory (default 256 MiB) bounds what it holds: SQLite's
page cache for the query takes at most a quarter of it and a row a
quarter, so that any one value (a string or BLOB it reads or makes, such
as randomblob(N)) of a query of N columns takes at most a quarter over N,
sorts spill to temporary files, and the rows wsctl holds to print take
at most half (counted as printed, BLOBs as hex). A query over either
limit stops and exits with status 2, code wsctl.query_limit.

The tables are internal and may change between versions: use it to
explore, not to build on.`,
		Args: exactArgs(1),
		RunE: a.runWith(&g, func(ctx context.Context, args []string) error {
			return runSQL(ctx, g, lim, args)
		}),
	}
	cmd.Flags().Int64Var(&lim.maxMemory, "max-memory", lim.maxMemory, "bound the `BYTES` the query may hold (at least 1 MiB)")
	cmd.Flags().DurationVar(&lim.timeout, "timeout", lim.timeout, "stop the query after this long (0: no limit)")
	return cmd
}

// sqlResult is a query's columns and rows.
type sqlResult struct {
	cols []string
	rows [][]any
}

func runSQL(ctx context.Context, g globals, lim sqlLimits, args []string) error {
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
	res, err := queryReadOnly(ctx, filepath.Join(g.storeDir, wsstore.DBName), query, immutable, lim)
	if err != nil {
		return err
	}
	if g.json {
		out := make([]orderedRow, len(res.rows))
		keys := uniqueKeys(res.cols)
		for i, r := range res.rows {
			out[i] = orderedRow{cols: keys, vals: r}
		}
		return writeJSON(g.out, out)
	}
	t := newTable(g.out, res.cols...)
	for _, r := range res.rows {
		cells := make([]string, len(r))
		for i, v := range r {
			cells[i] = sqlText(v)
		}
		t.row(cells...)
	}
	if err := t.flush(); err != nil {
		return err
	}
	_, err = fmt.Fprintf(g.out, "(%d row%s)\n", len(res.rows), plural(int64(len(res.rows))))
	return err
}

// queryReadOnly runs query on a connection of its own: mode=ro and
// query_only (and immutable=1 for a file nothing can write), a
// transaction always rolled back, and an authorizer that lets the query
// only read; under lim (see the command's help).
func queryReadOnly(ctx context.Context, dbPath, query string, immutable bool, lim sqlLimits) (sqlResult, error) {
	if lim.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, lim.timeout)
		defer cancel()
	}
	abs, err := filepath.Abs(dbPath)
	if err != nil {
		return sqlResult{}, err
	}
	dsn := "file:" + (&url.URL{Path: filepath.ToSlash(abs)}).EscapedPath() +
		"?mode=ro&_pragma=query_only(1)&_pragma=busy_timeout(10000)&_pragma=temp_store(1)" +
		fmt.Sprintf("&_pragma=cache_size(-%d)", max(lim.maxMemory/4>>10, 1))
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
			return wserr.New(protocol.CodeQueryLimit, "sql", "", "the query ran longer than --timeout %s", lim.timeout)
		}
		var se *sqlite.Error
		if errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_TOOBIG {
			if ncols > 1 {
				return wserr.New(protocol.CodeQueryLimit, "sql", "", "the query makes a value over %d bytes, a quarter of --max-memory %d shared by its %d columns", valueMax/ncols, lim.maxMemory, ncols)
			}
			return wserr.New(protocol.CodeQueryLimit, "sql", "", "the query makes a value over %d bytes, a quarter of --max-memory %d", valueMax, lim.maxMemory)
		}
		if errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_NOMEM {
			return wserr.New(protocol.CodeQueryLimit, "sql", "", "the query ran out of memory (--max-memory %d)", lim.maxMemory)
		}
		return sqlError(err, auth)
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return sqlResult{}, fmt.Errorf("sql: %w", sqlError(err, nil))
	}
	defer tx.Rollback() // always: nothing a query does is kept

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
	for rows.Next() {
		vals := make([]any, len(res.cols))
		ptrs := make([]any, len(vals))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return sqlResult{}, limitErr(err)
		}
		for _, v := range vals {
			held += heldSize(v)
		}
		if held > budget {
			return sqlResult{}, wserr.New(protocol.CodeQueryLimit, "sql", "", "the result is over %d bytes, half of --max-memory %d; select fewer rows or columns (LIMIT, length(x) for large values)", budget, lim.maxMemory)
		}
		res.rows = append(res.rows, vals)
	}
	if err := rows.Err(); err != nil {
		return sqlResult{}, limitErr(err)
	}
	return res, nil
}

// heldSize is about what a value costs to hold and print: its printed
// length, BLOBs as hex, and a value's own overhead.
func heldSize(v any) int64 {
	switch v := v.(type) {
	case []byte:
		return 16 + 3*int64(len(v)) // the bytes and their hex
	case string:
		return 16 + 2*int64(len(v))
	}
	return 32
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

// sqlText renders a value for the table: NULL, hex for BLOBs.
func sqlText(v any) string {
	switch v := v.(type) {
	case nil:
		return "NULL"
	case []byte:
		return hex.EncodeToString(v)
	case string:
		return v
	case time.Time:
		return v.UTC().Format(time.RFC3339Nano)
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	return fmt.Sprint(v)
}

// sqlJSON converts a value for JSON: BLOBs as hex strings, and the REALs
// JSON has no number for (infinities, NaN) as the strings the table
// prints, "+Inf", "-Inf" and "NaN".
func sqlJSON(v any) any {
	switch v := v.(type) {
	case []byte:
		return hex.EncodeToString(v)
	case time.Time:
		return v.UTC().Format(time.RFC3339Nano)
	case float64:
		if math.IsInf(v, 0) || math.IsNaN(v) {
			return strconv.FormatFloat(v, 'g', -1, 64)
		}
	}
	return v
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

// orderedRow is a row object whose keys keep the query's column order.
type orderedRow struct {
	cols []string
	vals []any
}

func (r orderedRow) MarshalJSON() ([]byte, error) {
	var b strings.Builder
	b.WriteByte('{')
	for i, c := range r.cols {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(c)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(sqlJSON(r.vals[i]))
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return []byte(b.String()), nil
}
