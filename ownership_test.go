package wsstore_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tableOwners names the one package (by directory) whose SQL may name each
// table. Every other package goes through the owner's API.
var tableOwners = map[string]string{
	"meta":               "index",
	"blobs":              "cas",
	"chunks":             "cas",
	"blob_chunks":        "cas",
	"dicts":              "cas",
	"blob_reencodes":     "cas",
	"chunk_holds":        "cas",
	"trees":              "vfs",
	"tree_refs":          "vfs",
	"tree_refs_backfill": "vfs",
	"gc_candidates":      "vfs",
	"gc_candidates_last": "vfs",
	"events":             "journal",
	"checkpoints":        "checkpoint",
	"chats":              "runs",
	"runs":               "runs",
	"commits":            "runs",
	"actor_spaces":       "actors",
	"actor_changes":      "actors",
	"policies":           "runs",
	"deletions":          "runs",
	"remote_objects":     "remote",
	"remote_chunks":      "remote",
	"remote_cache":       "remote",
	"remote_dropped":     "remote",
	"sync_items":         "remote",
	"sync_remotes":       "remote",
	"sync_changes":       "remote",
	"sync_devices":       "remote",
	"sync_tombstones":    "remote",
	"sync_indexes":       "remote",
	"tokens":             "tokens",
}

// migrationTables are names that exist only while a migration rebuilds a
// table; no package's code may name them.
var migrationTables = []string{"trees_keyed", "trees_rowid", "format_2_rows", "format_3_rows", "sync_tombstones_lives", "sync_tombstones_one",
	"remote_dropped_seq", "remote_dropped_old"}

// TestTableOwnership fails when a package's SQL names a table it does not
// own. SQL is every string literal in the module's non-test Go files that
// starts with an SQL statement keyword; tests may read any table to check
// what the code stored.
func TestTableOwnership(t *testing.T) {
	tables := migratedTables(t, "migrations")
	for _, name := range tables {
		if slices.Contains(migrationTables, name) {
			continue
		}
		assert.Contains(t, tableOwners, name, "table %s, created by a migration, has no owner in tableOwners", name)
	}
	violations, checked := checkOwnership(t, goFiles(t, "."), tables)
	assert.Empty(t, violations)
	assert.Greater(t, checked, 50, "the checker found too few SQL strings: it is not reading the code")
}

