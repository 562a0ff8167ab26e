package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFailedCommandsRemoveTheParentsTheyMade: a command that makes a
// store directory, with parents that were not there, and then fails
// (import of a file that is not there, a restore from an object store it
// cannot reach) removes the directory and those parents.
func TestFailedCommandsRemoveTheParentsTheyMade(t *testing.T) {
	top := t.TempDir()
	c := newCLI(t)
	c.store = filepath.Join(top, "a", "b", "store")
	c.fails(3, "import", filepath.Join(top, "missing.wsar"))
	assertEmptyDir(t, top)

	from := "s3://wsstore/desk/meta?endpoint=http://127.0.0.1:1&region=us-east-1"
	_, errOut, code := c.run("", "restore", "--from", from, filepath.Join(top, "r", "s", "restored"))
	require.NotEqual(t, 0, code, errOut)
	assertEmptyDir(t, top)
}

func assertEmptyDir(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.Empty(t, names, "left in %s", dir)
}
