package runs_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/wserr"
)

// TestRollbackCommitJournalsOnlyASavedRollback follows seed 000 §10.2:
// the rolled-back message is saved first, and only then is the rollback
// journaled, with the commit's completion; a failed save journals the
// failure and no rollback.
func TestRollbackCommitJournalsOnlyASavedRollback(t *testing.T) {
	cases := []struct {
		name    string
		del     bool
		sinkErr error
		want    []journal.Type
	}{
		{"Replace", false, nil, []journal.Type{journal.ChatCommitRequested, journal.ChatCommitCompleted, journal.CommitRolledBack}},
		{"Delete", true, nil, []journal.Type{journal.ChatCommitRequested, journal.ChatCommitCompleted, journal.CommitRolledBack}},
		{"ErrSinkFailed", false, errors.New("save conflict"), []journal.Type{journal.ChatCommitRequested, journal.ChatCommitFailed}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newLifecycleEnv(t)
			r := e.create("c1", runs.CreateRequest{})
			e.write(r.ID, "output/main.md", "first draft")
			first, err := e.svc.Commit(e.ctx, r.ID, &recordingSink{}, runs.CommitOptions{})
			require.NoError(t, err)
			e.write(r.ID, "output/main.md", "second draft")
			_, err = e.svc.Commit(e.ctx, r.ID, &recordingSink{}, runs.CommitOptions{})
			require.NoError(t, err)
			seq, err := checkpointSeq(first.CheckpointID)
			require.NoError(t, err)
			before, err := e.st.Journal.Page(e.ctx, r.ID, journal.PageQuery{Limit: journal.MaxLimit})
			require.NoError(t, err)
			lastSeq := before[len(before)-1].Seq

			rec, err := e.svc.RollbackCommit(e.ctx, r.ID, seq, &recordingSink{err: tc.sinkErr}, tc.del)
			if tc.sinkErr != nil {
				requireHostError(t, err, wserr.SinkFailed)
				assert.Equal(t, runs.CommitFailed, rec.Status)
			} else {
				require.NoError(t, err)
				assert.Equal(t, runs.CommitCompleted, rec.Status)
			}

			evs, err := e.st.Journal.Page(e.ctx, r.ID, journal.PageQuery{AfterSeq: lastSeq})
			require.NoError(t, err)
			var types []journal.Type
			for _, ev := range evs {
				types = append(types, ev.Type)
				var p struct {
					CommitID string `json:"commitId"`
				}
				require.NoError(t, json.Unmarshal(ev.Payload, &p))
				assert.Equal(t, rec.ID, p.CommitID, "%s names the rollback commit", ev.Type)
			}
			assert.Equal(t, tc.want, types)
		})
	}
}
