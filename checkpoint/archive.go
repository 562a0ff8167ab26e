package checkpoint

import (
	"context"
	"fmt"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/wserr"
)

// Record is a checkpoints row as an archive carries it: every column, the
// time in Unix nanoseconds, so an import writes back exactly what was read.
type Record struct {
	RunID     string   `json:"runId" db:"run_id"`
	Seq       int64    `json:"seq" db:"seq"`
	Root      cas.Hash `json:"root" db:"root"`
	ParentSeq int64    `json:"parentSeq" db:"parent_seq"`
	Reason    string   `json:"reason" db:"reason"`
	EventSeq  int64    `json:"eventSeq" db:"event_seq"`
	CreatedAt int64    `json:"createdAt" db:"created_at"`
	DeadBytes int64    `json:"deadBytes" db:"dead_bytes"`
	CumDead   int64    `json:"cumDead" db:"cum_dead"`
}

const recordCols = `run_id, seq, root, parent_seq, reason, event_seq, created_at, dead_bytes, cum_dead`

// ExportRecords returns runID's checkpoint rows in tx, ordered by seq.
func (s *Store) ExportRecords(ctx context.Context, tx *index.Tx, runID string) ([]Record, error) {
	var out []Record
	err := tx.SelectContext(ctx, &out, `SELECT `+recordCols+` FROM checkpoints WHERE run_id = ? ORDER BY seq`, runID)
	if err != nil {
		return nil, fmt.Errorf("export checkpoints %s: %w", runID, index.Translate(err))
	}
	return out, nil
}

// ImportRecord writes r in tx, for a run the import has just added. A
// row that does not insert (a seq the run has already) fails with
// store.corrupt: an archive holds each checkpoint once.
func (s *Store) ImportRecord(ctx context.Context, tx *index.Tx, r Record) error {
	if r.Seq < 1 {
		return wserr.New(wserr.Corrupt, "import checkpoint", "", "run %s: checkpoint seq %d", r.RunID, r.Seq)
	}
	_, err := tx.NamedExecContext(ctx, `INSERT INTO checkpoints (`+recordCols+`) VALUES (:run_id, :seq, :root,
		:parent_seq, :reason, :event_seq, :created_at, :dead_bytes, :cum_dead)`, r)
	if err != nil {
		return wserr.Wrap(wserr.Corrupt, "import checkpoint", "", fmt.Errorf("run %s seq %d: %w", r.RunID, r.Seq, index.Translate(err)))
	}
	return nil
}
