package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestCatFileNamedAsADirectory: cat of a file whose path ends in "/" or
// in a "." segment is workspace.invalid_path, as a change of it is; it
// printed the file. A directory named so is refused as before.
func TestCatFileNamedAsADirectory(t *testing.T) {
	c := newCLI(t)
	c.ok("init")
	c.seedRun(c.open(), "run_a")
	for _, p := range []string{"output/a.md/", "output/a.md/."} {
		assert.Contains(t, c.fails(4, "cat", "run_a", p), "workspace.invalid_path", p)
		assert.Contains(t, c.fails(4, "cat", "run_a", p, "--json"), "workspace.invalid_path", p)
	}
	assert.Contains(t, c.fails(4, "cat", "run_a", "output/"), "workspace.path_is_directory")
	assert.Equal(t, "one\ntwo\n", c.ok("cat", "run_a", "output/a.md"))
}
