package main

import (
	"context"
	"database/sql"
	"errors"
	"strings"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/wsstore/wsstore/wserr"
)

// readKeywords are the statements sql lets through to SQLite; the
// authorizer and the read-only connection then stop any write they hide.
var readKeywords = map[string]bool{"SELECT": true, "WITH": true, "VALUES": true, "EXPLAIN": true, "PRAGMA": true}

// checkReadOnlySQL refuses, before anything reaches SQLite, a script of
// more than one statement and a statement that does not start with a read
// keyword: VACUUM INTO, say, writes a new file even on a read-only
// connection, and SQLite's authorizer never sees it.
func checkReadOnlySQL(query string) error {
	stmts, param := scanSQL(query)
	switch {
	case len(stmts) == 0:
		return argError("sql", "no statement given")
	case len(stmts) > 1:
		return wserr.New(wserr.ReadOnly, "sql", "", "refused: %d statements; sql runs exactly one read-only statement", len(stmts))
	}
	kw := strings.ToUpper(stmts[0])
	if !readKeywords[kw] {
		// SQLite's own word first: a typo (SELEC 1) is a syntax error to
		// fix, not a write to refuse.
		if err := sqlSyntaxError(query); err != nil {
			return err
		}
		if kw == "" {
			kw = "such"
		}
		return wserr.New(wserr.ReadOnly, "sql", "", "refused: %s statements are not read-only; sql runs SELECT, WITH, VALUES, EXPLAIN or a read-only PRAGMA", kw)
	}
	if param != "" {
		return argError("sql", "the query has a parameter, %s; sql binds none: write the value into the query", param)
	}
	return nil
}

// scanSQL scans query with SQLite's lexical rules (quotes '…', "…", `…`
// with doubled quotes as escapes, […], -- and /* */ comments) and returns
// the first word of every non-empty statement between ';', and the first
// parameter it holds outside quotes and comments (?, ?NNN, :name, @name,
// $name, #name), or "". sql binds no values, and the driver would refuse
// such a query only as it runs it.
func scanSQL(query string) (stmts []string, param string) {
	var out []string
	inStmt := false
	var word strings.Builder
	wordDone := false
	start := func() {
		if !inStmt {
			inStmt = true
			word.Reset()
			wordDone = false
		}
	}
	end := func() {
		if inStmt {
			out = append(out, word.String())
		}
		inStmt = false
	}
	skipQuoted := func(i int, q byte) int {
		for i++; i < len(query); i++ {
			if query[i] == q {
				if i+1 < len(query) && query[i+1] == q {
					i++
					continue
				}
				return i
			}
		}
		return len(query)
	}
	isIDChar := func(c byte) bool {
		return c == '_' || c == '$' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
	}
	// paramAt returns the parameter starting at query[i], or "": '?' and
	// its digits, or one of :@$# and an identifier after it. '$' inside
	// an identifier (a$b) is part of it; the others end a word, so a
	// parameter may follow one with no space (LIMIT:n, SELECT@a).
	paramAt := func(i int) string {
		c := query[i]
		switch {
		case c == '?':
		case c == ':' || c == '@' || c == '#' || c == '$':
			if c == '$' && i > 0 && isIDChar(query[i-1]) || i+1 >= len(query) || !isIDChar(query[i+1]) {
				return ""
			}
		default:
			return ""
		}
		j := i + 1
		for j < len(query) && isIDChar(query[j]) {
			j++
		}
		return query[i:j]
	}
	for i := 0; i < len(query); i++ {
		c := query[i]
		if param == "" {
			param = paramAt(i)
		}
		switch {
		case c == ';':
			end()
		case c == '-' && i+1 < len(query) && query[i+1] == '-':
			for i < len(query) && query[i] != '\n' {
				i++
			}
			wordDone = wordDone || word.Len() > 0
		case c == '/' && i+1 < len(query) && query[i+1] == '*':
			j := strings.Index(query[i+2:], "*/")
			if j < 0 {
				i = len(query)
			} else {
				i += j + 3
			}
			wordDone = wordDone || word.Len() > 0
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			wordDone = wordDone || word.Len() > 0
		default:
			start()
			switch c {
			case '\'', '"', '`':
				i = skipQuoted(i, c)
				wordDone = true
			case '[':
				if j := strings.IndexByte(query[i:], ']'); j >= 0 {
					i += j
				} else {
					i = len(query)
				}
				wordDone = true
			default:
				isWord := c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
				if !isWord {
					wordDone = true
				} else if !wordDone {
					word.WriteByte(c)
				}
			}
		}
	}
	end()
	return out, param
}

// sqlSyntaxError compiles query, without running it, on an empty
// in-memory database and returns SQLite's error when it is not valid SQL
// at all (a syntax error, an unrecognized token, incomplete input), as
// wsctl.invalid_argument. Errors that depend on the schema (no such table)
// are left to the real query; compiling writes nothing anywhere.
func sqlSyntaxError(query string) error {
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		return nil
	}
	defer db.Close()
	stmt, err := db.PrepareContext(context.Background(), query)
	if err == nil {
		stmt.Close()
		return nil
	}
	var se *sqlite.Error
	if !errors.As(err, &se) || se.Code()&0xff != sqlite3.SQLITE_ERROR {
		return nil
	}
	msg := se.Error()
	for _, syntax := range []string{"syntax error", "unrecognized token", "incomplete input"} {
		if strings.Contains(msg, syntax) {
			return argError("sql", "%s", msg)
		}
	}
	return nil
}
