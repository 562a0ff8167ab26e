package journal_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/wserr"
)

// encodingJSON is what Append made of a payload before payloads were
// packed, and so what every reader must still get back.
func encodingJSON(t *testing.T, v any) []byte {
	t.Helper()
	if v == nil {
		return []byte(`{}`)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(v))
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// storedPayload returns the stored value of an event and its SQLite type.
func storedPayload(t *testing.T, db *index.DB, runID string, seq int64) (stored []byte, typ string) {
	t.Helper()
	var r struct {
		Payload []byte `db:"payload"`
		Type    string `db:"type"`
	}
	require.NoError(t, db.View(context.Background(), func(tx *index.Tx) error {
		return tx.GetContext(context.Background(), &r,
			`SELECT payload, typeof(payload) AS type FROM events WHERE run_id = ? AND seq = ?`, runID, seq)
	}))
	return r.Payload, r.Type
}

// payloadJSONOf returns payload_json(payload) of an event.
func payloadJSONOf(db *index.DB, runID string, seq int64) (string, error) {
	var s string
	err := db.View(context.Background(), func(tx *index.Tx) error {
		return tx.GetContext(context.Background(), &s,
			`SELECT payload_json(payload) FROM events WHERE run_id = ? AND seq = ?`, runID, seq)
	})
	return s, err
}

// execSQL runs a statement in a write transaction of its own.
func execSQL(t *testing.T, db *index.DB, query string, args ...any) {
	t.Helper()
	require.NoError(t, db.Update(context.Background(), func(tx *index.Tx) error {
		_, err := tx.ExecContext(context.Background(), query, args...)
		return err
	}))
}

// TestPayloadRoundTrip: every sample payload reads back, through Page,
// Export and payload_json, as exactly the JSON encoding/json makes of it;
// all but the smallest are stored packed, as BLOBs shorter than the JSON.
func TestPayloadRoundTrip(t *testing.T) {
	ctx := context.Background()
	db, j, _ := newJournal(t)
	samples := journal.SamplePayloads()
	names := make([]string, 0, len(samples))
	for name := range samples {
		names = append(names, name)
	}
	sort.Strings(names)
	const runID = "run_payloads"
	var appended []journal.Event
	for _, name := range names {
		want := encodingJSON(t, samples[name])
		e := appendOne(t, db, j, runID, journal.ToolCallCompleted, samples[name])
		appended = append(appended, e)
		assert.Equal(t, string(want), string(e.Payload), name)

		stored, typ := storedPayload(t, db, runID, e.Seq)
		if len(stored) < len(want) {
			assert.Equal(t, "blob", typ, "%s: a packed payload is a BLOB", name)
		} else {
			assert.Equal(t, "text", typ, "%s: a payload packing would not shorten is JSON text", name)
			assert.Equal(t, string(want), string(stored), name)
		}
		got, err := payloadJSONOf(db, runID, e.Seq)
		require.NoError(t, err, name)
		assert.Equal(t, string(want), got, "%s: payload_json", name)
	}
	assert.Equal(t, appended, all(t, j, runID), "Page returns exactly what Append returned")

	var buf bytes.Buffer
	require.NoError(t, j.Export(ctx, runID, &buf))
	lines := bytes.Split(bytes.TrimSuffix(buf.Bytes(), []byte("\n")), []byte("\n"))
	require.Len(t, lines, len(appended))
	for i, line := range lines {
		assert.Contains(t, string(line), `,"payload":`+string(appended[i].Payload)+`}`, names[i])
	}
}

// TestPayloadPlainRows: rows stored as JSON text, as every row was before
// payloads were packed, read exactly as they are, next to packed ones.
func TestPayloadPlainRows(t *testing.T) {
	db, j, _ := newJournal(t)
	h := fmt.Sprintf("%x", sha256.Sum256([]byte("old")))
	old := `{"path":"output/a.md","hash":"` + h + `","bytes":3,"mode":"replace"}`
	execSQL(t, db, `INSERT INTO events (run_id, seq, type, level, at, payload) VALUES
		('run_old', 1, 'workspace_file_written', 'info', 1000, ?),
		('run_old', 3, 'status_changed', 'info', 3000, ?)`, old, `{ "from" : "a",  "to":"b" }`)
	execSQL(t, db, `INSERT INTO events (run_id, seq, type, level, at) VALUES ('run_old', 2, 'run_created', 'info', 2000)`)
	e := appendOne(t, db, j, "run_old", journal.WorkspaceFileWritten, journal.FileWritten{Path: "output/a.md", Hash: h, Bytes: 3, Mode: "replace"})
	assert.EqualValues(t, 4, e.Seq)

	events := all(t, j, "run_old")
	require.Len(t, events, 4)
	assert.Equal(t, old, string(events[0].Payload))
	assert.Equal(t, `{}`, string(events[1].Payload), "the column's default")
	assert.Equal(t, `{ "from" : "a",  "to":"b" }`, string(events[2].Payload), "a plain payload is returned as stored, not recompacted")
	assert.Equal(t, old, string(events[3].Payload), "packed and plain read the same")
	_, typ := storedPayload(t, db, "run_old", 4)
	assert.Equal(t, "blob", typ)

	for seq, want := range map[int64]string{1: old, 2: `{}`, 4: old} {
		got, err := payloadJSONOf(db, "run_old", seq)
		require.NoError(t, err)
		assert.Equal(t, want, got, "payload_json of seq %d", seq)
	}
	var path string
	require.NoError(t, db.View(context.Background(), func(tx *index.Tx) error {
		return tx.GetContext(context.Background(), &path,
			`SELECT group_concat(json_extract(payload_json(payload), '$.path'), ',') FROM events WHERE run_id = 'run_old'`)
	}))
	assert.Equal(t, "output/a.md,output/a.md", path)
}

// TestPayloadCorrupt: a packed payload that does not decode fails Page,
// Export and payload_json with store.corrupt naming its run and seq; the
// events before it still read.
func TestPayloadCorrupt(t *testing.T) {
	ctx := context.Background()
	hash := bytes.Repeat([]byte{0xab}, 32)
	tests := []struct {
		name   string
		stored []byte
	}{
		{"ErrUnknownFormat", []byte("\x02{\x02\"output/a.md\"}")},
		{"ErrTruncatedHash", append([]byte("\x01{\x03\x00"), hash[:20]...)},
		{"ErrTruncatedEscape", []byte("\x01{\x01")},
		{"ErrUnusedCode", []byte("\x01{\x09}")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, j, _ := newJournal(t)
			appendOne(t, db, j, "run_bad", journal.StatusChanged, journal.StatusChange{From: "a", To: "b"})
			execSQL(t, db, `INSERT INTO events (run_id, seq, type, level, at, payload)
				VALUES ('run_bad', 2, 'workspace_file_written', 'info', 0, ?)`, tt.stored)

			_, err := j.Page(ctx, "run_bad", journal.PageQuery{})
			require.Error(t, err)
			assert.Equal(t, wserr.Corrupt, wserr.CodeOf(err), "%v", err)
			assert.Contains(t, err.Error(), "run run_bad seq 2")

			page, err := j.Page(ctx, "run_bad", journal.PageQuery{Limit: 1})
			require.NoError(t, err, "the event before the corrupt one reads")
			assert.Len(t, page, 1)

			err = j.Export(ctx, "run_bad", &bytes.Buffer{})
			assert.Equal(t, wserr.Corrupt, wserr.CodeOf(err), "%v", err)

			_, err = payloadJSONOf(db, "run_bad", 2)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "payload_json")
		})
	}
}

