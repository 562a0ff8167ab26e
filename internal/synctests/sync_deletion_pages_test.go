package synctests_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/runs"
)

// TestSyncReadsDeletionsInPages: a sync reads the deletion log since the
// last one a page at a time: deletions of synced runs and a chat, spread
// over more than two pages of the log by other entries, each become a
// tombstone, and the other device deletes them all.
func TestSyncReadsDeletionsInPages(t *testing.T) {
	_, open := fakeTier(t)
	ctx := context.Background()
	a, b := open(), open()
	smallRuns(t, a, "chat-1", "r", 3)
	smallRuns(t, a, "chat-2", "q", 1)
	syncOK(t, a)
	syncOK(t, b)
	require.Equal(t, []string{"q-00", "r-00", "r-01", "r-02"}, runIDs(t, b))

	// Entries a sync makes no tombstone of, a page and more of them.
	filler := func(st *wsstore.Store) {
		require.NoError(t, st.DB.Update(ctx, func(tx *index.Tx) error {
			_, err := tx.ExecContext(ctx, `WITH RECURSIVE n (i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
				INSERT INTO deletions (at, kind, reason) SELECT n.i, 'reclaim', 'after deletions' FROM n`, runs.DefaultDeletionPage+200)
			return err
		}))
	}
	_, err := a.Runs.CancelAndDeleteRun(ctx, "r-00")
	require.NoError(t, err)
	filler(a)
	_, err = a.Runs.CancelAndDeleteRun(ctx, "r-01")
	require.NoError(t, err)
	filler(a)
	chat2 := runs.ChatKey{Kind: "character", StableChatID: "chat-2"}
	_, err = a.Runs.DeleteChats(ctx, []runs.ChatKey{chat2}, true)
	require.NoError(t, err)

	want := []string{"run r-00", "run r-01", "run q-00", "chat " + runs.ChatWorkspaceID(chat2)}
	assert.ElementsMatch(t, want, syncOK(t, a).Tombstones)
	assert.ElementsMatch(t, want, syncOK(t, b).Deleted)
	assert.Equal(t, []string{"r-02"}, runIDs(t, b))
	assert.Empty(t, syncOK(t, a).Tombstones, "the log is read from where the last sync ended")
}

// TestSyncTombstonesEveryRunOfALargeChat: a chat of more runs than its
// deletion-log entry names (runs.MaxChatDeletionRuns) has the others
// logged as run entries of their own: a sync makes a tombstone of every
// run and of the chat, and the other device deletes them all, with no
// conflict over runs the chat's tombstone did not name.
func TestSyncTombstonesEveryRunOfALargeChat(t *testing.T) {
	_, open := fakeTier(t)
	ctx := context.Background()
	a, b := open(), open()
	key := runs.ChatKey{Kind: "character", StableChatID: "large"}
	n := runs.MaxChatDeletionRuns + 2
	for i := range n {
		_, err := a.Runs.CreateRun(ctx, runs.CreateRequest{Chat: key, RunID: fmt.Sprintf("r-%04d", i)})
		require.NoError(t, err)
	}
	smallRuns(t, a, "other", "q", 1)
	syncOK(t, a)
	syncOK(t, b)
	require.Len(t, runIDs(t, b), n+1)

	res, err := a.Runs.DeleteChats(ctx, []runs.ChatKey{key}, true)
	require.NoError(t, err)
	require.Len(t, res.Chats[0].Runs, runs.MaxChatDeletionRuns)
	require.Equal(t, n, res.Chats[0].RunCount)
	assert.Equal(t, n+1, len(syncOK(t, a).Tombstones), "a tombstone of each run and of the chat")
	rep := syncOK(t, b)
	assert.Equal(t, n+1, len(rep.Deleted))
	assert.Empty(t, rep.Conflicts)
	assert.Equal(t, []string{"q-00"}, runIDs(t, b))
}
