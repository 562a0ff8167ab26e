package checkpoint

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

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

// exportPage is how many checkpoint rows EachExportRecord reads at a time.
const exportPage = 512

// EachExportRecord calls fn with each of runID's checkpoint rows in tx,
// ordered by seq, reading a page of them at a time: what it holds does not
// grow with the run's checkpoints. fn's error stops it and is returned.
func (s *Store) EachExportRecord(ctx context.Context, tx *index.Tx, runID string, fn func(Record) error) error {
	var page []Record
	for after := int64(0); ; {
		page = page[:0]
		err := tx.SelectContext(ctx, &page, `SELECT `+recordCols+` FROM checkpoints WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?`, runID, after, exportPage)
		if err != nil {
			return fmt.Errorf("export checkpoints %s: %w", runID, index.Translate(err))
		}
		for _, r := range page {
			if err := fn(r); err != nil {
				return err
			}
		}
		if len(page) < exportPage {
			return nil
		}
		after = page[len(page)-1].Seq
	}
}

// ImportRecord writes r in tx, for a run the import has just added. A
// row that does not insert (a seq the run has already) fails with
// store.corrupt: an archive holds each checkpoint once.
func (s *Store) ImportRecord(ctx context.Context, tx *index.Tx, r Record) error {
	if r.Seq < 1 {
		return wserr.New(wserr.Corrupt, "import checkpoint", "", "run %s: checkpoint seq %d", r.RunID, r.Seq)
	}
	// A checkpoint's parent is an earlier checkpoint of the run, imported
	// before it, or none (0).
	if r.ParentSeq < 0 || r.ParentSeq >= r.Seq {
		return wserr.New(wserr.Corrupt, "import checkpoint", "", "run %s seq %d: parent %d is not an earlier checkpoint", r.RunID, r.Seq, r.ParentSeq)
	}
	if r.ParentSeq > 0 {
		var ok bool
		if err := tx.GetContext(ctx, &ok, `SELECT EXISTS (SELECT 1 FROM checkpoints WHERE run_id = ? AND seq = ?)`, r.RunID, r.ParentSeq); err != nil {
			return fmt.Errorf("import checkpoint %s: %w", r.RunID, index.Translate(err))
		}
		if !ok {
			return wserr.New(wserr.Corrupt, "import checkpoint", "", "run %s seq %d: parent %d is not a checkpoint of the run", r.RunID, r.Seq, r.ParentSeq)
		}
	}
	_, err := tx.NamedExecContext(ctx, `INSERT INTO checkpoints (`+recordCols+`) VALUES (:run_id, :seq, :root,
		:parent_seq, :reason, :event_seq, :created_at, :dead_bytes, :cum_dead)`, r)
	if err != nil {
		return index.TranslateRow("import checkpoint", fmt.Sprintf("run %s seq %d", r.RunID, r.Seq), err)
	}
	return nil
}

// DeleteRecords deletes the checkpoints seqs of runID in tx, as a prune
// does (oldest first, each one's children taking its parent, its root a
// candidate for collection), for a sync bringing forward a run whose
// writer pruned them. A seq the run does not hold is skipped; no event is
// appended (the writer's checkpoints_pruned event comes with the run).
func (s *Store) DeleteRecords(ctx context.Context, tx *index.Tx, runID string, seqs []int64) error {
	for _, seq := range slices.Sorted(slices.Values(seqs)) {
		var parent int64
		err := tx.GetContext(ctx, &parent, `SELECT parent_seq FROM checkpoints WHERE run_id = ? AND seq = ?`, runID, seq)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return fmt.Errorf("delete checkpoints %s: %w", runID, index.Translate(err))
		}
		if err := s.deleteRow(ctx, tx, runID, seq); err != nil {
			return fmt.Errorf("delete checkpoints %s: %w", runID, err)
		}
		if _, err := tx.ExecContext(ctx, relinkSQL, parent, runID, seq); err != nil {
			return fmt.Errorf("delete checkpoints %s: %w", runID, index.Translate(err))
		}
	}
	return nil
}