// TestPayloadSize: the payloads of a realistic run (files written with
// their previous hash, each followed by its automatic checkpoint, some
// patches, manual checkpoints) take at most 55% of their JSON's bytes.
func TestPayloadSize(t *testing.T) {
	db, j, _ := newJournal(t)
	hash := func(i int) string { return fmt.Sprintf("%x", sha256.Sum256([]byte(fmt.Sprint(i)))) }
	paths := []string{"output/status.md", "output/main.md", "scratch/notes.md", "plan/steps.md"}
	var payloads []any
	prev := map[string]string{}
	cp := 1
	payloads = append(payloads, journal.CheckpointMade{CheckpointID: fmt.Sprintf("cp_%06d", cp), Seq: 1, Root: hash(0), Reason: "after_init"})
	for i := 1; i <= 120; i++ {
		p := paths[i%len(paths)]
		h := hash(i)
		reason := "after_workspace_write"
		switch {
		case i%7 == 0 && prev[p] != "":
			payloads = append(payloads, journal.PatchApplied{Path: p, Hash: h, PrevHash: prev[p], Replacements: 1})
			reason = "after_workspace_patch"
		case i%3 == 0:
			payloads = append(payloads, journal.FileWritten{Path: p, Hash: h, Bytes: int64(100 * i), Mode: "append", PrevHash: prev[p]})
		default:
			payloads = append(payloads, journal.FileWritten{Path: p, Hash: h, Bytes: int64(40 * i), Mode: "replace", PrevHash: prev[p]})
		}
		prev[p] = h
		cp++
		payloads = append(payloads, journal.CheckpointMade{CheckpointID: fmt.Sprintf("cp_%06d", cp), Seq: int64(cp), Root: hash(-i), Reason: reason, Parent: fmt.Sprintf("cp_%06d", cp-1)})
		if i%10 == 0 {
			cp++
			payloads = append(payloads, journal.CheckpointMade{CheckpointID: fmt.Sprintf("cp_%06d", cp), Seq: int64(cp), Root: hash(-i), Reason: fmt.Sprintf("round %d: append", i/10), Parent: fmt.Sprintf("cp_%06d", cp-1)})
		}
	}
	plain := 0
	require.NoError(t, db.Update(context.Background(), func(tx *index.Tx) error {
		for _, p := range payloads {
			e, err := j.Append(context.Background(), tx, "run_size", journal.WorkspaceFileWritten, journal.Info, p)
			if err != nil {
				return err
			}
			plain += len(e.Payload)
		}
		return nil
	}))
	var stored int
	require.NoError(t, db.View(context.Background(), func(tx *index.Tx) error {
		return tx.GetContext(context.Background(), &stored, `SELECT sum(length(payload)) FROM events`)
	}))
	t.Logf("%d events: %d bytes of JSON, %d stored (%.1f%%)", len(payloads), plain, stored, 100*float64(stored)/float64(plain))
	assert.LessOrEqual(t, float64(stored), 0.55*float64(plain))
}

