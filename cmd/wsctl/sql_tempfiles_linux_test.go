package main

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSQLWritesNoTemporaryFiles: a query's materialized tables and sorts
// are kept in memory, within --max-memory, never in temporary files: run
// with a file size limit of 256 KiB (which a temporary file past it
// meets as a write error), a query whose tables or sort need more memory
// than --max-memory gives them stops with wsctl.query_limit, and one
// within it prints its rows. Each of these queries wrote tens of MB of
// temporary files before.
func TestSQLWritesNoTemporaryFiles(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash to set the file size limit with")
	}
	bin := wsctlBinary(t)
	store := filepath.Join(t.TempDir(), "store")
	_, errOut, status := binCLI{t: t, bin: bin, store: store}.run("", "init")
	require.Equal(t, 0, status, errOut)
	limited := func(args ...string) (string, string, int) {
		t.Helper()
		out, errOut, status := fileLimited(bash, 256, "", bin, append([]string{"--store", store, "sql"}, args...)...)
		require.NotEqual(t, -1, status)
		return out, errOut, status
	}
	const n = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 100000) "
	sorts := map[string]string{
		"materialized": materializedQuery(60, 3000),
		"GROUP BY":     n + "SELECT count(*) AS n FROM (SELECT hex(randomblob(50)) AS h FROM n GROUP BY h)",
		"DISTINCT":     n + "SELECT count(DISTINCT hex(randomblob(50))) AS n FROM n",
		"ORDER BY":     n + "SELECT count(*) AS n FROM (SELECT i FROM n ORDER BY hex(randomblob(50)) LIMIT 3 OFFSET 99990)",
	}
	for name, query := range sorts {
		_, errOut, status := limited("--max-memory", "16777216", query)
		assert.Equal(t, 2, status, "%s: %s", name, errOut)
		assert.Contains(t, errOut, "wsctl.query_limit: the query needs more than", name)
	}
	want := map[string]string{"GROUP BY": "100000", "DISTINCT": "100000", "ORDER BY": "3"}
	for name, rows := range want {
		out, errOut, status := limited("--max-memory", "134217728", sorts[name])
		assert.Equal(t, 0, status, "%s: %s", name, errOut)
		assert.Equal(t, "n\n"+rows+"\n(1 row)\n", out, name)
	}
}
