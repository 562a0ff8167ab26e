package synctests_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

// TestSyncChatDeletedWhilePromotedElsewhere: a chat deleted on A while B
// promoted its persist/ layer (and kept no run of it) is a conflict, named
// on both devices, and B's layer is not lost; the runs the deletion named
// still go.
func TestSyncChatDeletedWhilePromotedElsewhere(t *testing.T) {
	_, open := fakeTier(t)
	ctx := context.Background()
	a, b := open(), open()
	smallRuns(t, a, "chat-m", "m", 1)
	syncOK(t, a)
	syncOK(t, b)
	chat := runs.ChatKey{Kind: "character", StableChatID: "chat-m"}
	chatID := runs.ChatWorkspaceID(chat)
	_, err := a.Runs.DeleteChats(ctx, []runs.ChatKey{chat}, true)
	require.NoError(t, err)
	require.NoError(t, promote(t, b, "chat-m", "memo", "B's memory\n"))
	_, err = b.Runs.CancelAndDeleteRun(ctx, "memo")
	require.NoError(t, err)

	syncOK(t, a)
	rb := syncOK(t, b)
	assert.Equal(t, []string{"chat " + chatID}, conflictNames(rb.Conflicts), "B names the conflict")
	assert.Contains(t, rb.Deleted, "run m-00", "the run the deletion named goes")
	ra := syncOK(t, a)
	assert.Equal(t, []string{"chat " + chatID}, conflictNames(ra.Conflicts), "A names it too as B's layer comes back")
	for name, st := range map[string]*wsstore.Store{"A": a, "B": b} {
		assert.Empty(t, runIDs(t, st), name)
		require.NoError(t, st.DB.View(ctx, func(tx *index.Tx) error {
			c, err := st.Runs.ExportChat(ctx, tx, chatID)
			require.NoError(t, err, "%s keeps the chat", name)
			assert.EqualValues(t, 1, c.PersistVersion, name)
			return nil
		}))
	}
	// A new run of the chat on A reads B's memory.
	_, err = a.Runs.CreateRun(ctx, runs.CreateRequest{Chat: chat, RunID: "next"})
	require.NoError(t, err)
	f, err := a.Runs.Workspace("next", runs.ModelScope).Read(ctx, vfs.MustPath("persist/notes.md"), vfs.ReadOptions{})
	require.NoError(t, err)
	assert.Equal(t, "B's memory\n", string(f.Content))

	// A deletion made after the conflict deletes the chat everywhere.
	_, err = b.Runs.DeleteChats(ctx, []runs.ChatKey{chat}, true)
	require.NoError(t, err)
	_, err = a.Runs.CancelAndDeleteRun(ctx, "next")
	require.NoError(t, err)
	syncOK(t, b)
	ra = syncOK(t, a)
	assert.Empty(t, ra.Conflicts)
	syncOK(t, b)
	c := open()
	syncOK(t, c) // a bystander may name the conflict (docs/limits.md)
	for name, st := range map[string]*wsstore.Store{"A": a, "B": b, "C": c} {
		require.NoError(t, st.DB.View(ctx, func(tx *index.Tx) error {
			_, err := st.Runs.ExportChat(ctx, tx, chatID)
			assert.Error(t, err, "%s: the chat is gone", name)
			return nil
		}))
	}
}
