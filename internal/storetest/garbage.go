package storetest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

// DeletedRunGarbage makes run r of files files, in 40 directories, and
// deletes it, so that its blobs and trees are garbage: several steps'
// worth of a collection for a few hundred files.
func DeletedRunGarbage(tb testing.TB, st *wsstore.Store, files int) {
	tb.Helper()
	ctx := context.Background()
	_, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "c"}, RunID: "r"})
	require.NoError(tb, err)
	edits := make([]runs.Edit, files)
	for i := range edits {
		edits[i] = runs.Edit{Path: vfs.MustPath(fmt.Sprintf("output/d%02d/f%04d.md", i%40, i)), Content: fmt.Appendf(nil, "file %d\n", i)}
	}
	_, err = st.Runs.Workspace("r", runs.HostScope).Apply(ctx, edits)
	require.NoError(tb, err)
	_, err = st.Runs.CancelAndDeleteRun(ctx, "r")
	require.NoError(tb, err)
}

// ObjectRows counts the store's blob, chunk and tree rows, read from the
// last committed state.
func ObjectRows(tb testing.TB, st *wsstore.Store) wsstore.ObjectCounts {
	tb.Helper()
	return wsstore.ObjectCounts{Blobs: CountRows(tb, st.DB, "blobs"), Chunks: CountRows(tb, st.DB, "chunks"), Trees: CountRows(tb, st.DB, "trees")}
}

// PrunableRuns makes n finished runs, r0 to r(n-1), in one chat, under a
// store policy keeping the newest completed run only, so that a prune
// deletes the n-1 oldest.
func PrunableRuns(tb testing.TB, st *wsstore.Store, n int) {
	tb.Helper()
	ctx := context.Background()
	for i := range n {
		id := fmt.Sprintf("r%d", i)
		_, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "c"}, RunID: id})
		require.NoError(tb, err)
		_, err = st.Runs.Finish(ctx, id)
		require.NoError(tb, err)
	}
	keep := 1
	require.NoError(tb, st.Runs.SetPolicy(ctx, runs.StoreScope, runs.Policy{KeepCompletedRuns: &keep}))
}

// ActorSpacesFailingLast makes n actor spaces, a000 onwards, each with two
// versions of a.md, and makes the prune of the last one fail (an update of
// its changes refused, SQLite's own error), so that a collection of every
// space fails after the pages before it. The refusal is lifted when the
// test ends.
func ActorSpacesFailingLast(tb testing.TB, st *wsstore.Store, n int) {
	tb.Helper()
	ctx := context.Background()
	for i := range n {
		for _, v := range []string{"1", "2"} {
			_, err := st.Actors.Upload(ctx, fmt.Sprintf("a%03d", i), "a.md", strings.NewReader(v))
			require.NoError(tb, err)
		}
	}
	exec := func(q string) error {
		return st.DB.Update(ctx, func(tx *index.Tx) error {
			_, err := tx.ExecContext(ctx, q)
			return err
		})
	}
	require.NoError(tb, exec(fmt.Sprintf(`CREATE TRIGGER test_refuse_actor BEFORE UPDATE ON actor_changes WHEN old.actor = 'a%03d'
		BEGIN SELECT RAISE(ABORT, 'the test refuses this prune'); END`, n-1)))
	tb.Cleanup(func() { require.NoError(tb, exec(`DROP TRIGGER test_refuse_actor`)) })
}
