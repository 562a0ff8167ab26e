package protocol_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/protocol"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/wserr"
)

// failingReclaimer fails every reclaim after a deletion, as a busy store
// or a full disk would.
type failingReclaimer struct{}

func (failingReclaimer) CandidatesEnd(context.Context) (int64, error) { return 0, nil }

func (failingReclaimer) Reclaim(context.Context, int64) (int64, error) {
	return 0, wserr.New(wserr.Busy, "reclaim", "", "the store is busy")
}

// cancellingReclaimer is the host interrupting the request while the
// reclaim after its deletions runs.
type cancellingReclaimer struct{ cancel context.CancelFunc }

func (cancellingReclaimer) CandidatesEnd(context.Context) (int64, error) { return 0, nil }

func (r cancellingReclaimer) Reclaim(ctx context.Context, _ int64) (int64, error) {
	r.cancel()
	return 0, fmt.Errorf("reclaim: gc: %w", ctx.Err())
}

// TestPruneStandsWhenItsReclaimFails: prune deletes runs, each in a
// transaction of its own, then reclaims their space. A reclaim that fails
// there (a busy store, an interrupt) does not fail the op: the deletions
// have committed, and an error would say nothing was deleted (a host
// trying again would get an empty report and never learn what went). The
// answer is the pass's report with no bytes freed, and the failure is in
// the deletion log as a reclaim_failed entry naming its code.
func TestPruneStandsWhenItsReclaimFails(t *testing.T) {
	for _, tc := range []struct {
		name string
		code wserr.Code
		rec  func(context.CancelFunc) runs.Reclaimer
	}{
		{"Busy", wserr.Busy, func(context.CancelFunc) runs.Reclaimer { return failingReclaimer{} }},
		{"Interrupted", wserr.Canceled, func(cancel context.CancelFunc) runs.Reclaimer { return cancellingReclaimer{cancel} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := storetest.OpenStoreWith(t, wsstore.Options{Now: storetest.NewClock().Now})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			svc := runs.New(runs.Deps{DB: st.DB, Blobs: st.Blobs, Trees: st.Trees, Journal: st.Journal,
				Checkpoints: st.Checkpoints, Reclaim: tc.rec(cancel)}, runs.Options{})
			s := protocol.NewSession(protocol.Backend{Runs: svc, Journal: st.Journal, Retention: svc, Host: svc})
			ask := func(ctx context.Context, l string) (map[string]any, string) {
				t.Helper()
				var out struct {
					Result map[string]any `json:"result"`
					Error  *struct {
						Code string `json:"code"`
					} `json:"error"`
				}
				require.NoError(t, json.Unmarshal([]byte(line(t, s.Handle(ctx, []byte(l)))), &out))
				if out.Error != nil {
					return nil, out.Error.Code
				}
				return out.Result, ""
			}
			bg := context.Background()
			for i := range 3 {
				for _, l := range []string{
					fmt.Sprintf(`{"op":"run.create","chat":{"kind":"character","stableChatId":"c"},"runId":"r%d"}`, i),
					`{"op":"write","path":"output/main.md","content":"draft"}`,
					`{"op":"finish"}`,
				} {
					_, code := ask(bg, l)
					require.Empty(t, code, l)
				}
			}
			_, code := ask(bg, `{"op":"policy.set","policy":{"keepCompletedRuns":1}}`)
			require.Empty(t, code)

			rep, code := ask(ctx, `{"op":"prune"}`)
			require.Empty(t, code, "the runs are deleted: prune answers what it deleted")
			assert.EqualValues(t, 2, rep["runCount"])
			assert.EqualValues(t, 0, rep["bytesFreed"])
			var deleted []string
			for _, r := range rep["runs"].([]any) {
				deleted = append(deleted, r.(map[string]any)["runId"].(string))
			}
			assert.Equal(t, []string{"r0", "r1"}, deleted)

			page, _, err := svc.Deletions(bg, 0, 0)
			require.NoError(t, err)
			require.Len(t, page, 3)
			last := page[2]
			assert.Equal(t, runs.ReclaimFailed, last.Kind)
			var detail struct {
				Deletions []int64 `json:"deletions"`
				Code      string  `json:"code"`
			}
			require.NoError(t, json.Unmarshal(last.Detail, &detail))
			assert.Equal(t, string(tc.code), detail.Code)
			assert.Equal(t, []int64{page[0].ID, page[1].ID}, detail.Deletions, "it names the deletions it followed")

			again, code := ask(bg, `{"op":"prune"}`)
			require.Empty(t, code)
			assert.EqualValues(t, 0, again["runCount"], "a second pass finds nothing more to delete")
		})
	}
}
