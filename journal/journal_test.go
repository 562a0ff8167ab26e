package journal_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/wserr"
)

// fakeClock returns a fixed start time advanced by one millisecond (plus a
// nanosecond, so precision loss would show) on every call.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	// A non-UTC zone, so the test also proves events are stamped in UTC.
	return &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.FixedZone("UTC+8", 8*3600))}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Millisecond + time.Nanosecond)
	return c.t
}

func newJournal(t *testing.T) (*index.DB, *journal.Journal, *fakeClock) {
	t.Helper()
	db := storetest.OpenDB(t, index.Options{})
	clock := newFakeClock()
	return db, journal.New(db, clock.Now), clock
}

// appendOne appends one event in a transaction of its own.
func appendOne(t *testing.T, db *index.DB, j *journal.Journal, runID string, typ journal.Type, payload any) journal.Event {
	t.Helper()
	var e journal.Event
	require.NoError(t, db.Update(context.Background(), func(tx *index.Tx) error {
		var err error
		e, err = j.Append(context.Background(), tx, runID, typ, journal.Info, payload)
		return err
	}))
	return e
}

// appendMany appends n events to runID in one transaction.
func appendMany(t *testing.T, db *index.DB, j *journal.Journal, runID string, n int) []journal.Event {
	t.Helper()
	out := make([]journal.Event, 0, n)
	require.NoError(t, db.Update(context.Background(), func(tx *index.Tx) error {
		for i := range n {
			e, err := j.Append(context.Background(), tx, runID, journal.ToolCallCompleted, journal.Info, map[string]int{"i": i})
			if err != nil {
				return err
			}
			out = append(out, e)
		}
		return nil
	}))
	return out
}

func seqs(events []journal.Event) []int64 {
	out := make([]int64, len(events))
	for i, e := range events {
		out[i] = e.Seq
	}
	return out
}

