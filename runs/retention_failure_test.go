package runs_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/wserr"
)

// failingReclaimer fails every reclaim, as a full disk would.
type failingReclaimer struct{}

func (failingReclaimer) Reclaim(context.Context) (int64, error) {
	return 0, wserr.New(wserr.Internal, "reclaim", "", "disk full")
}

// TestAutoPruneFailureIsJournaled: an automatic retention pass that fails
// after a run ends does not fail the call that ended it; the failure is a
// retention_failed warning on that run, and what the pass deleted before
// failing is deleted and logged. When the pass had deleted the run itself,
// the failure goes to the deletion log instead.
func TestAutoPruneFailureIsJournaled(t *testing.T) {
	st, _ := openStore(t, runs.Options{})
	on := true
	d := deps(st)
	d.Reclaim = failingReclaimer{}
	svc := runs.New(d, runs.Options{AutoPrune: &on})
	ctx := context.Background()
	chat := runs.ChatKey{Kind: "character", StableChatID: "c"}
	one := 1
	cr, err := svc.CreateRun(ctx, runs.CreateRequest{Chat: chat, RunID: "run_1"})
	require.NoError(t, err)
	require.NoError(t, svc.SetPolicy(ctx, runs.StoreScope, runs.Policy{KeepCompletedRuns: &one}))
	_, err = svc.Finish(ctx, cr.ID)
	require.NoError(t, err, "nothing to prune: the pass does not reclaim")

	_, err = svc.CreateRun(ctx, runs.CreateRequest{Chat: chat, RunID: "run_2"})
	require.NoError(t, err)
	_, err = svc.Finish(ctx, "run_2")
	require.NoError(t, err, "the run completed; the failed pass does not fail Finish")

	run, err := svc.Run(ctx, "run_2")
	require.NoError(t, err)
	assert.Equal(t, runs.Completed, run.Status)
	evs, err := st.Journal.Page(ctx, "run_2", journal.PageQuery{Limit: journal.MaxLimit})
	require.NoError(t, err)
	last := evs[len(evs)-1]
	assert.Equal(t, journal.RetentionFailed, last.Type)
	assert.Equal(t, journal.Warn, last.Level)
	var p map[string]string
	require.NoError(t, json.Unmarshal(last.Payload, &p))
	assert.Equal(t, string(wserr.Internal), p["code"])
	assert.Equal(t, run.ChatID, p["workspaceId"])
	assert.Contains(t, p["error"], "disk full")

	ds, err := svc.Deletions(ctx, 0, 0)
	require.NoError(t, err)
	require.Len(t, ds, 1, "run_1 was deleted and logged before the reclaim failed")
	assert.Equal(t, runs.DeletedRun, ds[0].Kind)
	assert.Equal(t, "run_1", ds[0].RunID)

	// keepCompletedRuns 0: the pass deletes the very run that ended, then
	// fails; the deletion log names the failure.
	zero := 0
	require.NoError(t, svc.SetPolicy(ctx, runs.StoreScope, runs.Policy{KeepCompletedRuns: &zero}))
	_, err = svc.CreateRun(ctx, runs.CreateRequest{Chat: chat, RunID: "run_3"})
	require.NoError(t, err)
	_, err = svc.Finish(ctx, "run_3")
	require.NoError(t, err)
	ds, err = svc.Deletions(ctx, 0, 0)
	require.NoError(t, err)
	require.Len(t, ds, 4)
	assert.Equal(t, runs.RetentionFailed, ds[3].Kind)
	assert.Equal(t, "run_3", ds[3].RunID)
	assert.Equal(t, run.ChatID, ds[3].ChatID)
	assert.Contains(t, string(ds[3].Detail), "disk full")
}
