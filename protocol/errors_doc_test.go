package protocol

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/wserr"
)

// TestErrorCodesDocListsEveryCode: docs/errors.md has a row for every
// error code declared in wserr and in this package, and no other, each with
// the exit and HTTP status the tables give it, so a new code cannot ship
// without the row a host reads and a row cannot go stale.
func TestErrorCodesDocListsEveryCode(t *testing.T) {
	b, err := os.ReadFile("../docs/errors.md")
	require.NoError(t, err)
	rows := map[wserr.Code][2]int{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z_]+\\.[a-z_]+)` \\| (\\d+) \\| (\\d+) \\|").FindAllStringSubmatch(string(b), -1) {
		c := wserr.Code(m[1])
		_, dup := rows[c]
		assert.False(t, dup, "docs/errors.md lists %s twice", c)
		exit, _ := strconv.Atoi(m[2])
		status, _ := strconv.Atoi(m[3])
		rows[c] = [2]int{exit, status}
	}

	declared := declaredCodes(t, "../wserr")
	for c := range declaredCodes(t, ".") {
		declared[c] = true
	}
	require.NotEmpty(t, declared)
	for c := range declared {
		row, ok := rows[c]
		if !assert.True(t, ok, "docs/errors.md has no row for %s", c) {
			continue
		}
		assert.Equal(t, ExitStatus(c), row[0], "docs/errors.md: exit status of %s", c)
		assert.Equal(t, HTTPStatus(c), row[1], "docs/errors.md: HTTP status of %s", c)
	}
	for c := range rows {
		assert.True(t, declared[c], "docs/errors.md lists %s, which no package declares", c)
	}
}

// declaredCodes returns the string constants of type Code or wserr.Code
// that the non-test Go files of dir declare.
func declaredCodes(t *testing.T, dir string) map[wserr.Code]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	codes := map[wserr.Code]bool{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		require.NoError(t, err)
		ast.Inspect(f, func(n ast.Node) bool {
			spec, ok := n.(*ast.ValueSpec)
			if !ok || !isCodeType(spec.Type) {
				return true
			}
			for _, v := range spec.Values {
				if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					s, err := strconv.Unquote(lit.Value)
					require.NoError(t, err)
					codes[wserr.Code(s)] = true
				}
			}
			return true
		})
	}
	return codes
}

func isCodeType(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name == "Code"
	case *ast.SelectorExpr:
		x, ok := e.X.(*ast.Ident)
		return ok && x.Name == "wserr" && e.Sel.Name == "Code"
	}
	return false
}