func seqRange(from, to int64) []int64 {
	out := []int64{}
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

// all reads a run's whole journal through Page.
func all(t *testing.T, j *journal.Journal, runID string) []journal.Event {
	t.Helper()
	var out []journal.Event
	for after := int64(0); ; {
		page, err := j.Page(context.Background(), runID, journal.PageQuery{AfterSeq: after, Limit: journal.MaxLimit})
		require.NoError(t, err)
		if len(page) == 0 {
			return out
		}
		out = append(out, page...)
		after = page[len(page)-1].Seq
	}
}

func TestAppend(t *testing.T) {
	ctx := context.Background()

	t.Run("OKSeqFromOneWithoutGaps", func(t *testing.T) {
		db, j, _ := newJournal(t)
		var appended []journal.Event
		for range 10 {
			appended = append(appended, appendOne(t, db, j, "run_a", journal.StatusChanged, journal.StatusChange{From: "a", To: "b"}))
		}
		assert.Equal(t, seqRange(1, 10), seqs(appended))
		assert.Equal(t, appended, all(t, j, "run_a"), "a read returns exactly what Append returned")
		last, err := j.Last(ctx, nil, "run_a")
		require.NoError(t, err)
		assert.EqualValues(t, 10, last)
	})

	t.Run("OKRunsHaveIndependentSeqs", func(t *testing.T) {
		db, j, _ := newJournal(t)
		for range 3 {
			appendOne(t, db, j, "run_a", journal.RunCreated, nil)
		}
		b := appendOne(t, db, j, "run_b", journal.RunCreated, nil)
		a := appendOne(t, db, j, "run_a", journal.RunCreated, nil)
		assert.EqualValues(t, 1, b.Seq)
		assert.EqualValues(t, 4, a.Seq)
		// A run id that is a prefix of another shares nothing with it.
		assert.EqualValues(t, 1, appendOne(t, db, j, "run_", journal.RunCreated, nil).Seq)
		assert.EqualValues(t, 1, appendOne(t, db, j, "run_a0", journal.RunCreated, nil).Seq)
	})

	t.Run("OKFailedTransactionLeavesNoEventAndSeqIsReused", func(t *testing.T) {
		db, j, _ := newJournal(t)
		appendMany(t, db, j, "run_a", 2)
		errChange := errors.New("the recorded change failed")
		err := db.Update(ctx, func(tx *index.Tx) error {
			e, err := j.Append(ctx, tx, "run_a", journal.WorkspaceFileWritten, journal.Info, journal.FileWritten{Path: "output/main.md"})
			require.NoError(t, err)
			assert.EqualValues(t, 3, e.Seq)
			// Inside the transaction the event is visible to its own reads.
			last, err := j.Last(ctx, tx, "run_a")
			require.NoError(t, err)
			assert.EqualValues(t, 3, last)
			return errChange
		})
		require.ErrorIs(t, err, errChange)
		last, err := j.Last(ctx, nil, "run_a")
		require.NoError(t, err)
		assert.EqualValues(t, 2, last, "the rolled-back event is gone")
		next := appendOne(t, db, j, "run_a", journal.WorkspaceFileWritten, nil)
		assert.EqualValues(t, 3, next.Seq, "the freed seq is reused")
		assert.Equal(t, seqRange(1, 3), seqs(all(t, j, "run_a")))
	})

	t.Run("OKEventsFollowTheChangeTheyRecord", func(t *testing.T) {
		// An event and the change it records commit together: a reader
		// never sees one without the other.
		db, j, _ := newJournal(t)
		require.NoError(t, db.Update(ctx, func(tx *index.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO trees (hash, data, created) VALUES (zeroblob(32), x'', 0)`)
			require.NoError(t, err)
			_, err = j.Append(ctx, tx, "run_a", journal.CheckpointCreated, journal.Info, nil)
			require.NoError(t, err)
			last, err := j.Last(ctx, nil, "run_a")
			require.NoError(t, err)
			assert.Zero(t, last, "uncommitted events are not visible to readers")
			return nil
		}))
		last, err := j.Last(ctx, nil, "run_a")
		require.NoError(t, err)
		assert.EqualValues(t, 1, last)
	})
}

func TestAppendPayload(t *testing.T) {
	ctx := context.Background()
	var nilMap map[string]any
	var nilPtr *journal.FileWritten
	tests := []struct {
		name    string
		payload any
		want    string
	}{
		{"OKNilIsEmptyObject", nil, `{}`},
		{"OKNilMapIsEmptyObject", nilMap, `{}`},
		{"OKNilPointerIsEmptyObject", nilPtr, `{}`},
		{"OKEmptyStruct", struct{}{}, `{}`},
		{"OKMap", map[string]any{"b": 1, "a": "x"}, `{"a":"x","b":1}`},
		{"OKHTMLCharactersStoredAsThemselves", map[string]string{"path": "output/<a&b>.md"}, `{"path":"output/<a&b>.md"}`},
		{"OKRawMessageCompacted", json.RawMessage(" { \"a\" : [1, 2] } "), `{"a":[1,2]}`},
		{"OKFileWrittenOmitsEmptyPrevHash", journal.FileWritten{Path: "output/main.md", Hash: "ab", Bytes: 3, Mode: "create"},
			`{"path":"output/main.md","hash":"ab","bytes":3,"mode":"create"}`},
		{"OKFileWrittenPointer", &journal.FileWritten{Path: "p", Hash: "h", Bytes: 1, Mode: "overwrite", PrevHash: "g"},
			`{"path":"p","hash":"h","bytes":1,"mode":"overwrite","prevHash":"g"}`},
		{"OKPatchApplied", journal.PatchApplied{Path: "p", Hash: "h", PrevHash: "g", Replacements: 2},
			`{"path":"p","hash":"h","prevHash":"g","replacements":2}`},
		{"OKFileDeleted", journal.FileDeleted{Path: "p", PrevHash: "g"}, `{"path":"p","prevHash":"g"}`},
		{"OKStatusChange", journal.StatusChange{From: "running", To: "completed"}, `{"from":"running","to":"completed"}`},
		{"OKStatusChangeWithReason", journal.StatusChange{From: "running", To: "failed", Reason: "model error"},
			`{"from":"running","to":"failed","reason":"model error"}`},
		{"OKCheckpointMade", journal.CheckpointMade{CheckpointID: "cp_000002", Seq: 2, Root: "r", Reason: "write", Parent: "cp_000001"},
			`{"checkpointId":"cp_000002","seq":2,"root":"r","reason":"write","parent":"cp_000001"}`},
		{"OKCheckpointMadeFirst", journal.CheckpointMade{CheckpointID: "cp_000001", Seq: 1, Root: "r", Reason: "init"},
			`{"checkpointId":"cp_000001","seq":1,"root":"r","reason":"init"}`},
		{"OKRolledBack", journal.RolledBack{CheckpointID: "cp_000001", Root: "r", PrevRoot: "q"},
			`{"checkpointId":"cp_000001","root":"r","prevRoot":"q"}`},
	}
	db, j, _ := newJournal(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := appendOne(t, db, j, tt.name, journal.ToolCallCompleted, tt.payload)
			assert.JSONEq(t, tt.want, string(e.Payload))
			assert.Equal(t, tt.want, string(e.Payload), "payload is stored compact, in encoding/json's field order")
			page, err := j.Page(ctx, tt.name, journal.PageQuery{})
			require.NoError(t, err)
			require.Len(t, page, 1)
			assert.Equal(t, e, page[0])
		})
	}
}

func TestAppendErrors(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		runID   string
		typ     journal.Type
		level   journal.Level
		payload any
	}{
		{"ErrEmptyRunID", "", journal.RunCreated, journal.Info, nil},
		{"ErrUnknownType", "run_a", journal.Type("run_exploded"), journal.Info, nil},
		{"ErrEmptyType", "run_a", "", journal.Info, nil},
		{"ErrTypeWrongCase", "run_a", journal.Type("RUN_CREATED"), journal.Info, nil},
		{"ErrUnknownLevel", "run_a", journal.RunCreated, journal.Level("fatal"), nil},
		{"ErrEmptyLevel", "run_a", journal.RunCreated, "", nil},
		{"ErrPayloadArray", "run_a", journal.RunCreated, journal.Info, []int{1}},
		{"ErrPayloadString", "run_a", journal.RunCreated, journal.Info, "text"},
		{"ErrPayloadNumber", "run_a", journal.RunCreated, journal.Info, 42},
		{"ErrPayloadBool", "run_a", journal.RunCreated, journal.Info, true},
		{"ErrPayloadBytes", "run_a", journal.RunCreated, journal.Info, []byte(`{"a":1}`)},
		{"ErrPayloadRawArray", "run_a", journal.RunCreated, journal.Info, json.RawMessage(`[1]`)},
		{"ErrPayloadRawInvalid", "run_a", journal.RunCreated, journal.Info, json.RawMessage(`{"a":`)},
		{"ErrPayloadUnmarshalable", "run_a", journal.RunCreated, journal.Info, map[string]any{"c": make(chan int)}},
	}
	db, j, _ := newJournal(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := db.Update(ctx, func(tx *index.Tx) error {
				_, err := j.Append(ctx, tx, tt.runID, tt.typ, tt.level, tt.payload)
				return err
			})
			require.Error(t, err)
			assert.Equal(t, wserr.InvalidArgument, wserr.CodeOf(err), "%v", err)
		})
	}

	t.Run("ErrNilTx", func(t *testing.T) {
		_, err := j.Append(ctx, nil, "run_a", journal.RunCreated, journal.Info, nil)
		assert.Equal(t, wserr.Internal, wserr.CodeOf(err), "%v", err)
		assert.True(t, wserr.Is(err, wserr.Internal))
	})

	t.Run("ErrReadOnlyTx", func(t *testing.T) {
		err := db.View(ctx, func(tx *index.Tx) error {
			_, err := j.Append(ctx, tx, "run_a", journal.RunCreated, journal.Info, nil)
			return err
		})
		assert.Equal(t, wserr.ReadOnly, wserr.CodeOf(err), "%v", err)
	})

	t.Run("ErrWriteFailed", func(t *testing.T) {
		// The events table refuses the row, as a full disk would.
		require.NoError(t, db.Update(ctx, func(tx *index.Tx) error {
			_, err := tx.ExecContext(ctx, `CREATE TEMP TRIGGER refuse BEFORE INSERT ON events BEGIN SELECT RAISE(ABORT, 'no room'); END`)
			return err
		}))
		defer func() {
			require.NoError(t, db.Update(ctx, func(tx *index.Tx) error {
				_, err := tx.ExecContext(ctx, `DROP TRIGGER temp.refuse`)
				return err
			}))
		}()
		err := db.Update(ctx, func(tx *index.Tx) error {
			_, err := j.Append(ctx, tx, "run_a", journal.RunCreated, journal.Info, nil)
			return err
		})
		assert.Equal(t, wserr.JournalFailed, wserr.CodeOf(err), "%v", err)
		assert.ErrorContains(t, err, "no room")
	})

	t.Run("ErrCallerGaveUp", func(t *testing.T) {
		// A cancelled context is the caller's doing, not a journal
		// failure (which would fail the run).
		cctx, cancel := context.WithCancel(ctx)
		err := db.Update(ctx, func(tx *index.Tx) error {
			cancel()
			_, err := j.Append(cctx, tx, "run_a", journal.RunCreated, journal.Info, nil)
			return err
		})
		require.ErrorIs(t, err, context.Canceled)
		assert.False(t, wserr.Is(err, wserr.JournalFailed), "%v", err)
	})

	t.Run("ErrPayloadTooLarge", func(t *testing.T) {
		// No archive row could hold it: refused, not journaled.
		err := db.Update(ctx, func(tx *index.Tx) error {
			_, err := j.Append(ctx, tx, "run_a", journal.ToolCallRequested, journal.Info,
				map[string]string{"name": strings.Repeat("x", journal.MaxPayloadBytes)})
			return err
		})
		assert.Equal(t, wserr.SizeLimitExceeded, wserr.CodeOf(err), "%v", err)
	})

	last, err := j.Last(ctx, nil, "run_a")
	require.NoError(t, err)
	assert.Zero(t, last, "no failed append wrote anything")
}

func TestVocabulary(t *testing.T) {
	// The vocabulary of seed 002 plus the store's own additions; a change
	// here is a change to the timeline's contract.
	want := []journal.Type{
		"run_created", "run_completed", "run_failed", "run_cancelled", "status_changed", "run_finished",
		"context_assembled", "model_request_created", "model_completed", "model_response_stored",
		"tool_call_requested", "tool_call_completed", "tool_call_failed",
		"workspace_file_written", "workspace_patch_applied", "workspace_file_deleted", "checkpoint_created", "checkpoints_pruned", "workspace_rolled_back", "scratch_collected",
		"artifact_assembled", "chat_commit_requested", "chat_commit_completed", "chat_commit_failed", "commit_rolled_back",
		"persistent_changes_committed", "manifest_set",
		"retention_failed",
	}
	assert.ElementsMatch(t, want, journal.Types())
	for _, typ := range journal.Types() {
		assert.True(t, typ.Valid(), typ)
	}
	assert.False(t, journal.Type("").Valid())
	assert.False(t, journal.Type("run_created ").Valid())

	types := journal.Types()
	types[0] = "tampered"
	assert.True(t, journal.RunCreated.Valid(), "Types returns a copy")
	assert.False(t, journal.Type("tampered").Valid())

	for _, l := range []journal.Level{journal.Debug, journal.Info, journal.Warn, journal.Error} {
		assert.True(t, l.Valid(), l)
	}
	assert.False(t, journal.Level("warning").Valid())
	assert.False(t, journal.Level("").Valid())

	t.Run("OKEveryTypeAppends", func(t *testing.T) {
		db, j, _ := newJournal(t)
		for i, typ := range journal.Types() {
			e := appendOne(t, db, j, "run_a", typ, nil)
			assert.EqualValues(t, i+1, e.Seq)
			assert.Equal(t, typ, e.Type)
		}
	})
}

func TestPage(t *testing.T) {
	ctx := context.Background()
	db, j, _ := newJournal(t)
	const n = 600
	appended := appendMany(t, db, j, "run_a", n)
	appendMany(t, db, j, "run_b", 5)

	tests := []struct {
		name string
		q    journal.PageQuery
		want []int64
	}{
		{"OKDefaultLimitIs100", journal.PageQuery{}, seqRange(1, 100)},
		{"OKAfter", journal.PageQuery{AfterSeq: 10, Limit: 5}, seqRange(11, 15)},
		{"OKAfterNearEnd", journal.PageQuery{AfterSeq: n - 3, Limit: 10}, seqRange(n-2, n)},
		{"OKAfterEnd", journal.PageQuery{AfterSeq: n}, []int64{}},
		{"OKAfterFarBeyondEnd", journal.PageQuery{AfterSeq: 1 << 62}, []int64{}},
		{"OKBeforeIsThePageJustBeforeAscending", journal.PageQuery{BeforeSeq: 20, Limit: 5}, seqRange(15, 19)},
		{"OKBeforeNewestPage", journal.PageQuery{BeforeSeq: n + 1, Limit: 3}, seqRange(n-2, n)},
		{"OKBeforeFarBeyondEnd", journal.PageQuery{BeforeSeq: 1 << 62, Limit: 2}, seqRange(n-1, n)},
		{"OKBeforeNearStartIsShort", journal.PageQuery{BeforeSeq: 4, Limit: 10}, seqRange(1, 3)},
		{"OKBeforeOne", journal.PageQuery{BeforeSeq: 1}, []int64{}},
		{"OKBothRange", journal.PageQuery{AfterSeq: 10, BeforeSeq: 14}, seqRange(11, 13)},
		{"OKBothLimitedFromAfter", journal.PageQuery{AfterSeq: 10, BeforeSeq: 100, Limit: 2}, seqRange(11, 12)},
		{"OKBothEmptyRange", journal.PageQuery{AfterSeq: 10, BeforeSeq: 11}, []int64{}},
		{"OKBothInverted", journal.PageQuery{AfterSeq: 10, BeforeSeq: 5}, []int64{}},
		{"OKLimit1", journal.PageQuery{Limit: 1}, seqRange(1, 1)},
		{"OKLimit500", journal.PageQuery{Limit: 500}, seqRange(1, 500)},
		{"OKBeforeLimit500", journal.PageQuery{BeforeSeq: n + 1, Limit: 500}, seqRange(n-499, n)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			page, err := j.Page(ctx, "run_a", tt.q)
			require.NoError(t, err)
			require.NotNil(t, page)
			assert.Equal(t, tt.want, seqs(page))
			for _, e := range page {
				assert.Equal(t, appended[e.Seq-1], e)
			}
		})
	}

	t.Run("OKUnknownRunIsEmpty", func(t *testing.T) {
		page, err := j.Page(ctx, "run_nobody", journal.PageQuery{})
		require.NoError(t, err)
		assert.NotNil(t, page)
		assert.Empty(t, page)
	})

	errTests := []struct {
		name  string
		runID string
		q     journal.PageQuery
	}{
		{"ErrLimit501", "run_a", journal.PageQuery{Limit: 501}},
		{"ErrLimitNegative", "run_a", journal.PageQuery{Limit: -1}},
		{"ErrAfterNegative", "run_a", journal.PageQuery{AfterSeq: -1}},
		{"ErrBeforeNegative", "run_a", journal.PageQuery{BeforeSeq: -1}},
		{"ErrEmptyRunID", "", journal.PageQuery{}},
	}
	for _, tt := range errTests {
		t.Run(tt.name, func(t *testing.T) {
			page, err := j.Page(ctx, tt.runID, tt.q)
			assert.Equal(t, wserr.InvalidArgument, wserr.CodeOf(err), "%v", err)
			assert.Nil(t, page)
		})
	}
}

func TestClock(t *testing.T) {
	db := storetest.OpenDB(t, index.Options{})

	t.Run("OKFromInjectedClockInUTC", func(t *testing.T) {
		clock := newFakeClock()
		want := newFakeClock()
		j := journal.New(db, clock.Now)
		appended := appendMany(t, db, j, "run_a", 5)
		for _, e := range all(t, j, "run_a") {
			w := want.Now()
			assert.True(t, w.Equal(e.At), "seq %d: %s, want %s", e.Seq, e.At, w)
			assert.Equal(t, time.UTC, e.At.Location())
			assert.Equal(t, appended[e.Seq-1].At, e.At)
		}
	})

	t.Run("OKNilClockIsSystemTime", func(t *testing.T) {
		j := journal.New(db, nil)
		before := time.Now().Add(-time.Second)
		e := appendOne(t, db, j, "run_b", journal.RunCreated, nil)
		// A sanity bound on the stamp, not a timing assertion: the stamp
		// comes from the wall clock, not from zero.
		assert.True(t, e.At.After(before), "%s", e.At)
		assert.Equal(t, time.UTC, e.At.Location())
	})
}

func TestEventJSON(t *testing.T) {
	e := journal.Event{
		RunID: "run_a", Seq: 7, Type: journal.ToolCallFailed, Level: journal.Warn,
		At: time.Date(2026, 3, 1, 4, 5, 6, 7, time.UTC), Payload: json.RawMessage(`{"code":"x"}`),
	}
	b, err := json.Marshal(e)
	require.NoError(t, err)
	assert.JSONEq(t, `{"runId":"run_a","seq":7,"type":"tool_call_failed","level":"warn","at":"2026-03-01T04:05:06.000000007Z","payload":{"code":"x"}}`, string(b))
	var back journal.Event
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, e, back)
}

func TestLast(t *testing.T) {
	ctx := context.Background()
	db, j, _ := newJournal(t)

	t.Run("OKZeroForUnknownRun", func(t *testing.T) {
		last, err := j.Last(ctx, nil, "run_nobody")
		require.NoError(t, err)
		assert.Zero(t, last)
	})

	t.Run("OKInReadTx", func(t *testing.T) {
		appendMany(t, db, j, "run_a", 3)
		require.NoError(t, db.View(ctx, func(tx *index.Tx) error {
			last, err := j.Last(ctx, tx, "run_a")
			assert.EqualValues(t, 3, last)
			return err
		}))
	})

	t.Run("ErrEmptyRunID", func(t *testing.T) {
		_, err := j.Last(ctx, nil, "")
		assert.Equal(t, wserr.InvalidArgument, wserr.CodeOf(err), "%v", err)
	})
}

func TestConcurrentRuns(t *testing.T) {
	ctx := context.Background()
	db, j, _ := newJournal(t)
	const runs, perRun = 8, 200
	var wg sync.WaitGroup
	errs := make(chan error, runs)
	for r := range runs {
		runID := fmt.Sprintf("run_%d", r)
		wg.Go(func() {
			for i := range perRun {
				err := db.Update(ctx, func(tx *index.Tx) error {
					_, err := j.Append(ctx, tx, runID, journal.ToolCallRequested, journal.Debug, map[string]int{"i": i})
					return err
				})
				if err != nil {
					errs <- fmt.Errorf("%s append %d: %w", runID, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}
	for r := range runs {
		runID := fmt.Sprintf("run_%d", r)
		events := all(t, j, runID)
		assert.Equal(t, seqRange(1, perRun), seqs(events), runID)
		for _, e := range events {
			// Each goroutine appends in order, so its i is seq-1: no event
			// of one run landed in another's journal.
			assert.JSONEq(t, fmt.Sprintf(`{"i":%d}`, e.Seq-1), string(e.Payload))
		}
	}
}

func TestDeleteRun(t *testing.T) {
	ctx := context.Background()
	db, j, _ := newJournal(t)
	appendMany(t, db, j, "run_a", 7)
	keepB := appendMany(t, db, j, "run_b", 3)
	keepPrefix := appendMany(t, db, j, "run_a0", 2)

	deleteRun := func(runID string) (int64, error) {
		var n int64
		err := db.Update(ctx, func(tx *index.Tx) error {
			var err error
			n, err = j.DeleteRun(ctx, tx, runID)
			return err
		})
		return n, err
	}

	t.Run("OKRemovesOnlyThatRun", func(t *testing.T) {
		n, err := deleteRun("run_a")
		require.NoError(t, err)
		assert.EqualValues(t, 7, n)
		assert.Empty(t, all(t, j, "run_a"))
		assert.Equal(t, keepB, all(t, j, "run_b"))
		assert.Equal(t, keepPrefix, all(t, j, "run_a0"))
	})

	t.Run("OKUnknownRunDeletesNothing", func(t *testing.T) {
		n, err := deleteRun("run_nobody")
		require.NoError(t, err)
		assert.Zero(t, n)
	})

	t.Run("OKDeletedRunStartsAgainAtOne", func(t *testing.T) {
		assert.EqualValues(t, 1, appendOne(t, db, j, "run_a", journal.RunCreated, nil).Seq)
	})

	t.Run("OKRolledBackDeleteKeepsEvents", func(t *testing.T) {
		errAbort := errors.New("abort")
		err := db.Update(ctx, func(tx *index.Tx) error {
			n, err := j.DeleteRun(ctx, tx, "run_b")
			require.NoError(t, err)
			assert.EqualValues(t, 3, n)
			return errAbort
		})
		require.ErrorIs(t, err, errAbort)
		assert.Equal(t, keepB, all(t, j, "run_b"))
	})

	t.Run("ErrNilTx", func(t *testing.T) {
		_, err := j.DeleteRun(ctx, nil, "run_b")
		assert.Equal(t, wserr.Internal, wserr.CodeOf(err), "%v", err)
	})

	t.Run("ErrReadOnlyTx", func(t *testing.T) {
		err := db.View(ctx, func(tx *index.Tx) error {
			_, err := j.DeleteRun(ctx, tx, "run_b")
			return err
		})
		assert.Equal(t, wserr.ReadOnly, wserr.CodeOf(err), "%v", err)
	})

	t.Run("ErrEmptyRunID", func(t *testing.T) {
		_, err := deleteRun("")
		assert.Equal(t, wserr.InvalidArgument, wserr.CodeOf(err), "%v", err)
	})

	assert.Equal(t, keepB, all(t, j, "run_b"))
}
