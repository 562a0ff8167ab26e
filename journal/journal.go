package journal

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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
	if !typ.Valid() {
		return Event{}, wserr.New(wserr.InvalidArgument, op, "", "unknown event type %q", typ)
	}
	if !level.Valid() {
		return Event{}, wserr.New(wserr.InvalidArgument, op, "", "unknown level %q: want debug, info, warn or error", level)
	}
	body, err := marshalPayload(payload)
	if err != nil {
		return Event{}, wserr.Wrap(wserr.InvalidArgument, op, "", err)
	}
	if len(body) > MaxPayloadBytes {
		return Event{}, wserr.New(wserr.SizeLimitExceeded, op, "", "a %s payload of %d bytes is over the %d an event may hold", typ, len(body), MaxPayloadBytes)
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
	// One statement: the seq is read and the row written under the same
	// write lock, and "ORDER BY seq DESC LIMIT 1" is a single seek to the
	// end of the run's range of the primary key.
	var seq int64
	err = tx.GetContext(ctx, &seq, `INSERT INTO events (run_id, seq, type, level, at, payload)
		VALUES (?1, coalesce((SELECT seq FROM events WHERE run_id = ?1 ORDER BY seq DESC LIMIT 1), 0) + 1, ?2, ?3, ?4, ?5)
		RETURNING seq`,
		runID, string(typ), string(level), at.UnixNano(), stored)
	if err != nil {
		err = fmt.Errorf("run %s: %w", runID, index.Translate(err))
		if ctx.Err() != nil || wserr.CodeOf(err) != wserr.Internal {
			// The caller gave up, or the store said why (busy, read-only,
			// corrupt): that is the error, not the journal.
			return Event{}, fmt.Errorf("%s: %w", op, err)
		}
		return Event{}, wserr.Wrap(wserr.JournalFailed, op, "", err)
	}
	return Event{RunID: runID, Seq: seq, Type: typ, Level: level, At: at, Payload: body}, nil
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
