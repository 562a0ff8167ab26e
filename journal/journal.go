package journal

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/wserr"
)

// Journal appends and reads run events in an index.DB. It holds no state of
// its own beyond the clock, so it is safe for concurrent use; seqs stay
// gapless because every append runs on the store's single write connection.
type Journal struct {
	db  *index.DB
	now func() time.Time
}

// MaxPayloadBytes is the largest payload, as JSON, an event may hold: an
// archive row is at most 64 MiB, and an event's row holds its payload and
// its other fields, so an event past this could be journaled but never
// exported or synced.
const MaxPayloadBytes = 64<<20 - 64<<10

// New returns a journal over db. now is the clock events are stamped with;
// nil means time.Now.
func New(db *index.DB, now func() time.Time) *Journal {
	if now == nil {
		now = time.Now
	}
	return &Journal{db: db, now: now}
}

// Append records one event for runID in tx and returns it with its seq.
//
// tx must be the writable transaction of the change the event records, so
// the two commit or roll back together; a nil tx fails with store.internal
// and a read-only one with store.read_only. The seq is the run's highest
// seq plus one (1 for a new run). payload is marshalled with encoding/json
// and must encode to a JSON object; nil (or a nil map or pointer, which
// encode to null) stores "{}". The payload is stored packed (see the
// package doc); readers get back exactly the JSON the returned event
// holds. An empty runID, an unknown typ or level, or a payload that is not
// an object fails with workspace.invalid_argument; a payload over
// MaxPayloadBytes with workspace.size_limit_exceeded. A failed write is
// journal.write_failed, wrapping the cause, unless ctx ended (ctx's error)
// or the store gave a code of its own (store.busy, store.read_only,
// store.corrupt).
func (j *Journal) Append(ctx context.Context, tx *index.Tx, runID string, typ Type, level Level, payload any) (Event, error) {
	const op = "journal append"
	if err := checkWriteTx(op, tx); err != nil {
		return Event{}, err
	}
	if runID == "" {
		return Event{}, wserr.New(wserr.InvalidArgument, op, "", "empty run id")
	}
	e, err := j.Prepare(typ, level, payload)
	if err != nil {
		return Event{}, err
	}
	evs, err := j.AppendEntries(ctx, tx, runID, e)
	if err != nil {
		return Event{}, err
	}
	return evs[0], nil
}

// Entry is an event made ready to append (Prepare): checked, its payload
// encoded and its time read from the journal's clock.
type Entry struct {
	typ    Type
	level  Level
	at     time.Time
	body   json.RawMessage
	stored any // body as the row holds it
}

// Type is the entry's event type.
func (e Entry) Type() Type { return e.typ }

// Prepare checks and stamps an event as Append does, without writing it,
// so that AppendEntries can write several in one statement: its time is
// read from the clock now, in the order the change's steps happen. It
// fails as Append does for typ, level and payload.
func (j *Journal) Prepare(typ Type, level Level, payload any) (Entry, error) {
	const op = "journal append"
	if !typ.Valid() {
		return Entry{}, wserr.New(wserr.InvalidArgument, op, "", "unknown event type %q", typ)
	}
	if !level.Valid() {
		return Entry{}, wserr.New(wserr.InvalidArgument, op, "", "unknown level %q: want debug, info, warn or error", level)
	}
	body, err := marshalPayload(payload)
	if err != nil {
		return Entry{}, wserr.Wrap(wserr.InvalidArgument, op, "", err)
	}
	if len(body) > MaxPayloadBytes {
		return Entry{}, wserr.New(wserr.SizeLimitExceeded, op, "", "a %s payload of %d bytes is over the %d an event may hold", typ, len(body), MaxPayloadBytes)
	}
	// Round through Unix nanoseconds so the returned event is exactly the
	// one a later read returns (no monotonic reading, no zone).
	at := time.Unix(0, j.now().UnixNano()).UTC()

	// A packed payload is bound as []byte, so SQLite stores it as a BLOB
	// (the column's TEXT affinity leaves BLOBs alone); a plain one as TEXT.
	var stored any = string(body)
	if p, packed := encodePayload(body); packed {
		stored = p
	}
	return Entry{typ: typ, level: level, at: at, body: body, stored: stored}, nil
}

