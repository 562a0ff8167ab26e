package journal

import (
	"context"
	"fmt"

	"github.com/wsstore/wsstore/index"
)

// EachRunEvents calls fn, in tx, with every run id the journal holds
// events of and how many it holds, ordered by run id. Fsck checks that each
// such run exists; the journal does not know runs. The error is fn's or a
// failed read.
func (j *Journal) EachRunEvents(ctx context.Context, tx *index.Tx, fn func(runID string, events int64) error) error {
	rows, err := tx.QueryxContext(ctx, `SELECT run_id, count(*) FROM events GROUP BY run_id ORDER BY run_id`)
	if err != nil {
		return fmt.Errorf("read event counts: %w", index.Translate(err))
	}
	defer rows.Close()
	for rows.Next() {
		var runID string
		var n int64
		if err := rows.Scan(&runID, &n); err != nil {
			return fmt.Errorf("read event counts: %w", index.Translate(err))
		}
		if err := fn(runID, n); err != nil {
			return err
		}
	}
	return index.Translate(rows.Err())
}

// VerifyPayloads decodes, in tx, the payload of every event and calls bad
// with the run, seq and what is wrong for each one that does not decode to
// a JSON object, so fsck finds what Page and Export would fail on. It
// reads one row at a time and returns how many events it checked; the
// error is bad's or a failed read.
func (j *Journal) VerifyPayloads(ctx context.Context, tx *index.Tx, bad func(runID string, seq int64, detail string) error) (int, error) {
	rows, err := tx.QueryxContext(ctx, `SELECT run_id, seq, payload FROM events`)
	if err != nil {
		return 0, fmt.Errorf("read events: %w", index.Translate(err))
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.RunID, &r.Seq, &r.Payload); err != nil {
			return n, fmt.Errorf("read events: %w", index.Translate(err))
		}
		n++
		if _, err := decodeEventPayload(r.Payload); err != nil {
			if err := bad(r.RunID, r.Seq, err.Error()); err != nil {
				return n, err
			}
		}
	}
	return n, index.Translate(rows.Err())
}
