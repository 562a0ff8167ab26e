package runs_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/checkpoint"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

func TestRecords(t *testing.T) {
	e := newWSEnv(t, runs.Options{})
	r := e.newRun("run_rec", runs.CreateRequest{})
	ctx := e.ctx

	_, err := e.svc.RecordContext(ctx, r.ID, runs.ContextRecord{Sources: []journal.ContextSource{{Name: "prompt_snapshot", Bytes: 120}}, Messages: 4})
	require.NoError(t, err)
	_, err = e.svc.RecordModelRequest(ctx, r.ID, runs.ModelRequestRecord{Round: 1, Model: "m"})
	require.NoError(t, err)
	resp := json.RawMessage(`{"choices": [ {"message": {"tool_calls": 1}} ]}`)
	rec, err := e.svc.RecordModelResponse(ctx, r.ID, runs.ModelResponseRecord{Round: 1, Response: resp, ToolCallIDs: []string{"call_1"}})
	require.NoError(t, err)
	assert.Equal(t, "model-responses/round-001.json", rec.Path.String())
	assert.Equal(t, cas.Sum(resp), rec.Hash)
	args := json.RawMessage(`{"path":"output/main.md",  "content":"x"}`)
	_, err = e.svc.RecordToolCall(ctx, r.ID, runs.ToolCallRecord{ID: "call_1", Name: "workspace.write", Round: 1, Args: args})
	require.NoError(t, err)
	e.write(r.ID, "output/main.md", "x")
	_, err = e.svc.RecordToolResult(ctx, r.ID, runs.ToolResultRecord{ID: "call_1", Name: "workspace.write", Result: json.RawMessage(`{"ok":true}`)})
	require.NoError(t, err)

	t.Run("HostReadsTheBytesSent", func(t *testing.T) {
		assert.Equal(t, string(resp), e.read(e.host(r.ID), "model-responses/round-001.json"))
		assert.Equal(t, string(args), e.read(e.host(r.ID), "tool-args/call_1.json"))
		assert.Equal(t, `{"ok":true}`, e.read(e.host(r.ID), "tool-results/call_1.json"))
		ls, err := e.host(r.ID).List(ctx, vfs.Root(), 2)
		require.NoError(t, err)
		var paths []string
		for _, fi := range ls {
			paths = append(paths, fi.Path.String())
		}
		assert.Subset(t, paths, []string{"tool-args", "tool-args/call_1.json", "tool-results/call_1.json", "model-responses/round-001.json", "output/main.md"})
	})

	t.Run("ModelSeesNone", func(t *testing.T) {
		for _, p := range []string{"tool-args/call_1.json", "tool-results/call_1.json", "model-responses/round-001.json", "manifest.json", "checkpoints/cp_000001/checkpoint.json"} {
			_, err := e.model(r.ID).Read(ctx, vfs.MustPath(p), vfs.ReadOptions{})
			requireModelError(t, err, wserr.PathNotVisible)
			_, err = e.model(r.ID).Write(ctx, vfs.MustPath(p), []byte("x"), vfs.WriteOptions{})
			requireModelError(t, err, wserr.PathNotVisible)
			_, err = e.host(r.ID).Write(ctx, vfs.MustPath(p), []byte("x"), vfs.WriteOptions{})
			requireModelError(t, err, wserr.PathNotWritable)
		}
		ls, err := e.model(r.ID).List(ctx, vfs.Root(), 3)
		require.NoError(t, err)
		for _, fi := range ls {
			assert.NotContains(t, runs.ReservedRoots, fi.Path.Top())
		}
	})

	t.Run("ManifestAndCheckpointFiles", func(t *testing.T) {
		var m runs.Manifest
		require.NoError(t, json.Unmarshal([]byte(e.read(e.host(r.ID), "manifest.json")), &m))
		assert.Equal(t, runs.DefaultManifest(), m)
		want, err := e.st.Checkpoints.View(ctx, r.ID, 2)
		require.NoError(t, err)
		var got checkpoint.View
		require.NoError(t, json.Unmarshal([]byte(e.read(e.host(r.ID), "checkpoints/cp_000002/checkpoint.json")), &got))
		assert.Equal(t, want, got)
		assert.Equal(t, "x", e.read(e.host(r.ID), "checkpoints/cp_000002/output/main.md"))
		ls, err := e.host(r.ID).List(ctx, vfs.MustPath("checkpoints/cp_000002"), 0)
		require.NoError(t, err)
		require.NotEmpty(t, ls)
		assert.Equal(t, "checkpoints/cp_000002/checkpoint.json", ls[0].Path.String())
		_, err = e.host(r.ID).Read(ctx, vfs.MustPath("checkpoints/cp_000099/checkpoint.json"), vfs.ReadOptions{})
		requireHostError(t, err, wserr.CheckpointNotFound)
	})

	t.Run("MissingFileInACheckpointIsNamedInFull", func(t *testing.T) {
		// A file missing from a checkpoint's files is named as the host
		// named it, not as the live path it would be without the prefix.
		for _, p := range []string{"checkpoints/cp_000002/output/none.md", "checkpoints/cp_000002/output/main.md/x", "checkpoints/cp_000002/none"} {
			_, err := e.host(r.ID).Read(ctx, vfs.MustPath(p), vfs.ReadOptions{})
			assert.Equal(t, wserr.FileNotFound, wserr.CodeOf(err), "read %s: %v", p, err)
			assert.Contains(t, err.Error(), p, "read")
			_, err = e.host(r.ID).Stat(ctx, vfs.MustPath(p))
			assert.Contains(t, err.Error(), p, "stat")
			_, err = e.host(r.ID).List(ctx, vfs.MustPath(p), 0)
			assert.Equal(t, wserr.FileNotFound, wserr.CodeOf(err), "list %s: %v", p, err)
			assert.Contains(t, err.Error(), p, "list")
		}
	})

	t.Run("NoneAtACheckpoint", func(t *testing.T) {
		// Records, the manifest and the checkpoints are not versioned: a
		// checkpoint view holds none of them rather than the live ones.
		at := e.svc.WorkspaceAt(r.ID, 1, runs.HostScope)
		for _, p := range []string{"tool-args/call_1.json", "manifest.json", "checkpoints/cp_000002/checkpoint.json", "checkpoints/cp_000002/output/main.md"} {
			_, err := at.Read(ctx, vfs.MustPath(p), vfs.ReadOptions{})
			assert.Equal(t, wserr.FileNotFound, wserr.CodeOf(err), "%s: %v", p, err)
		}
		_, err := at.List(ctx, vfs.MustPath("checkpoints/cp_000002"), 0)
		assert.Equal(t, wserr.FileNotFound, wserr.CodeOf(err), "error: %v", err)
		ls, err := at.List(ctx, vfs.Root(), 2)
		require.NoError(t, err)
		for _, fi := range ls {
			assert.NotContains(t, []string{"tool-args", "tool-results", "model-responses", "checkpoints", "manifest.json"}, fi.Path.Top(), fi.Path.String())
		}
	})

	t.Run("RollbackKeepsRecords", func(t *testing.T) {
		_, err := e.svc.Rollback(ctx, r.ID, 1, runs.RollbackOptions{})
		require.NoError(t, err)
		assert.Equal(t, string(args), e.read(e.host(r.ID), "tool-args/call_1.json"))
	})

	t.Run("ErrRefusedWritesNothing", func(t *testing.T) {
		before := e.state(r.ID)
		for name, fn := range map[string]func() error{
			"DuplicateCall": func() error {
				_, err := e.svc.RecordToolCall(ctx, r.ID, runs.ToolCallRecord{ID: "call_1", Name: "t", Args: json.RawMessage(`{}`)})
				return err
			},
			"ResultWithoutCall": func() error {
				_, err := e.svc.RecordToolResult(ctx, r.ID, runs.ToolResultRecord{ID: "call_9", Result: json.RawMessage(`{}`)})
				return err
			},
			"SecondResult": func() error {
				_, err := e.svc.RecordToolResult(ctx, r.ID, runs.ToolResultRecord{ID: "call_1", Result: json.RawMessage(`{}`)})
				return err
			},
			"BadID": func() error {
				_, err := e.svc.RecordToolCall(ctx, r.ID, runs.ToolCallRecord{ID: "../x", Name: "t", Args: json.RawMessage(`{}`)})
				return err
			},
			"ArgsNotJSON": func() error {
				_, err := e.svc.RecordToolCall(ctx, r.ID, runs.ToolCallRecord{ID: "c", Name: "t", Args: json.RawMessage(`{`)})
				return err
			},
			"RoundAnswered": func() error {
				_, err := e.svc.RecordModelResponse(ctx, r.ID, runs.ModelResponseRecord{Round: 1, Response: json.RawMessage(`{}`)})
				return err
			},
			"RoundZero": func() error {
				_, err := e.svc.RecordModelRequest(ctx, r.ID, runs.ModelRequestRecord{})
				return err
			},
		} {
			requireModelError(t, fnErr(fn), wserr.InvalidArgument)
			assert.Equal(t, before, e.state(r.ID), name)
		}
	})

	t.Run("ErrRunNotActive", func(t *testing.T) {
		_, err := e.svc.RecordToolCall(ctx, "run_missing", runs.ToolCallRecord{ID: "c", Name: "t", Args: json.RawMessage(`{}`)})
		requireHostError(t, err, wserr.RunNotFound)
		_, err = e.svc.Finish(ctx, r.ID)
		require.NoError(t, err)
		before := e.state(r.ID)
		_, err = e.svc.RecordToolCall(ctx, r.ID, runs.ToolCallRecord{ID: "c2", Name: "t", Args: json.RawMessage(`{}`)})
		requireHostError(t, err, wserr.InvalidState)
		_, err = e.svc.RecordContext(ctx, r.ID, runs.ContextRecord{})
		requireHostError(t, err, wserr.InvalidState)
		assert.Equal(t, before, e.state(r.ID))
	})
}