// AppendEntries records es, prepared by Prepare, as runID's next events
// in tx, in order, and returns them with their seqs: each as Append would
// record it, two at a time in one statement. It fails as Append does.
func (j *Journal) AppendEntries(ctx context.Context, tx *index.Tx, runID string, es ...Entry) ([]Event, error) {
	const op = "journal append"
	if err := checkWriteTx(op, tx); err != nil {
		return nil, err
	}
	if runID == "" {
		return nil, wserr.New(wserr.InvalidArgument, op, "", "empty run id")
	}
	for _, e := range es {
		if !e.typ.Valid() || !e.level.Valid() {
			return nil, wserr.New(wserr.InvalidArgument, op, "", "an entry Prepare did not make")
		}
	}
	out := make([]Event, 0, len(es))
	for len(es) > 0 {
		n := min(len(es), 2)
		// One statement: the seq is read and the rows written under the
		// same write lock, and "ORDER BY seq DESC LIMIT 1" is a single
		// seek to the end of the run's range of the primary key. Two rows
		// take their seqs from that one read: the rows to insert are
		// read in full before any is written, as the statement reads
		// the table it writes.
		var seqs []int64
		var err error
		switch n {
		case 1:
			var seq int64
			err = tx.GetContext(ctx, &seq, `INSERT INTO events (run_id, seq, type, level, at, payload)
				VALUES (?1, coalesce((SELECT seq FROM events WHERE run_id = ?1 ORDER BY seq DESC LIMIT 1), 0) + 1, ?2, ?3, ?4, ?5)
				RETURNING seq`,
				runID, string(es[0].typ), string(es[0].level), es[0].at.UnixNano(), es[0].stored)
			seqs = []int64{seq}
		default:
			err = tx.SelectContext(ctx, &seqs, `INSERT INTO events (run_id, seq, type, level, at, payload)
				SELECT ?1, l.seq + v.n, v.type, v.level, v.at, v.payload
				FROM (SELECT coalesce((SELECT seq FROM events WHERE run_id = ?1 ORDER BY seq DESC LIMIT 1), 0) AS seq) l,
					(SELECT 1 AS n, ?2 AS type, ?3 AS level, ?4 AS at, ?5 AS payload UNION ALL SELECT 2, ?6, ?7, ?8, ?9) v
				RETURNING seq`,
				runID, string(es[0].typ), string(es[0].level), es[0].at.UnixNano(), es[0].stored,
				string(es[1].typ), string(es[1].level), es[1].at.UnixNano(), es[1].stored)
			if err == nil && len(seqs) != 2 {
				err = fmt.Errorf("%d rows inserted for 2 events", len(seqs))
			}
			slices.Sort(seqs)
		}
		if err != nil {
			err = fmt.Errorf("run %s: %w", runID, index.Translate(err))
			if ctx.Err() != nil || wserr.CodeOf(err) != wserr.Internal {
				// The caller gave up, or the store said why (busy, read-only,
				// corrupt): that is the error, not the journal.
				return nil, fmt.Errorf("%s: %w", op, err)
			}
			return nil, wserr.Wrap(wserr.JournalFailed, op, "", err)
		}
		for i, e := range es[:n] {
			out = append(out, Event{RunID: runID, Seq: seqs[i], Type: e.typ, Level: e.level, At: e.at, Payload: e.body})
		}
		es = es[n:]
	}
	return out, nil
}

// marshalPayload encodes v as a compact JSON object.
func marshalPayload(v any) (json.RawMessage, error) {
	if v == nil {
		return json.RawMessage("{}"), nil
	}
	// An Encoder rather than json.Marshal so "<", ">" and "&" (common in
	// paths, code and prose) are stored as themselves, not as \u003c: the
	// journal is read by people through wsctl and events.jsonl.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("payload: %w", err)
	}
	b := bytes.TrimSpace(buf.Bytes())
	if bytes.Equal(b, []byte("null")) {
		return json.RawMessage("{}"), nil
	}
	if len(b) == 0 || b[0] != '{' {
		return nil, fmt.Errorf("payload must be a JSON object, not %s", jsonKind(b))
	}
	// The encoder has already validated and compacted a json.RawMessage.
	return json.RawMessage(b), nil
}

func jsonKind(b []byte) string {
	if len(b) == 0 {
		return "nothing"
	}
	switch b[0] {
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	}
	return "a number"
}

// checkWriteTx refuses a missing or read-only transaction: journal writes
// exist only as part of the change they record.
func checkWriteTx(op string, tx *index.Tx) error {
	if tx == nil || tx.Tx == nil {
		return wserr.New(wserr.Internal, op, "", "no transaction: journal writes commit with the change they record")
	}
	if !tx.Writable() {
		return wserr.New(wserr.ReadOnly, op, "", "read-only transaction")
	}
	return nil
}

// Last returns the highest seq of runID, 0 if it has no events. With a nil
// tx it reads the last committed state from the read pool; inside an Update
// it sees the transaction's own appends. An empty runID fails with
// workspace.invalid_argument.
func (j *Journal) Last(ctx context.Context, tx *index.Tx, runID string) (int64, error) {
	if runID == "" {
		return 0, wserr.New(wserr.InvalidArgument, "journal last", "", "empty run id")
	}
	var seq int64
	get := func(tx *index.Tx) error {
		return index.Translate(tx.GetContext(ctx, &seq,
			`SELECT coalesce((SELECT seq FROM events WHERE run_id = ? ORDER BY seq DESC LIMIT 1), 0)`, runID))
	}
	var err error
	if tx != nil {
		err = get(tx)
	} else {
		err = j.db.View(ctx, get)
	}
	if err != nil {
		return 0, fmt.Errorf("journal last %s: %w", runID, err)
	}
	return seq, nil
}

// DeleteRun removes every event of runID in tx and returns how many it
// removed. It is the journal's only deletion and exists for deleting a
// whole run, in the transaction that deletes the run. A nil tx fails with
// store.internal, a read-only one with store.read_only, an empty runID with
// workspace.invalid_argument.
func (j *Journal) DeleteRun(ctx context.Context, tx *index.Tx, runID string) (int64, error) {
	const op = "journal delete run"
	if err := checkWriteTx(op, tx); err != nil {
		return 0, err
	}
	if runID == "" {
		return 0, wserr.New(wserr.InvalidArgument, op, "", "empty run id")
	}
	res, err := tx.ExecContext(ctx, `DELETE FROM events WHERE run_id = ?`, runID)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", op, runID, index.Translate(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", op, runID, err)
	}
	return n, nil
}
