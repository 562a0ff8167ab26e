package checkpoint_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/checkpoint"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// capEnv is a checkpoint store on a fresh database with a fixed clock.
type capEnv struct {
	t   *testing.T
	ctx context.Context
	db  *index.DB
	j   *journal.Journal
	cps *checkpoint.Store
}

func newCapEnv(t *testing.T) *capEnv {
	t.Helper()
	now := func() time.Time { return time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC) }
	db, blobs := storetest.OpenCAS(t, cas.Options{Now: now})
	j := journal.New(db, now)
	return &capEnv{t: t, ctx: context.Background(), db: db, j: j,
		cps: checkpoint.New(db, vfs.NewTrees(db, blobs, now), blobs, j, now)}
}

// take creates n checkpoints of the run, all of the empty tree.
func (e *capEnv) take(runID string, n int) {
	e.t.Helper()
	require.NoError(e.t, e.db.Update(e.ctx, func(tx *index.Tx) error {
		for range n {
			if _, err := e.cps.Create(e.ctx, tx, runID, vfs.EmptyTree, 0, "step"); err != nil {
				return err
			}
		}
		return nil
	}))
}

func (e *capEnv) seqs(runID string) []int64 {
	e.t.Helper()
	cps, err := e.cps.List(e.ctx, runID)
	require.NoError(e.t, err)
	out := []int64{}
	for _, c := range cps {
		out = append(out, c.Seq)
	}
	return out
}

func pins(seqs ...int64) checkpoint.Pinned {
	return func(context.Context, *index.Tx, string) ([]int64, error) { return seqs, nil }
}

func TestPrune(t *testing.T) {
	cases := []struct {
		name   string
		taken  int
		limit  int
		pinned []int64
		pruned []int64 // nil: nothing pruned
		left   []int64
	}{
		{"OKNoCap", 5, 0, nil, nil, []int64{1, 2, 3, 4, 5}},
		{"OKUnderCap", 4, 5, nil, nil, []int64{1, 2, 3, 4}},
		{"OKAtCap", 5, 5, nil, nil, []int64{1, 2, 3, 4, 5}},
		{"OKOneOver", 4, 3, nil, []int64{1}, []int64{2, 3, 4}},
		{"OKManyOver", 6, 2, nil, []int64{1, 2, 3, 4}, []int64{5, 6}},
		{"OKSkipsPins", 5, 3, []int64{1, 3}, []int64{2, 4}, []int64{1, 3, 5}},
		{"OKIgnoresMissingPins", 4, 3, []int64{99}, []int64{1}, []int64{2, 3, 4}},
		{"OKPinsAboveCap", 4, 1, []int64{1, 2}, []int64{3}, []int64{1, 2, 4}},
		{"OKAllPinned", 3, 1, []int64{1, 2}, nil, []int64{1, 2, 3}},
		{"OKNewestIsKept", 2, 1, []int64{1}, nil, []int64{1, 2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newCapEnv(t)
			e.take("run_a", tc.taken)
			e.take("run_b", 3)
			var pruned []int64
			var events int
			require.NoError(t, e.db.Update(e.ctx, func(tx *index.Tx) error {
				before, err := e.j.Last(e.ctx, tx, "run_a")
				if err != nil {
					return err
				}
				if pruned, err = e.cps.Prune(e.ctx, tx, "run_a", tc.limit, int64(tc.taken), pins(tc.pinned...)); err != nil {
					return err
				}
				after, err := e.j.Last(e.ctx, tx, "run_a")
				events = int(after - before)
				return err
			}))
			assert.Equal(t, tc.pruned, pruned)
			assert.Equal(t, tc.left, e.seqs("run_a"))
			assert.Equal(t, []int64{1, 2, 3}, e.seqs("run_b"), "another run is not touched")
			assert.Zero(t, events, "the caller records the prune (runs: its checkpoints_pruned event)")
		})
	}

	t.Run("ErrNegativeCap", func(t *testing.T) {
		e := newCapEnv(t)
		e.take("run_a", 2)
		err := e.db.Update(e.ctx, func(tx *index.Tx) error {
			_, err := e.cps.Prune(e.ctx, tx, "run_a", -1, 2, nil)
			return err
		})
		assert.Equal(t, wserr.InvalidArgument, wserr.CodeOf(err))
		assert.Equal(t, []int64{1, 2}, e.seqs("run_a"))
	})

	t.Run("OKPinsAskedOnlyOverCap", func(t *testing.T) {
		e := newCapEnv(t)
		e.take("run_a", 3)
		asked := 0
		count := func(context.Context, *index.Tx, string) ([]int64, error) { asked++; return nil, nil }
		require.NoError(t, e.db.Update(e.ctx, func(tx *index.Tx) error {
			_, err := e.cps.Prune(e.ctx, tx, "run_a", 3, 3, count)
			return err
		}))
		assert.Zero(t, asked)
	})

	t.Run("OKSeqsAreNotReused", func(t *testing.T) {
		e := newCapEnv(t)
		e.take("run_a", 3)
		require.NoError(t, e.db.Update(e.ctx, func(tx *index.Tx) error {
			_, err := e.cps.Prune(e.ctx, tx, "run_a", 1, 3, nil)
			return err
		}))
		e.take("run_a", 1)
		assert.Equal(t, []int64{3, 4}, e.seqs("run_a"))
	})
}

