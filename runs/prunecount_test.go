package runs_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/wserr"
)

// TestPruneHandsTheReclaimCommittedEntries: the deletion-log entries a
// prune pass hands its reclaim are the ones its transactions committed.
// A pass whose write is refused once its transaction has made the entry
// (the store's clock reads a time a store cannot hold, which fails the
// transaction as it is about to commit) names and counts none; the pass
// after, with the clock set right, names and counts the one it logged.
// Both the deletion of a run and the pruning of a run's checkpoints.
func TestPruneHandsTheReclaimCommittedEntries(t *testing.T) {
	zero, limit := 0, int64(1000)
	tests := []struct {
		name   string
		policy runs.Policy
		seed   func(e *lifecycleEnv)
	}{
		{"RunDeleted", runs.Policy{KeepFailedRuns: &zero}, func(e *lifecycleEnv) {
			r := e.create("failed", runs.CreateRequest{})
			e.write(r.ID, "output/main.md", "failed")
			require.NoError(t, e.svc.SetStatus(e.ctx, r.ID, runs.Failed, "model error"))
		}},
		{"CheckpointsPruned", runs.Policy{MaxCheckpointBytesPerRun: &limit}, func(e *lifecycleEnv) {
			r := e.create("busy", runs.CreateRequest{})
			for j := range 6 {
				e.write(r.ID, "output/main.md", fmt.Sprint(j, string(make([]byte, 600))))
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newLifecycleEnv(t)
			tt.seed(e)
			require.NoError(t, e.svc.SetPolicy(e.ctx, runs.StoreScope, tt.policy))
			logIDs := func() []int64 {
				ds, _, err := e.svc.Deletions(e.ctx, 0, 0)
				require.NoError(t, err)
				var ids []int64
				for _, d := range ds {
					ids = append(ids, d.ID)
				}
				return ids
			}

			now := e.clock.Now()
			e.clock.Set(time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC))
			ids, logged, err := runs.PrunePass(e.ctx, e.svc, runs.PruneOptions{})
			require.True(t, wserr.Is(err, wserr.InvalidOptions), "%v", err)
			assert.Empty(t, logIDs(), "nothing was logged")
			assert.Zero(t, logged, "nor counted")
			assert.Empty(t, ids, "nor named")

			e.clock.Set(now)
			ids, logged, err = runs.PrunePass(e.ctx, e.svc, runs.PruneOptions{})
			require.NoError(t, err)
			require.Len(t, logIDs(), 1)
			assert.Equal(t, 1, logged)
			assert.Equal(t, logIDs(), ids)
		})
	}
}
