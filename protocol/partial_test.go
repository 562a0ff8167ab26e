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

// partialAnswer is a failed response with what its steps did.
type partialAnswer struct {
	OK    bool `json:"ok"`
	Error struct {
		Code string `json:"code"`
	} `json:"error"`
	Partial json.RawMessage `json:"partial"`
}

func askPartial(t *testing.T, s *protocol.Session, l string) partialAnswer {
	t.Helper()
	var out partialAnswer
	require.NoError(t, json.Unmarshal([]byte(line(t, s.Handle(context.Background(), []byte(l)))), &out))
	return out
}

// objectRows counts the store's blob, chunk and tree rows together.
func objectRows(t *testing.T, st *wsstore.Store) int {
	n := storetest.ObjectRows(t, st)
	return n.Blobs + n.Chunks + n.Trees
}

// TestStepsFailingPartWayAnswerWhatCommitted: gc, reclaim, prune and
// actor.gc work in steps, each committed on its own; one that fails after
// some of them committed answers its error with "partial", what those
// steps did in the shape of its result, which matches what the store
// holds. One that fails before any did answers its error alone.
func TestStepsFailingPartWayAnswerWhatCommitted(t *testing.T) {
	t.Run("GC", func(t *testing.T) {
		st := storetest.OpenStore(t)
		storetest.DeletedRunGarbage(t, st, 800)
		before := objectRows(t, st)
		storetest.RefuseDeletesAfter(t, st.DB, 300, "blobs", "chunks", "trees")
		s := protocol.NewSession(protocol.Backend{Runs: st.Runs, Journal: st.Journal, Store: st})
		out := askPartial(t, s, `{"op":"gc","graceSeconds":0}`)
		assert.False(t, out.OK)
		assert.Equal(t, string(wserr.Internal), out.Error.Code)
		var rep wsstore.GCReport
		require.NoError(t, json.Unmarshal(out.Partial, &rep), "partial: %s", out.Partial)
		freed := rep.Freed.Blobs + rep.Freed.Chunks + rep.Freed.Trees
		assert.Positive(t, freed)
		assert.Equal(t, before-objectRows(t, st), freed, "partial counts the rows gone")
		assert.LessOrEqual(t, freed, 300, "the steps before the refused delete")
	})
	t.Run("Reclaim", func(t *testing.T) {
		st := storetest.OpenStoreWith(t, wsstore.Options{ReclaimGrace: -1})
		storetest.DeletedRunGarbage(t, st, 800)
		before := objectRows(t, st)
		storetest.RefuseDeletesAfter(t, st.DB, 300, "blobs", "chunks", "trees")
		s := protocol.NewSession(protocol.Backend{Runs: st.Runs, Journal: st.Journal, Store: st})
		out := askPartial(t, s, `{"op":"reclaim"}`)
		assert.False(t, out.OK)
		var rep wsstore.ReclaimReport
		require.NoError(t, json.Unmarshal(out.Partial, &rep), "partial: %s", out.Partial)
		freed := rep.GC.Freed.Blobs + rep.GC.Freed.Chunks + rep.GC.Freed.Trees
		assert.Positive(t, freed)
		assert.Equal(t, before-objectRows(t, st), freed, "partial counts the rows gone")
		assert.Positive(t, rep.FileBytesAfter)
	})
	t.Run("Prune", func(t *testing.T) {
		st := storetest.OpenStore(t)
		storetest.PrunableRuns(t, st, 5)
		storetest.RefuseDeletesAfter(t, st.DB, 2, "runs")
		s := protocol.NewSession(protocol.Backend{Runs: st.Runs, Journal: st.Journal, Retention: st.Runs})
		out := askPartial(t, s, `{"op":"prune"}`)
		assert.False(t, out.OK)
		var rep runs.PruneReport
		require.NoError(t, json.Unmarshal(out.Partial, &rep), "partial: %s", out.Partial)
		assert.Equal(t, 2, rep.RunCount)
		assert.Len(t, rep.Runs, 2)
		assert.Equal(t, 3, storetest.CountRows(t, st.DB, "runs"), "the two runs partial names are gone")

		dry := askPartial(t, s, `{"op":"prune","dryRun":true}`)
		assert.True(t, dry.OK, "a dry run deletes nothing and is not refused")
	})
	t.Run("ActorGC", func(t *testing.T) {
		st := storetest.OpenStore(t)
		ctx := context.Background()
		const n = 300 // past a page of 256 spaces
		storetest.ActorSpacesFailingLast(t, st, n)
		s := protocol.NewSession(protocol.Backend{Runs: st.Runs, Journal: st.Journal, Actors: st.Actors})
		out := askPartial(t, s, `{"op":"actor.gc"}`)
		assert.False(t, out.OK)
		var rep struct{ Actors, Pruned int }
		require.NoError(t, json.Unmarshal(out.Partial, &rep), "partial: %s", out.Partial)
		assert.Equal(t, 256, rep.Actors, "the first page of spaces")
		assert.Equal(t, 256, rep.Pruned)
		pruned := 0
		for i := range n {
			stats, err := st.Actors.Stats(ctx, fmt.Sprintf("a%03d", i))
			require.NoError(t, err)
			if stats.Versions == 1 {
				pruned++
			}
		}
		assert.Equal(t, rep.Actors, pruned, "partial counts the spaces pruned")
	})
	t.Run("NothingCommitted", func(t *testing.T) {
		st := storetest.OpenStore(t)
		storetest.DeletedRunGarbage(t, st, 800)
		storetest.RefuseDeletesAfter(t, st.DB, 0, "blobs", "chunks", "trees")
		s := protocol.NewSession(protocol.Backend{Runs: st.Runs, Journal: st.Journal, Store: st})
		out := askPartial(t, s, `{"op":"gc","graceSeconds":0}`)
		assert.False(t, out.OK)
		assert.Empty(t, out.Partial, "no step committed: the error alone")
	})
}

// busyAfterAStep is a store whose collections find it busy after a step
// that freed one blob.
type busyAfterAStep struct{ protocol.Maintenance }

func (busyAfterAStep) CollectSteps(context.Context, wsstore.GCStepOptions) (wsstore.GCReport, error) {
	return wsstore.GCReport{Freed: wsstore.ObjectCounts{Blobs: 1}, FreedBytes: 10},
		wserr.New(wserr.Busy, "gc", "", "another connection holds a lock on the store")
}

// TestBusyAfterAStepAnswersWhatCommitted: store.busy after a step keeps
// its code, and the answer says what the step freed.
func TestBusyAfterAStepAnswersWhatCommitted(t *testing.T) {
	s := protocol.NewSession(protocol.Backend{Store: busyAfterAStep{}})
	got := line(t, s.Handle(context.Background(), []byte(`{"op":"gc","id":7}`)))
	assert.JSONEq(t, `{"op":"gc","id":7,"ok":false,"error":{"code":"store.busy","message":"another connection holds a lock on the store"},
		"partial":{"dryRun":false,"reachable":{"blobs":0,"chunks":0,"trees":0},"freed":{"blobs":1,"chunks":0,"trees":0},"freedBytes":10,"keptYoung":{"blobs":0,"chunks":0,"trees":0}}}`, got)
}
