package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

// TestShowPrimaryRoot: show reports the run's active project, in text
// and JSON, and checkout leaves allowed host paths and scratch/ out.
func TestShowPrimaryRoot(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	proj := filepath.Join(t.TempDir(), "myapp")
	require.NoError(t, os.Mkdir(proj, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(proj, "go.mod"), []byte("module myapp\n"), 0o644))
	st := c.open()
	prof := runs.DefaultProfile()
	prof.AllowPaths = []runs.HostPath{{Path: proj, Writable: true}}
	_, err := st.Runs.CreateRun(context.Background(), runs.CreateRequest{
		Chat: runs.ChatKey{Kind: "character", StableChatID: "cell"}, RunID: "run_p", Profile: &prof,
	})
	require.NoError(t, err)
	ws := st.Runs.Workspace("run_p", runs.ModelScope)
	for _, p := range []string{"output/main.md", "scratch/tmp.md", "host/myapp/notes.md"} {
		_, err := ws.Write(context.Background(), vfs.MustPath(p), []byte("x\n"), vfs.WriteOptions{})
		require.NoError(t, err, p)
	}
	require.NoError(t, st.Close())

	out := c.ok("show", "run_p")
	assert.Contains(t, out, "primary      host/myapp = "+proj+" (allowPaths)")
	var d runDetails
	c.jsonOut(&d, "show", "run_p")
	assert.Equal(t, runs.PrimaryRoot{Source: "allowPaths", Path: "host/myapp", HostPath: proj}, d.Run.PrimaryRoot)

	dir := filepath.Join(t.TempDir(), "co")
	c.ok("checkout", "run_p", dir)
	assert.FileExists(t, filepath.Join(dir, "output", "main.md"))
	assert.NoDirExists(t, filepath.Join(dir, "scratch"))
	assert.NoDirExists(t, filepath.Join(dir, "host"))
	entries, err := os.ReadDir(proj)
	require.NoError(t, err)
	assert.Len(t, entries, 2, "go.mod and the note the run wrote; checkout added nothing")
}