func fnErr(fn func() error) error { return fn() }

// TestRecordsRefuseNegativeCounts: a tool call's round, a context's
// counts and a response's token counts are never negative; such a record
// is refused and writes nothing.
func TestRecordsRefuseNegativeCounts(t *testing.T) {
	e := newLifecycleEnv(t)
	r := e.create("c1", runs.CreateRequest{})
	before := rowCounts(e)
	_, err := e.svc.RecordToolCall(e.ctx, r.ID, runs.ToolCallRecord{ID: "call_1", Name: "workspace.read", Round: -1, Args: json.RawMessage(`{}`)})
	assert.True(t, wserr.Is(err, wserr.InvalidArgument), "%v", err)
	_, err = e.svc.RecordContext(e.ctx, r.ID, runs.ContextRecord{Tokens: -5})
	assert.True(t, wserr.Is(err, wserr.InvalidArgument), "%v", err)
	_, err = e.svc.RecordContext(e.ctx, r.ID, runs.ContextRecord{Sources: []journal.ContextSource{{Name: "history", Bytes: -1}}})
	assert.True(t, wserr.Is(err, wserr.InvalidArgument), "%v", err)
	_, err = e.svc.RecordModelResponse(e.ctx, r.ID, runs.ModelResponseRecord{Round: 1, Response: json.RawMessage(`{}`), InputTokens: -1})
	assert.True(t, wserr.Is(err, wserr.InvalidArgument), "%v", err)
	assert.Equal(t, before, rowCounts(e), "a refused record writes nothing")
}

