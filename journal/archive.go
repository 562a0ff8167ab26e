package journal

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/wserr"
)

// ExportEvents calls fn, in tx, with every event of runID in ascending seq
// order, reading a page at a time (MaxLimit rows, MaxPageBytes of
// payloads) so memory stays bounded whatever the journal's length. An empty runID fails with
// workspace.invalid_argument, a stored payload that does not decode with
// store.corrupt; fn's error ends the walk and is returned.
func (j *Journal) ExportEvents(ctx context.Context, tx *index.Tx, runID string, fn func(Event) error) error {
	return j.ExportEventsAfter(ctx, tx, runID, 0, fn)
}

// ExportEventsAfter is ExportEvents for the events after seq after only:
// it reads those rows, not the journal before them.
func (j *Journal) ExportEventsAfter(ctx context.Context, tx *index.Tx, runID string, after int64, fn func(Event) error) error {
	if runID == "" {
		return wserr.New(wserr.InvalidArgument, "journal export events", "", "empty run id")
	}
	for {
		var rows []row
		if err := selectPage(ctx, tx, runID, PageQuery{AfterSeq: after, Limit: MaxLimit}, &rows); err != nil {
			return fmt.Errorf("journal export events %s: %w", runID, index.Translate(err))
		}
		for _, r := range rows {
			e, err := r.event("journal export events")
			if err != nil {
				return err
			}
			if err := fn(e); err != nil {
				return err
			}
			after = r.Seq
		}
		if len(rows) == 0 { // a page may end short at MaxPageBytes
			return nil
		}
	}
}

// EventAt returns event seq of runID in tx, and false when the run has no
// such event. It reads that one row. An empty runID fails with
// workspace.invalid_argument, a stored payload that does not decode with
// store.corrupt.
func (j *Journal) EventAt(ctx context.Context, tx *index.Tx, runID string, seq int64) (Event, bool, error) {
	if runID == "" {
		return Event{}, false, wserr.New(wserr.InvalidArgument, "journal event", "", "empty run id")
	}
	var rows []row
	if err := selectPage(ctx, tx, runID, PageQuery{AfterSeq: seq - 1, BeforeSeq: seq + 1, Limit: 1}, &rows); err != nil {
		return Event{}, false, fmt.Errorf("journal event %s %d: %w", runID, seq, index.Translate(err))
	}
	if len(rows) == 0 {
		return Event{}, false, nil
	}
	e, err := rows[0].event("journal event")
	return e, err == nil, err
}

// ImportEvent writes e in tx with its own seq and time, for a run an import
// has just added: the run's events arrive in order, so e.Seq must be the
// run's last seq plus one, which keeps seqs gapless. An event out of
// order, of an unknown type or level, or whose payload is not a JSON
// object fails with store.corrupt; the payload is stored packed, as
// Append stores it.
func (j *Journal) ImportEvent(ctx context.Context, tx *index.Tx, e Event) error {
	const op = "journal import event"
	if err := checkWriteTx(op, tx); err != nil {
		return err
	}
	if e.RunID == "" || !e.Type.Valid() || !e.Level.Valid() {
		return wserr.New(wserr.Corrupt, op, "", "run %q seq %d: invalid run id, type %q or level %q", e.RunID, e.Seq, e.Type, e.Level)
	}
	last, err := j.Last(ctx, tx, e.RunID)
	if err != nil {
		return err
	}
	if e.Seq != last+1 {
		return wserr.New(wserr.Corrupt, op, "", "run %s: event seq %d after %d", e.RunID, e.Seq, last)
	}
	body, err := marshalPayload(e.Payload)
	if err != nil || !json.Valid(e.Payload) {
		return wserr.New(wserr.Corrupt, op, "", "run %s seq %d: payload is not a JSON object", e.RunID, e.Seq)
	}
	var stored any = string(body)
	if p, packed := encodePayload(body); packed {
		stored = p
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO events (run_id, seq, type, level, at, payload) VALUES (?, ?, ?, ?, ?, ?)`,
		e.RunID, e.Seq, string(e.Type), string(e.Level), e.At.UnixNano(), stored)
	if err != nil {
		return fmt.Errorf("%s %s: %w", op, e.RunID, index.Translate(err))
	}
	return nil
}
