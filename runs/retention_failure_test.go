package runs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// failingReclaimer fails every reclaim, as a full disk would.
type failingReclaimer struct{}

func (failingReclaimer) CandidatesEnd(context.Context) (int64, error) { return 0, nil }

func (failingReclaimer) Reclaim(context.Context, int64) (int64, error) {
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

	ds, _, err := svc.Deletions(ctx, 0, 0)
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
	ds, _, err = svc.Deletions(ctx, 0, 0)
	require.NoError(t, err)
	require.Len(t, ds, 4)
	assert.Equal(t, runs.RetentionFailed, ds[3].Kind)
	assert.Equal(t, "run_3", ds[3].RunID)
	assert.Equal(t, run.ChatID, ds[3].ChatID)
	assert.Contains(t, string(ds[3].Detail), "disk full")
}

// cancellingReclaimer is the caller giving up during the collection
// (Ctrl-C while a deletion reclaims): it ends the caller's context and
// fails as the collection then would.
type cancellingReclaimer struct{ cancel context.CancelFunc }

func (cancellingReclaimer) CandidatesEnd(context.Context) (int64, error) { return 0, nil }

func (r cancellingReclaimer) Reclaim(ctx context.Context, _ int64) (int64, error) {
	r.cancel()
	return 0, fmt.Errorf("reclaim: gc: %w", ctx.Err())
}

// TestReclaimFailureAfterADeletionDoesNotFailIt: DeleteChats and DeleteRun
// commit the deletion, then reclaim; a reclaim that fails there, the
// caller's context ending during it included, does not fail the call (an
// error would say nothing was deleted): the deletion stands and the
// failure is logged as a reclaim_failed entry naming its code.
func TestReclaimFailureAfterADeletionDoesNotFailIt(t *testing.T) {
	on := true
	for _, tc := range []struct {
		name string
		code wserr.Code
		rec  func(cancel context.CancelFunc) runs.Reclaimer
	}{
		{"Failing", wserr.Internal, func(context.CancelFunc) runs.Reclaimer { return failingReclaimer{} }},
		{"Cancelled", wserr.Canceled, func(cancel context.CancelFunc) runs.Reclaimer { return cancellingReclaimer{cancel} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, _ := openStore(t, runs.Options{})
			bg := context.Background()
			for _, del := range []string{"chat", "run"} {
				ctx, cancel := context.WithCancel(bg)
				d := deps(st)
				d.Reclaim = tc.rec(cancel)
				svc := runs.New(d, runs.Options{AutoPrune: &on})
				chat := runs.ChatKey{Kind: "character", StableChatID: "c-" + del}
				cr, err := svc.CreateRun(bg, runs.CreateRequest{Chat: chat, RunID: "run-" + del})
				require.NoError(t, err)
				_, err = svc.Workspace(cr.ID, runs.ModelScope).Write(bg, vfs.MustPath("output/a.md"), []byte("a"), vfs.WriteOptions{})
				require.NoError(t, err)
				if del == "chat" {
					res, err := svc.DeleteChats(ctx, []runs.ChatKey{chat}, true)
					require.NoError(t, err)
					assert.Len(t, res.Chats, 1)
					assert.Zero(t, res.BytesFreed)
				} else {
					cancelled, err := svc.CancelAndDeleteRun(ctx, cr.ID)
					require.NoError(t, err)
					assert.True(t, cancelled)
				}
				_, err = svc.Run(bg, cr.ID)
				assert.True(t, wserr.Is(err, wserr.RunNotFound), "%s: %v", del, err)

				ds, _, err := svc.Deletions(bg, 0, 0)
				require.NoError(t, err)
				last := ds[len(ds)-1]
				assert.Equal(t, runs.ReclaimFailed, last.Kind, del)
				assert.Equal(t, cr.ChatID, last.ChatID, del)
				var detail struct {
					Deletions []int64 `json:"deletions"`
					Code      string  `json:"code"`
				}
				require.NoError(t, json.Unmarshal(last.Detail, &detail))
				assert.Equal(t, string(tc.code), detail.Code, del)
				assert.Equal(t, []int64{ds[len(ds)-2].ID}, detail.Deletions, "%s: names the deletion it followed", del)
			}
		})
	}
}

// TestAutoPruneFailureIsJournaledWhenTheContextEnded: the retention pass
// after a run's end fails because the caller's context ended during its
// reclaim; the run's end has committed, and the pass's failure is still
// journaled on the run.
func TestAutoPruneFailureIsJournaledWhenTheContextEnded(t *testing.T) {
	st, _ := openStore(t, runs.Options{})
	bg := context.Background()
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	on := true
	d := deps(st)
	d.Reclaim = cancellingReclaimer{cancel}
	svc := runs.New(d, runs.Options{AutoPrune: &on})
	chat := runs.ChatKey{Kind: "character", StableChatID: "c"}
	one := 1
	require.NoError(t, svc.SetPolicy(bg, runs.StoreScope, runs.Policy{KeepCompletedRuns: &one}))
	for _, id := range []string{"run_1", "run_2"} {
		_, err := svc.CreateRun(bg, runs.CreateRequest{Chat: chat, RunID: id})
		require.NoError(t, err)
	}
	_, err := svc.Finish(bg, "run_1")
	require.NoError(t, err)
	_, err = svc.Finish(ctx, "run_2")
	require.NoError(t, err, "the run completed; the failed pass does not fail Finish")
	evs, err := st.Journal.Page(bg, "run_2", journal.PageQuery{Limit: journal.MaxLimit})
	require.NoError(t, err)
	last := evs[len(evs)-1]
	require.Equal(t, journal.RetentionFailed, last.Type)
	var p map[string]string
	require.NoError(t, json.Unmarshal(last.Payload, &p))
	assert.Equal(t, string(wserr.Canceled), p["code"])
}

// freeingCancellingReclaimer frees bytes, and the caller gives up as it
// returns.
type freeingCancellingReclaimer struct{ cancel context.CancelFunc }

func (freeingCancellingReclaimer) CandidatesEnd(context.Context) (int64, error) { return 0, nil }

func (r freeingCancellingReclaimer) Reclaim(context.Context, int64) (int64, error) {
	r.cancel()
	return 4096, nil
}

// TestReclaimThatFreedIsLoggedWhenTheContextEnded: a reclaim after a
// deletion that freed bytes is logged as a reclaim with those bytes, even
// when the caller's context ended as it returned.
func TestReclaimThatFreedIsLoggedWhenTheContextEnded(t *testing.T) {
	st, _ := openStore(t, runs.Options{})
	bg := context.Background()
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	d := deps(st)
	d.Reclaim = freeingCancellingReclaimer{cancel}
	svc := runs.New(d, runs.Options{})
	chat := runs.ChatKey{Kind: "character", StableChatID: "c"}
	_, err := svc.CreateRun(bg, runs.CreateRequest{Chat: chat, RunID: "run_1"})
	require.NoError(t, err)
	res, err := svc.DeleteChats(ctx, []runs.ChatKey{chat}, true)
	require.NoError(t, err)
	assert.Equal(t, int64(4096), res.BytesFreed)
	ds, _, err := svc.Deletions(bg, 0, 0)
	require.NoError(t, err)
	last := ds[len(ds)-1]
	assert.Equal(t, runs.Reclaimed, last.Kind)
	assert.Equal(t, int64(4096), last.BytesFreed)
}