// TestPayloadJSONFunc: payload_json gives NULL for NULL and refuses what
// cannot be a payload.
func TestPayloadJSONFunc(t *testing.T) {
	db, _, _ := newJournal(t)
	query := func(expr string) (any, error) {
		var v any
		err := db.View(context.Background(), func(tx *index.Tx) error {
			return tx.QueryRowxContext(context.Background(), `SELECT `+expr).Scan(&v)
		})
		return v, err
	}
	v, err := query(`payload_json(NULL)`)
	require.NoError(t, err)
	assert.Nil(t, v)
	v, err = query(`payload_json('{"a":1}')`)
	require.NoError(t, err)
	assert.Equal(t, `{"a":1}`, v)
	v, err = query(`payload_json(x'01` + hex.EncodeToString([]byte(`{`)) + `18` + hex.EncodeToString([]byte(`}`)) + `')`)
	require.NoError(t, err)
	assert.Equal(t, `{"replace"}`, v, "it decodes bytes, whether or not they are JSON")
	_, err = query(`payload_json(42)`)
	assert.ErrorContains(t, err, "payload_json: a payload is TEXT or a BLOB")
	// The driver hands a function TEXT only up to its first NUL, so a
	// packed payload stored as TEXT is refused rather than cut short.
	_, err = query(`payload_json(CAST(x'017b0300` + strings.Repeat("ab", 32) + `7d' AS TEXT))`)
	assert.ErrorContains(t, err, "payload_json: a packed payload stored as TEXT")
}
