package runs_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/wserr"
)

// TestChatDeletionIsBounded: deleting a chat of more runs than an answer
// names (three here) answers with its first three runs and first three
// cancelled runs, oldest first, and counts every one, in the same number
// of bytes for 20 runs as for 90; so does the chat's deletion-log entry,
// and each run past the first three has a run entry of its own before it,
// so the log names every run deleted.
func TestChatDeletionIsBounded(t *testing.T) {
	defer runs.SetChatDeletionRuns(3)()
	deleteChat := func(n int) (answer []byte, entry []byte, logged map[string]string) {
		e := newLifecycleEnv(t)
		key := runs.ChatKey{Kind: "character", StableChatID: "big"}
		for i := range n {
			r, err := e.svc.CreateRun(e.ctx, runs.CreateRequest{Chat: key, RunID: fmt.Sprintf("run_%03d", i)})
			require.NoError(t, err)
			if i%2 == 1 { // every other run ended, the others active
				require.NoError(t, e.svc.SetStatus(e.ctx, r.ID, runs.Failed, "model error"))
			}
		}
		_, err := e.svc.CreateRun(e.ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "other"}, RunID: "run_other"})
		require.NoError(t, err)
		before := e.count("deletions")
		_, err = e.svc.DeleteChats(e.ctx, []runs.ChatKey{key}, false)
		require.True(t, wserr.Is(err, wserr.ChatActiveRun), "%v", err)
		assert.Contains(t, err.Error(), "run_000", "the oldest active run is named")
		assert.Equal(t, before, e.count("deletions"), "a refused deletion logs nothing")
		assert.Equal(t, n+1, e.count("runs"), "a refused deletion deletes nothing")

		res, err := e.svc.DeleteChats(e.ctx, []runs.ChatKey{key}, true)
		require.NoError(t, err)
		require.Len(t, res.Chats, 1)
		d := res.Chats[0]
		assert.Equal(t, []string{"run_000", "run_001", "run_002"}, d.Runs, "the first runs, oldest first")
		assert.Equal(t, n, d.RunCount)
		assert.Equal(t, []string{"run_000", "run_002", "run_004"}, d.Cancelled)
		assert.Equal(t, n/2, d.CancelledCount)
		assert.Equal(t, 1, e.count("runs"), "every run of the chat is deleted")
		answer, err = json.Marshal(res)
		require.NoError(t, err)

		logged = map[string]string{}
		ds, more, err := e.svc.Deletions(e.ctx, 0, runs.MaxDeletionPage)
		require.NoError(t, err)
		require.False(t, more)
		for _, del := range ds {
			switch del.Kind {
			case runs.DeletedRun:
				require.Equal(t, d.WorkspaceID, del.ChatID)
				logged[del.RunID] = del.Reason
				require.Zero(t, entry, "run entries come before the chat's")
			case runs.DeletedChat:
				entry = del.Detail
				var det struct {
					Runs           []string `json:"runs"`
					RunCount       int      `json:"runCount"`
					Cancelled      []string `json:"cancelled"`
					CancelledCount int      `json:"cancelledCount"`
				}
				require.NoError(t, json.Unmarshal(del.Detail, &det))
				assert.Equal(t, d.Runs, det.Runs)
				assert.Equal(t, n, det.RunCount)
				assert.Equal(t, d.Cancelled, det.Cancelled)
				assert.Equal(t, n/2, det.CancelledCount)
				for _, r := range det.Runs {
					logged[r] = "named by the chat's entry"
				}
			}
		}
		return answer, entry, logged
	}
	smallAnswer, smallEntry, smallLogged := deleteChat(20)
	largeAnswer, largeEntry, largeLogged := deleteChat(90)
	t.Logf("answer: %d bytes for 20 runs, %d for 90; log entry: %d and %d bytes", len(smallAnswer), len(largeAnswer), len(smallEntry), len(largeEntry))
	assert.Equal(t, len(smallAnswer), len(largeAnswer), "the answer does not grow with the chat's runs")
	assert.Equal(t, len(smallEntry), len(largeEntry), "the log entry does not grow with the chat's runs")
	assert.Len(t, smallLogged, 20, "the log names every run")
	assert.Len(t, largeLogged, 90, "the log names every run")
	assert.Equal(t, "forced", largeLogged["run_010"], "a cancelled run's entry says forced")
	assert.Equal(t, "requested", largeLogged["run_011"])
}
