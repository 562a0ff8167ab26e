package main

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

// damagedDiffStore makes a run whose output/a.md and output/b.md both
// change after cp_000003, then deletes the new content of output/b.md
// from the database, as a damaged store would have lost it. A diff from
// cp_000003 reads a.md (whole) before it reaches b.md (missing).
func damagedDiffStore(t *testing.T) *cli {
	t.Helper()
	c := newCLI(t)
	c.skipFsck = true
	st := c.open()
	ctx := context.Background()
	_, err := st.Runs.CreateRun(ctx, runs.CreateRequest{
		Chat:  runs.ChatKey{Kind: "character", StableChatID: "c1"},
		RunID: "r1",
	})
	require.NoError(t, err)
	ws := st.Runs.Workspace("r1", runs.ModelScope)
	var lost cas.Hash
	for _, w := range []struct{ path, content string }{
		{"output/a.md", "one\n"},
		{"output/b.md", "uno\n"},
		{"output/a.md", "two\n"},
		{"output/b.md", "dos, a content only this write has\n"},
	} {
		res, err := ws.Write(ctx, vfs.MustPath(w.path), []byte(w.content), vfs.WriteOptions{})
		require.NoError(t, err)
		lost = res.Hash
	}
	require.NoError(t, st.Close())
	db, err := sql.Open("sqlite", filepath.Join(c.store, "wsstore.db"))
	require.NoError(t, err)
	defer db.Close()
	res, err := db.Exec(`DELETE FROM blobs WHERE hash = ?`, lost[:])
	require.NoError(t, err)
	n, err := res.RowsAffected()
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "the blob of output/b.md's new content")
	return c
}

// TestDiffKeepsWhatItPrintedBeforeAFailure: a diff that fails partway
// (a damaged store) leaves on standard output the files it printed
// before the error, as its help says: the text of output/a.md, read
// whole before output/b.md's missing content ended the diff, was held
// back in a buffer and lost.
func TestDiffKeepsWhatItPrintedBeforeAFailure(t *testing.T) {
	c := damagedDiffStore(t)
	out, errOut, code := c.run("", "diff", "r1", "3")
	assert.NotZero(t, code, "stderr %s", errOut)
	assert.Contains(t, out, "--- a/output/a.md\n+++ b/output/a.md\n@@ -1 +1 @@\n-one\n+two\n")
	assert.NotContains(t, out, "output/b.md")
}

// TestDiffOfLostContentIsCorrupt: a diff that meets a file content lost
// from the store fails with store.corrupt (exit status 6), as cat,
// checkout and export do on the same store, not with store.not_found
// (exit status 3), which says the user named something that is not
// there.
func TestDiffOfLostContentIsCorrupt(t *testing.T) {
	c := damagedDiffStore(t)
	for _, args := range [][]string{
		{"diff", "r1", "3"},
		{"diff", "r1", "3", "HEAD"},
		{"diff", "r1", "3", "--json"},
		{"cat", "r1", "output/b.md"},
	} {
		errOut := c.fails(6, args...)
		assert.Contains(t, errOut, "store.corrupt", "%v", args)
	}
}