// TestRecordNamesAreBounded: a name a record journals (the model, a
// tool's name, a finish reason, an error's code, a context source, a tool
// call id a response names) of more than MaxRecordNameBytes is refused,
// writing nothing; one of that many bytes is recorded.
func TestRecordNamesAreBounded(t *testing.T) {
	e := newLifecycleEnv(t)
	r := e.create("c1", runs.CreateRequest{})
	long := strings.Repeat("m", runs.MaxRecordNameBytes+1)
	fits := long[1:]
	args := json.RawMessage(`{}`)
	_, err := e.svc.RecordToolCall(e.ctx, r.ID, runs.ToolCallRecord{ID: "call_0", Name: "read", Args: args})
	require.NoError(t, err)
	before := rowCounts(e)
	for what, record := range map[string]func(name string) error{
		"model": func(name string) error {
			_, err := e.svc.RecordModelRequest(e.ctx, r.ID, runs.ModelRequestRecord{Round: 1, Model: name})
			return err
		},
		"tool name": func(name string) error {
			_, err := e.svc.RecordToolCall(e.ctx, r.ID, runs.ToolCallRecord{ID: "call_1", Name: name, Args: args})
			return err
		},
		"result's tool name": func(name string) error {
			_, err := e.svc.RecordToolResult(e.ctx, r.ID, runs.ToolResultRecord{ID: "call_0", Name: name, Result: args})
			return err
		},
		"error code": func(name string) error {
			_, err := e.svc.RecordToolResult(e.ctx, r.ID, runs.ToolResultRecord{ID: "call_0", Result: args, Error: &runs.ToolError{Code: name}})
			return err
		},
		"finish reason": func(name string) error {
			_, err := e.svc.RecordModelResponse(e.ctx, r.ID, runs.ModelResponseRecord{Round: 1, Response: args, FinishReason: name})
			return err
		},
		"tool call id": func(name string) error {
			_, err := e.svc.RecordModelResponse(e.ctx, r.ID, runs.ModelResponseRecord{Round: 1, Response: args, ToolCallIDs: []string{"call_0", name}})
			return err
		},
		"context source": func(name string) error {
			_, err := e.svc.RecordContext(e.ctx, r.ID, runs.ContextRecord{Sources: []journal.ContextSource{{Name: name}}})
			return err
		},
	} {
		err := record(long)
		assert.True(t, wserr.Is(err, wserr.InvalidArgument), "%s: %v", what, err)
		assert.Equal(t, before, rowCounts(e), "%s: a refused record writes nothing", what)
	}
	_, err = e.svc.RecordModelRequest(e.ctx, r.ID, runs.ModelRequestRecord{Round: 1, Model: fits})
	require.NoError(t, err, "a model of MaxRecordNameBytes")
	_, err = e.svc.RecordModelResponse(e.ctx, r.ID, runs.ModelResponseRecord{Round: 1, Response: args, FinishReason: fits, ToolCallIDs: []string{fits}})
	require.NoError(t, err, "a finish reason and an id of MaxRecordNameBytes")
	_, err = e.svc.RecordToolResult(e.ctx, r.ID, runs.ToolResultRecord{ID: "call_0", Name: fits, Result: args, Error: &runs.ToolError{Code: fits}})
	require.NoError(t, err, "a tool name and a code of MaxRecordNameBytes")
}