// TestStorageDocNamesEachOwner: docs/storage.md's layout table has a row
// for every package that owns a table, naming each table it owns, so the
// page that says which package owns what cannot fall behind the owners.
func TestStorageDocNamesEachOwner(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("docs", "storage.md"))
	require.NoError(t, err)
	rows := map[string]string{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z]+)/` \\|(.*)$").FindAllStringSubmatch(string(b), -1) {
		rows[m[1]] = m[2]
	}
	for table, owner := range tableOwners {
		row, ok := rows[owner]
		if !assert.True(t, ok, "docs/storage.md's layout has no row for %s/, which owns %s", owner, table) {
			continue
		}
		cells := strings.Split(row, "|")
		require.GreaterOrEqual(t, len(cells), 3, "docs/storage.md's row for %s/", owner)
		assert.Contains(t, cells[len(cells)-2], "`"+table+"`", "docs/storage.md's row for %s/ names its table %s", owner, table)
	}
}

// TestTableOwnershipCatchesCrossPackageSQL shows the check at work: a
// query in journal that names the runs table is reported, one that names
// its own events table is not.
func TestTableOwnershipCatchesCrossPackageSQL(t *testing.T) {
	src := "package journal\n\nconst q = `\n\tSELECT e.seq FROM events e JOIN runs r ON r.id = e.run_id`\n\nconst ok = `SELECT seq FROM events WHERE run_id = ?`\n"
	violations, checked := checkOwnership(t, map[string]string{"journal/leak.go": src}, []string{"events", "runs"})
	assert.Equal(t, 2, checked)
	require.Len(t, violations, 1)
	assert.Contains(t, violations[0], "journal/leak.go:3")
	assert.Contains(t, violations[0], `table "runs" (owner runs)`)
}

// TestTableOwnershipParsesSQL pins what counts as naming a table.
func TestTableOwnershipParsesSQL(t *testing.T) {
	tables := []string{"blobs", "chunks", "blob_chunks", "runs", "events"}
	for _, tc := range []struct {
		name, sql string
		want      []string
	}{
		{"Select", `SELECT hash FROM blobs WHERE hash = ?`, []string{"blobs"}},
		{"Join", `SELECT 1 FROM blobs b LEFT JOIN blob_chunks c ON c.blob = b.hash`, []string{"blob_chunks", "blobs"}},
		{"Subquery", `DELETE FROM chunks WHERE NOT EXISTS (SELECT 1 FROM blob_chunks WHERE chunk = ?)`, []string{"blob_chunks", "chunks"}},
		{"InsertUpdate", "INSERT INTO runs (id) VALUES (?)", []string{"runs"}},
		{"Update", "UPDATE events SET level = ?", []string{"events"}},
		{"Quoted", `SELECT * FROM "runs"`, []string{"runs"}},
		{"CaseInsensitive", `select * from Runs`, []string{"runs"}},
		{"CommaJoin", `SELECT * FROM blobs, chunks`, []string{"blobs", "chunks"}},
		{"ColumnNotTable", `SELECT runs FROM events`, []string{"events"}},
		{"Prose", `no runs here`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tablesNamed(tc.sql, tables))
		})
	}
}

// goFiles reads the module's non-test Go files under root, by path.
// Migrations are SQL of their own and testdata is not code.
func goFiles(t *testing.T, root string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "migrations") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			files[filepath.ToSlash(path)] = string(b)
		}
		return nil
	})
	require.NoError(t, err)
	return files
}

// checkOwnership returns a line for every SQL string in files (source by
// path) that names a table of tables outside its owner, and the number of
// SQL strings it checked. A file's package is its directory.
func checkOwnership(t *testing.T, files map[string]string, tables []string) (violations []string, checked int) {
	t.Helper()
	paths := slices.Sorted(maps.Keys(files))
	fset := token.NewFileSet()
	for _, path := range paths {
		f, err := parser.ParseFile(fset, path, files[path], parser.SkipObjectResolution)
		require.NoError(t, err)
		pkg := filepath.ToSlash(filepath.Dir(path))
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil || !isSQL(s) {
				return true
			}
			checked++
			for _, table := range tablesNamed(s, tables) {
				owner, known := tableOwners[table]
				if !known || owner != pkg {
					violations = append(violations, fmt.Sprintf("%s: package %s names table %q (owner %s)", fset.Position(lit.Pos()), pkg, table, ownerName(owner)))
				}
			}
			return true
		})
	}
	return violations, checked
}

func ownerName(owner string) string {
	if owner == "" {
		return "none"
	}
	return owner
}

var sqlStart = regexp.MustCompile(`(?i)^\s*(SELECT|INSERT|UPDATE|DELETE|REPLACE|WITH|CREATE|DROP|ALTER)\b`)

func isSQL(s string) bool { return sqlStart.MatchString(s) }

// tableRef finds the name after a keyword that introduces a table, and
// after each comma of a FROM list.
var tableRef = regexp.MustCompile(`(?i)\b(?:FROM|JOIN|INTO|UPDATE|TABLE|EXISTS)\s+"?([a-z_][a-z0-9_]*)"?((?:\s+(?:AS\s+)?[a-z_][a-z0-9_]*)?(?:\s*,\s*"?[a-z_][a-z0-9_]*"?(?:\s+(?:AS\s+)?[a-z_][a-z0-9_]*)?)*)`)

var listed = regexp.MustCompile(`(?i),\s*"?([a-z_][a-z0-9_]*)"?`)

// tablesNamed returns, sorted, the tables of tables that sql names.
func tablesNamed(sql string, tables []string) []string {
	var out []string
	add := func(name string) {
		name = strings.ToLower(name)
		if slices.Contains(tables, name) && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	for _, m := range tableRef.FindAllStringSubmatch(sql, -1) {
		add(m[1])
		for _, l := range listed.FindAllStringSubmatch(m[2], -1) {
			add(l[1])
		}
	}
	slices.Sort(out)
	return out
}

// migratedTables returns the tables the migrations in dir create.
func migratedTables(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	create := regexp.MustCompile(`(?i)CREATE\s+(?:TEMP\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?"?([a-z_][a-z0-9_]*)`)
	var out []string
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		for _, m := range create.FindAllStringSubmatch(string(b), -1) {
			if name := strings.ToLower(m[1]); !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
	}
	require.NotEmpty(t, out)
	return out
}
