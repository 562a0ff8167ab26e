package journal

import (
	"context"
	"fmt"
	"slices"

	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/wserr"
)

// Page sizes.
const (
	// DefaultLimit is the page size when PageQuery.Limit is 0.
	DefaultLimit = 100
	// MaxLimit is the largest page Page returns.
	MaxLimit = 500
	// MaxPageBytes bounds the payloads of one page: a page ends at the
	// event that takes them to it, so a page of large events (tool
	// results holding whole files, say) holds a few of them, not Limit.
	// An event of any size comes alone.
	MaxPageBytes = 4 << 20
)

// PageQuery selects a page of a run's events by seq. Both bounds are
// exclusive and 0 means unset.
//
//   - Neither or AfterSeq only: the Limit events from AfterSeq+1 upward.
//   - BeforeSeq only: the Limit events just before BeforeSeq, the page a
//     timeline shows when it scrolls back from BeforeSeq. With
//     BeforeSeq = Last()+1 it is the newest page.
//   - Both: the Limit events from AfterSeq+1 upward that are below
//     BeforeSeq.
//
// Because 0 means unset, {AfterSeq: 0, BeforeSeq: b} is the page just
// before b, not the first page of the range below b; to walk a range from
// the start, page with AfterSeq alone and stop at b.
//
// Every page is returned in ascending seq order. A page holds fewer than
// Limit events when their payloads reach MaxPageBytes first, so a short
// page is not the end: the end is an empty page (or HasEvents).
type PageQuery struct {
	AfterSeq  int64 // exclusive lower bound; 0 = from the start
	BeforeSeq int64 // exclusive upper bound; 0 = no upper bound
	Limit     int   // 1..MaxLimit; 0 = DefaultLimit
}

func (q PageQuery) normalize() (PageQuery, error) {
	const op = "journal page"
	if q.AfterSeq < 0 || q.BeforeSeq < 0 {
		return q, wserr.New(wserr.InvalidArgument, op, "", "seq bounds must not be negative (after %d, before %d)", q.AfterSeq, q.BeforeSeq)
	}
	if q.Limit == 0 {
		q.Limit = DefaultLimit
	}
	if q.Limit < 1 || q.Limit > MaxLimit {
		return q, wserr.New(wserr.InvalidArgument, op, "", "limit %d is not in 1..%d", q.Limit, MaxLimit)
	}
	return q, nil
}

// Page returns the events of runID that q selects, in ascending seq order;
// an empty, non-nil slice when there are none. It reads the last committed
// state. An empty runID, a negative bound or a Limit outside 0..MaxLimit
// fails with workspace.invalid_argument; a stored payload that does not
// decode, with store.corrupt naming its run and seq.
func (j *Journal) Page(ctx context.Context, runID string, q PageQuery) ([]Event, error) {
	if runID == "" {
		return nil, wserr.New(wserr.InvalidArgument, "journal page", "", "empty run id")
	}
	q, err := q.normalize()
	if err != nil {
		return nil, err
	}
	var rows []row
	err = j.db.View(ctx, func(tx *index.Tx) error {
		return index.Translate(selectPage(ctx, tx, runID, q, &rows))
	})
	if err != nil {
		return nil, fmt.Errorf("journal page %s: %w", runID, err)
	}
	events := make([]Event, len(rows))
	for i, r := range rows {
		if events[i], err = r.event("journal page"); err != nil {
			return nil, err
		}
	}
	return events, nil
}

// selectPage runs the one range scan of the primary key that q needs,
// reading rows until Limit of them or MaxPageBytes of their payloads.
func selectPage(ctx context.Context, tx *index.Tx, runID string, q PageQuery, rows *[]row) error {
	const cols = `run_id, seq, type, level, at, payload`
	switch {
	case q.BeforeSeq == 0:
		return readPage(ctx, tx, rows, `SELECT `+cols+` FROM events
			WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?`, runID, q.AfterSeq, q.Limit)
	case q.AfterSeq == 0:
		// Walk down from BeforeSeq so the page costs Limit rows however
		// far back it is, then hand it out oldest first.
		err := readPage(ctx, tx, rows, `SELECT `+cols+` FROM events
			WHERE run_id = ? AND seq < ? ORDER BY seq DESC LIMIT ?`, runID, q.BeforeSeq, q.Limit)
		slices.Reverse(*rows)
		return err
	default:
		return readPage(ctx, tx, rows, `SELECT `+cols+` FROM events
			WHERE run_id = ? AND seq > ? AND seq < ? ORDER BY seq LIMIT ?`, runID, q.AfterSeq, q.BeforeSeq, q.Limit)
	}
}

// readPage appends the rows query selects to rows, stopping after the one
// that takes their payloads to MaxPageBytes.
func readPage(ctx context.Context, tx *index.Tx, rows *[]row, query string, args ...any) error {
	rs, err := tx.QueryxContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rs.Close()
	bytes := 0
	for bytes < MaxPageBytes && rs.Next() {
		var r row
		if err := rs.StructScan(&r); err != nil {
			return err
		}
		*rows = append(*rows, r)
		bytes += len(r.Payload)
	}
	if err := rs.Err(); err != nil {
		return err
	}
	return rs.Close()
}

// HasEvents reports whether runID has events after seq after and, when
// before is not 0, below seq before: whether a page that ended at after
// has more to follow. It reads no payload.
func (j *Journal) HasEvents(ctx context.Context, runID string, after, before int64) (bool, error) {
	var more bool
	err := j.db.View(ctx, func(tx *index.Tx) error {
		return tx.GetContext(ctx, &more, `SELECT EXISTS (SELECT 1 FROM events
			WHERE run_id = ? AND seq > ? AND (? = 0 OR seq < ?))`, runID, after, before, before)
	})
	if err != nil {
		return false, fmt.Errorf("journal %s: %w", runID, index.Translate(err))
	}
	return more, nil
}
