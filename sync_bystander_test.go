package wsstore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

// TestSyncBystanderKeepsWhatOutlivedADeletion: A deletes a run while B
// writes to it; both report the conflict and keep B's run. A device that
// took no part (C, which held the run as it was, and D, new) takes in
// A's deletion and B's later state in whichever order: the run stays, as
// on A and B, and neither reports a conflict that is not its own.
func TestSyncBystanderKeepsWhatOutlivedADeletion(t *testing.T) {
	_, open := fakeTier(t)
	ctx := context.Background()
	a, b, c := open(), open(), open()
	smallRuns(t, a, "chat-1", "r", 2)
	syncOK(t, a)
	syncOK(t, b)
	syncOK(t, c)

	_, err := a.Runs.CancelAndDeleteRun(ctx, "r-01")
	require.NoError(t, err)
	edit(t, b, "r-01", "late.md", "written on B while A deleted the run\n")
	syncOK(t, a)
	rb := syncOK(t, b)
	assert.Equal(t, []string{"run r-01"}, conflictNames(rb.Conflicts), "B's write against A's deletion")
	ra := syncOK(t, a)
	assert.Equal(t, []string{"run r-01"}, conflictNames(ra.Conflicts), "and A names it as B's write comes back")

	rc := syncOK(t, c)
	assert.Empty(t, rc.Conflicts, "C wrote nothing")
	assert.Equal(t, []string{"r-00", "r-01"}, runIDs(t, c))

	d := open()
	rd := syncOK(t, d)
	assert.Empty(t, rd.Conflicts, "D is new")
	assert.Equal(t, []string{"r-00", "r-01"}, runIDs(t, d))
	for _, st := range []*runs.Service{a.Runs, b.Runs, c.Runs, d.Runs} {
		f, err := st.Workspace("r-01", runs.ModelScope).Read(ctx, vfs.MustPath("output/late.md"), vfs.ReadOptions{})
		require.NoError(t, err)
		assert.Contains(t, string(f.Content), "written on B")
	}
	for range 2 {
		for _, st := range []*wsstore.Store{a, b, c, d} {
			assert.Empty(t, syncOK(t, st).Conflicts)
		}
	}

	// A chat deleted on A while B started a run in it: B and A name the
	// conflict and keep B's run; C and D keep it too, and name nothing.
	smallRuns(t, a, "chat-3", "s", 1)
	for _, st := range []*wsstore.Store{a, b, c, d} {
		syncOK(t, st)
	}
	chat3 := runs.ChatKey{Kind: "character", StableChatID: "chat-3"}
	_, err = a.Runs.DeleteChats(ctx, []runs.ChatKey{chat3}, true)
	require.NoError(t, err)
	smallRuns(t, b, "chat-3", "late", 1)
	syncOK(t, a)
	rb = syncOK(t, b)
	assert.Equal(t, []string{"chat " + runs.ChatWorkspaceID(chat3)}, conflictNames(rb.Conflicts))
	syncOK(t, a)
	for name, st := range map[string]*wsstore.Store{"C": c, "D": d, "E (new)": open()} {
		rep := syncOK(t, st)
		assert.Empty(t, rep.Conflicts, "%s took no part", name)
		assert.Contains(t, runIDs(t, st), "late-00", name)
		assert.NotContains(t, runIDs(t, st), "s-00", "%s: the run A deleted with the chat goes", name)
	}
}
