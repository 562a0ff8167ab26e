package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

// TestLsReadsPages: a listing longer than a page is read a page at a time
// and printed as one listing: the JSON is byte for byte the whole listing
// as one array, the table has one header and every entry.
func TestLsReadsPages(t *testing.T) {
	c := newCLI(t)
	ctx := context.Background()
	st := c.open()
	_, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "c"}, RunID: "r"})
	require.NoError(t, err)
	n := vfs.DefaultListLimit + 3
	edits := make([]runs.Edit, n)
	for i := range edits {
		edits[i] = runs.Edit{Path: vfs.MustPath(fmt.Sprintf("output/f%05d.md", i)), Content: fmt.Appendf(nil, "%d", i%7)}
	}
	_, err = st.Runs.Workspace("r", runs.ModelScope).Apply(ctx, edits)
	require.NoError(t, err)
	whole, err := st.Runs.Workspace("r", runs.HostScope).List(ctx, vfs.MustPath("output"), 1)
	require.NoError(t, err)
	require.Len(t, whole, n)
	var want bytes.Buffer
	require.NoError(t, writeJSON(&want, whole))
	require.NoError(t, st.Close())

	assert.Equal(t, want.String(), c.ok("ls", "r", "output", "--json"))
	table := c.ok("ls", "r", "output")
	lines := strings.Split(strings.TrimSuffix(table, "\n"), "\n")
	require.Len(t, lines, n+1)
	assert.True(t, strings.HasPrefix(lines[0], "KIND"))
	assert.Equal(t, 1, strings.Count(table, "KIND"), "one header")
	assert.True(t, strings.HasSuffix(lines[n], fmt.Sprintf("output/f%05d.md", n-1)))
	// and an empty listing is still one
	assert.Equal(t, "[]\n", c.ok("actor", "ls", "nobody", "--json"))
	assert.Equal(t, "KIND  SIZE  PATH\n", c.ok("actor", "ls", "nobody"))
}