// TestToolCallIDsNameTheirRule: a tool call id of the allowed form whose
// record no file may be called (a Windows device name) is refused saying
// why, not with the form it has.
func TestToolCallIDsNameTheirRule(t *testing.T) {
	e := newLifecycleEnv(t)
	r := e.create("c1", runs.CreateRequest{})
	before := rowCounts(e)
	_, err := e.svc.RecordToolCall(e.ctx, r.ID, runs.ToolCallRecord{ID: "CON", Name: "t", Args: json.RawMessage(`{}`)})
	require.True(t, wserr.Is(err, wserr.InvalidArgument), "%v", err)
	assert.NotContains(t, wserr.MessageOf(err), "must be 1-128 letters")
	assert.Contains(t, wserr.MessageOf(err), "CON.json")
	_, err = e.svc.RecordToolCall(e.ctx, r.ID, runs.ToolCallRecord{ID: "-x", Name: "t", Args: json.RawMessage(`{}`)})
	require.True(t, wserr.Is(err, wserr.InvalidArgument), "%v", err)
	assert.Contains(t, wserr.MessageOf(err), "must be 1-128 letters")
	assert.Equal(t, before, rowCounts(e), "a refused record writes nothing")
}

// TestStatusOfAMissingRun: a status change of a run that does not exist
// is run.not_found, whatever the status asked, completed included.
func TestStatusOfAMissingRun(t *testing.T) {
	e := newLifecycleEnv(t)
	for _, to := range []runs.Status{runs.Completed, runs.Failed, runs.Paused} {
		err := e.svc.SetStatus(e.ctx, "ghost", to, "")
		assert.True(t, wserr.Is(err, wserr.RunNotFound), "%s: %v", to, err)
	}
	r := e.create("c1", runs.CreateRequest{})
	err := e.svc.SetStatus(e.ctx, r.ID, runs.Completed, "")
	assert.True(t, wserr.Is(err, wserr.InvalidState), "only Finish completes a run: %v", err)
}

// TestStatusReasonIsBounded: a status change is never refused for the
// store's cap, so its journaled reason is bounded: a longer one is
// refused and changes nothing.
func TestStatusReasonIsBounded(t *testing.T) {
	e := newLifecycleEnv(t)
	r := e.create("c1", runs.CreateRequest{})
	before := rowCounts(e)
	err := e.svc.SetStatus(e.ctx, r.ID, runs.Paused, strings.Repeat("x", runs.MaxStatusReasonBytes+1))
	require.True(t, wserr.Is(err, wserr.InvalidArgument), "%v", err)
	assert.Equal(t, before, rowCounts(e), "a refused status change writes nothing")
	got, err := e.svc.Run(e.ctx, r.ID)
	require.NoError(t, err)
	assert.Equal(t, runs.Running, got.Status)
	require.NoError(t, e.svc.SetStatus(e.ctx, r.ID, runs.Paused, strings.Repeat("x", runs.MaxStatusReasonBytes)))
}

