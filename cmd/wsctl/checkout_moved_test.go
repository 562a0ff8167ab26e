package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

// TestCheckoutBesideAChangeOfItsTrees: the live run changes while its
// trees are walked, and a gc without grace collects the directory the
// walk has yet to read (the checkout's tree cache no longer holding it):
// that is the run moving on, store.conflict (exit 5) as a file changed
// meanwhile is, not store.corrupt, and the directory is left empty.
func TestCheckoutBesideAChangeOfItsTrees(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 20,000 files")
	}
	ctx := context.Background()
	c := newCLI(t)
	st := c.open()
	off := false
	_, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "moved"}, RunID: "moved",
		Profile: &runs.Profile{AutoCheckpoint: &off}})
	require.NoError(t, err)
	// More entries than the tree cache keeps, so the last directory is
	// read from its row again by the walk that writes the files.
	const dirs, per = 200, 100
	edits := make([]runs.Edit, 0, dirs*per)
	for i := range dirs * per {
		edits = append(edits, runs.Edit{Path: vfs.MustPath(fmt.Sprintf("output/d%03d/f%05d.md", i/per, i)), Content: []byte("x")})
	}
	_, err = st.Runs.Workspace("moved", runs.HostScope).Apply(ctx, edits)
	require.NoError(t, err)
	a := c.app()
	a.wrapBlobs = func(g blobGetter) blobGetter {
		return &changeFirst{blobGetter: g, change: func() {
			// The last directory removed: its tree is no other's base.
			gone := make([]runs.Edit, 0, per)
			for i := (dirs - 1) * per; i < dirs*per; i++ {
				gone = append(gone, runs.Edit{Path: vfs.MustPath(fmt.Sprintf("output/d%03d/f%05d.md", i/per, i)), Remove: true})
			}
			_, err := st.Runs.Workspace("moved", runs.HostScope).Apply(ctx, gone)
			require.NoError(t, err)
			_, err = st.GC(ctx, wsstore.GCOptions{Grace: -1})
			require.NoError(t, err)
		}}
	}
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	code := execute(ctx, a, []string{"--store", c.store, "checkout", "moved", dir}, strings.NewReader(""), &out, &errOut)
	assert.Equal(t, 5, code, errOut.String())
	assert.Contains(t, errOut.String(), "store.conflict: the run changed while it was being checked out")
	assert.NotContains(t, errOut.String(), "store.corrupt")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries)
}