// TestPruneQueriesUseThePrimaryKey: every statement Prune runs searches
// the checkpoints table by its primary key (run_id, seq), in key order, so
// it reads only the run's rows, and the oldest first, never the table.
func TestPruneQueriesUseThePrimaryKey(t *testing.T) {
	e := newCapEnv(t)
	e.take("run_a", 5)
	e.take("run_b", 5)
	args := map[string][]any{"count": {"run_a"}, "rows": {"run_a"}, "delete": {"run_a", 1}, "relink": {0, "run_a", 1}}
	for name, q := range checkpoint.PruneQueries {
		t.Run(name, func(t *testing.T) {
			plan := storetest.QueryPlan(t, e.db, q, args[name]...)
			require.NotEmpty(t, plan)
			for _, d := range plan {
				switch name {
				case "relink":
					assert.Contains(t, d, "USING INDEX checkpoints_parent (run_id=? AND parent_seq=?)", "%s", q)
				case "count":
					assert.Regexp(t, `USING (PRIMARY KEY|COVERING INDEX checkpoints_parent) \(run_id=\?`, d, "%s", q)
				default:
					assert.Contains(t, d, "USING PRIMARY KEY (run_id=?", "%s", q)
				}
				assert.False(t, strings.HasPrefix(d, "SCAN"), "%s: %s", q, d)
				assert.NotContains(t, d, "TEMP B-TREE", "%s sorts in key order", q)
			}
		})
	}
}

// TestPruneBytesQueriesUseTheKeys: every statement of the byte cap, in
// PruneBytes and in Create's measure, searches the checkpoints table by
// the primary key or, for handing a deleted row's parent to its children,
// by the (run_id, parent_seq) index: it reads the rows it names, never the
// run's history, which the byte cap does not bound.
func TestPruneBytesQueriesUseTheKeys(t *testing.T) {
	e := newCapEnv(t)
	e.take("run_a", 5)
	e.take("run_b", 5)
	args := map[string][]any{"newest": {"run_a"}, "oldest": {"run_a"}, "next": {"run_a", 1}, "last": {"run_a"},
		"delete": {"run_a", 1}, "relink": {0, "run_a", 1}}
	for name, q := range checkpoint.PruneBytesQueries {
		t.Run(name, func(t *testing.T) {
			details := storetest.QueryPlan(t, e.db, q, args[name]...)
			require.NotEmpty(t, details)
			for _, d := range details {
				if name == "relink" {
					assert.Contains(t, d, "USING INDEX checkpoints_parent (run_id=? AND parent_seq=?)", "%s", q)
				} else {
					assert.Contains(t, d, "USING PRIMARY KEY (run_id=?", "%s", q)
				}
				assert.False(t, strings.HasPrefix(d, "SCAN"), "%s: %s", q, d)
				assert.NotContains(t, d, "TEMP B-TREE", "%s sorts in key order", q)
			}
		})
	}
}