// TestWritableFollowsTheRunStatus: a file says it is writable only while
// a write of it may succeed: not while the run is paused, nor once it
// ended.
func TestWritableFollowsTheRunStatus(t *testing.T) {
	e := newLifecycleEnv(t)
	r := e.create("c1", runs.CreateRequest{})
	e.write(r.ID, "output/main.md", "hello")
	ws := e.svc.Workspace(r.ID, runs.ModelScope)
	stat := func() vfs.FileInfo {
		fi, err := ws.Stat(e.ctx, vfs.MustPath("output/main.md"))
		require.NoError(t, err)
		return fi
	}
	assert.True(t, stat().Writable)
	require.NoError(t, e.svc.SetStatus(e.ctx, r.ID, runs.Paused, "wait"))
	assert.False(t, stat().Writable, "paused")
	_, err := ws.Write(e.ctx, vfs.MustPath("output/main.md"), []byte("x"), vfs.WriteOptions{})
	assert.Error(t, err)
	require.NoError(t, e.svc.SetStatus(e.ctx, r.ID, runs.Running, ""))
	assert.True(t, stat().Writable)
	_, err = e.svc.Finish(e.ctx, r.ID)
	require.NoError(t, err)
	assert.False(t, stat().Writable, "completed")
}

// TestToolResultNameAsGiven: a result journals the name its host gives,
// and none when it gives none (not an empty one).
func TestToolResultNameAsGiven(t *testing.T) {
	e := newWSEnv(t, runs.Options{})
	r := e.newRun("run_names", runs.CreateRequest{})
	for _, id := range []string{"call_1", "call_2"} {
		_, err := e.svc.RecordToolCall(e.ctx, r.ID, runs.ToolCallRecord{ID: id, Name: "workspace.write", Round: 1, Args: json.RawMessage(`{}`)})
		require.NoError(t, err)
	}
	_, err := e.svc.RecordToolResult(e.ctx, r.ID, runs.ToolResultRecord{ID: "call_1", Result: json.RawMessage(`{"ok":true}`)})
	require.NoError(t, err)
	_, err = e.svc.RecordToolResult(e.ctx, r.ID, runs.ToolResultRecord{ID: "call_2", Name: "workspace.write", Result: json.RawMessage(`{"ok":true}`)})
	require.NoError(t, err)
	evs, err := e.st.Journal.Page(e.ctx, r.ID, journal.PageQuery{Limit: 500})
	require.NoError(t, err)
	names := map[string]any{}
	for _, ev := range evs {
		if ev.Type == journal.ToolCallCompleted {
			var pl map[string]any
			require.NoError(t, json.Unmarshal(ev.Payload, &pl))
			name, ok := pl["name"]
			if !ok {
				name = "(none)"
			}
			names[pl["toolCallId"].(string)] = name
		}
	}
	assert.Equal(t, map[string]any{"call_1": "(none)", "call_2": "workspace.write"}, names)
}

// TestRecordsAnArchiveCannotHoldAreRefused: a record whose event would
// not fit the row an archive holds (64 MiB; a failed call's error message of U+2028, which
// JSON escapes in six bytes, doubles in the journal) is refused and
// writes nothing, so the store stays exportable.
func TestRecordsAnArchiveCannotHoldAreRefused(t *testing.T) {
	e := newLifecycleEnv(t)
	r := e.create("c1", runs.CreateRequest{})
	_, err := e.svc.RecordToolCall(e.ctx, r.ID, runs.ToolCallRecord{ID: "call_1", Name: "read", Args: json.RawMessage(`{}`)})
	require.NoError(t, err)
	before := rowCounts(e)
	message := strings.Repeat("\u2028", journal.MaxPayloadBytes/6+1)
	_, err = e.svc.RecordToolResult(e.ctx, r.ID, runs.ToolResultRecord{ID: "call_1", Result: json.RawMessage(`{}`),
		Error: &runs.ToolError{Code: "failed", Message: message}})
	require.True(t, wserr.Is(err, wserr.SizeLimitExceeded), "%v", err)
	assert.Equal(t, before, rowCounts(e), "a refused record writes nothing")
}

// damagedTrees is a tree store whose lookups below dir fail with
// store.corrupt, as a records tree whose rows were damaged reads.
type damagedTrees struct {
	runs.Trees
	dir string
}

func (d damagedTrees) Lookup(ctx context.Context, tx *index.Tx, root cas.Hash, p vfs.Path) (vfs.Entry, error) {
	if p.Top() == d.dir {
		return vfs.Entry{}, wserr.New(wserr.Corrupt, "lookup", p.String(), "damaged tree")
	}
	return d.Trees.Lookup(ctx, tx, root, p)
}

// TestRecordsOverADamagedTreeFailWithItsError: a record that cannot read
// the run's records tree fails with the store's error, never a
// model-correctable one, and writes nothing.
func TestRecordsOverADamagedTreeFailWithItsError(t *testing.T) {
	e := newWSEnv(t, runs.Options{})
	r := e.newRun("run_rec", runs.CreateRequest{})
	_, err := e.svc.RecordToolCall(e.ctx, r.ID, runs.ToolCallRecord{ID: "call_1", Name: "workspace.read", Args: json.RawMessage(`{}`)})
	require.NoError(t, err)
	_, err = e.svc.RecordModelResponse(e.ctx, r.ID, runs.ModelResponseRecord{Round: 1, Response: json.RawMessage(`{}`)})
	require.NoError(t, err)

	for _, tt := range []struct {
		name, dir string
		record    func(svc *runs.Service) error
	}{
		{"ToolResult", runs.ToolArgsRoot, func(svc *runs.Service) error {
			_, err := svc.RecordToolResult(e.ctx, r.ID, runs.ToolResultRecord{ID: "call_1", Result: json.RawMessage(`{}`)})
			return err
		}},
		{"ToolCall", runs.ToolArgsRoot, func(svc *runs.Service) error {
			_, err := svc.RecordToolCall(e.ctx, r.ID, runs.ToolCallRecord{ID: "call_2", Name: "workspace.read", Args: json.RawMessage(`{}`)})
			return err
		}},
		{"ModelRequest", runs.ModelResponsesRoot, func(svc *runs.Service) error {
			_, err := svc.RecordModelRequest(e.ctx, r.ID, runs.ModelRequestRecord{Round: 2})
			return err
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := deps(e.st)
			d.Trees = damagedTrees{Trees: d.Trees, dir: tt.dir}
			svc := runs.New(d, runs.Options{Now: e.clock.Now})
			before, err := e.svc.Run(e.ctx, r.ID)
			require.NoError(t, err)
			err = tt.record(svc)
			assert.Equal(t, wserr.Corrupt, wserr.CodeOf(err), "%v", err)
			after, err := e.svc.Run(e.ctx, r.ID)
			require.NoError(t, err)
			assert.Equal(t, before.UpdatedAt, after.UpdatedAt, "nothing written")
		})
	}
}

// TestRecordsRefuseWhatTheyCannotMean: a negative count or a context
// source without a name is refused with workspace.invalid_argument, as
// the other records' counts are, and journals nothing.
func TestRecordsRefuseWhatTheyCannotMean(t *testing.T) {
	e := newWSEnv(t, runs.Options{})
	r := e.newRun("run_rec", runs.CreateRequest{})
	last := func() int64 {
		evs, err := e.st.Journal.Page(e.ctx, r.ID, journal.PageQuery{BeforeSeq: 1 << 40, Limit: 1})
		require.NoError(t, err)
		return evs[0].Seq
	}
	before := last()
	for name, record := range map[string]func() error{
		"ErrNegativeMessages": func() error {
			_, err := e.svc.RecordModelRequest(e.ctx, r.ID, runs.ModelRequestRecord{Round: 1, Messages: -1})
			return err
		},
		"ErrNegativeTools": func() error {
			_, err := e.svc.RecordModelRequest(e.ctx, r.ID, runs.ModelRequestRecord{Round: 1, Tools: -2})
			return err
		},
		"ErrNamelessSource": func() error {
			_, err := e.svc.RecordContext(e.ctx, r.ID, runs.ContextRecord{Sources: []journal.ContextSource{{Bytes: 10}}})
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, wserr.InvalidArgument, wserr.CodeOf(record()))
			assert.Equal(t, before, last(), "nothing journaled")
		})
	}
}
