package runs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// recordingSink remembers what it was handed and fails while err is set.
type recordingSink struct {
	got []runs.CommitRequest
	err error
}

func (s *recordingSink) Commit(ctx context.Context, req runs.CommitRequest) (json.RawMessage, error) {
	if s.err != nil {
		return nil, s.err
	}
	s.got = append(s.got, req)
	return json.RawMessage(`{"messageId":42}`), nil
}

func seedManifest() runs.Manifest {
	return runs.Manifest{
		WorkspaceVersion: 1,
		Artifacts: []runs.Artifact{
			{ID: "main", Path: "output/main.md", Kind: "body", Target: runs.Target{Kind: runs.TargetMessageBody}, Required: true, AssemblyOrder: 10},
			{ID: "status", Path: "output/status.md", Kind: "status", Target: runs.Target{Kind: runs.TargetMessageExtra, Key: "status_bar"}, AssemblyOrder: 20},
			{ID: "theater", Path: "output/theater.md", Kind: "side_scene", Target: runs.Target{Kind: runs.TargetCombinedMarkdown}, AssemblyOrder: 30},
			{ID: "notes", Path: "plan/notes.md", Kind: "notes", Target: runs.Target{Kind: runs.TargetHidden}, AssemblyOrder: 40},
		},
		CommitPolicy: runs.CommitPolicy{DefaultTarget: runs.TargetMessageBody, CombineTemplate: "{{main}}\n\n---\n\n{{theater}}", StoreArtifactsInExtra: true},
	}
}

func TestManifestJSONMatchesSeed(t *testing.T) {
	seed := `{
  "workspaceVersion": 1,
  "artifacts": [
    {"id": "main", "path": "output/main.md", "kind": "body", "target": "message_body", "required": true, "assemblyOrder": 10},
    {"id": "status", "path": "output/status.md", "kind": "status", "target": { "message_extra": "status_bar" }, "required": false, "assemblyOrder": 20},
    {"id": "theater", "path": "output/theater.md", "kind": "side_scene", "target": "combined_markdown", "required": false, "assemblyOrder": 30}
  ],
  "commitPolicy": {"defaultTarget": "message_body", "combineTemplate": "{{main}}\n\n---\n\n{{theater}}", "storeArtifactsInExtra": true}
}`
	m, err := runs.ParseManifest([]byte(seed))
	require.NoError(t, err)
	assert.Equal(t, runs.Target{Kind: runs.TargetMessageExtra, Key: "status_bar"}, m.Artifacts[1].Target)
	b, err := json.Marshal(m)
	require.NoError(t, err)
	assert.JSONEq(t, seed, string(b))
}

func TestManifestValidation(t *testing.T) {
	mutate := func(f func(m *runs.Manifest)) runs.Manifest {
		m := seedManifest()
		f(&m)
		return m
	}
	cases := map[string]runs.Manifest{
		"ErrUnknownTarget":      mutate(func(m *runs.Manifest) { m.Artifacts[1].Target = runs.Target{Kind: "sidebar"} }),
		"ErrInvalidPath":        mutate(func(m *runs.Manifest) { m.Artifacts[0].Path = "output/../../chat.jsonl" }),
		"ErrAbsolutePath":       mutate(func(m *runs.Manifest) { m.Artifacts[0].Path = "/Users/me/file" }),
		"ErrInputPath":          mutate(func(m *runs.Manifest) { m.Artifacts[0].Path = "input/prompt_snapshot.json" }),
		"ErrScratchPath":        mutate(func(m *runs.Manifest) { m.Artifacts[3].Path = "scratch/notes.md" }),
		"ErrDuplicateID":        mutate(func(m *runs.Manifest) { m.Artifacts[1].ID = "main" }),
		"ErrSharedPath":         mutate(func(m *runs.Manifest) { m.Artifacts[1].Path = "output/main.md" }),
		"ErrExtraWithoutKey":    mutate(func(m *runs.Manifest) { m.Artifacts[1].Target.Key = "" }),
		"ErrTemplateUnknownID":  mutate(func(m *runs.Manifest) { m.CommitPolicy.CombineTemplate = "{{main}} {{nope}}" }),
		"ErrCombinedNoTemplate": mutate(func(m *runs.Manifest) { m.CommitPolicy.CombineTemplate = "" }),
		"ErrBadDefaultTarget":   mutate(func(m *runs.Manifest) { m.CommitPolicy.DefaultTarget = "hidden" }),
		"ErrNoBody":             {WorkspaceVersion: 1, Artifacts: []runs.Artifact{{ID: "x", Path: "output/x.md", Target: runs.Target{Kind: runs.TargetHidden}}}},
		"ErrNoArtifacts":        {WorkspaceVersion: 1},
		"ErrWorkspaceVersion":   mutate(func(m *runs.Manifest) { m.WorkspaceVersion = 2 }),
		"ErrBadArtifactID":      mutate(func(m *runs.Manifest) { m.Artifacts[0].ID = "has space" }),
		// A path below a runtime record's root, which the model's view
		// never holds, so a commit could never read it.
		"ErrToolArgsPath":   mutate(func(m *runs.Manifest) { m.Artifacts[1].Path = "tool-args/call_1.json" }),
		"ErrCheckpointPath": mutate(func(m *runs.Manifest) { m.Artifacts[1].Path = "checkpoints/cp_000001/checkpoint.json" }),
		// The template may not carry a hidden artifact into the message,
		// nor leave a body artifact out of it.
		"ErrTemplateNamesHidden":   mutate(func(m *runs.Manifest) { m.CommitPolicy.CombineTemplate = "{{main}}\n{{theater}}\n{{notes}}" }),
		"ErrTemplateLeavesOutBody": mutate(func(m *runs.Manifest) { m.CommitPolicy.CombineTemplate = "{{theater}}" }),
		// Nor a combined_markdown artifact, whose content would go nowhere.
		"ErrTemplateLeavesOutCombined": mutate(func(m *runs.Manifest) { m.CommitPolicy.CombineTemplate = "{{main}}" }),
		// One message_extra key, one artifact: the second would replace
		// the first.
		"ErrExtraKeyTwice": mutate(func(m *runs.Manifest) {
			m.Artifacts = append(m.Artifacts, runs.Artifact{ID: "status2", Path: "output/status2.md", Target: runs.Target{Kind: runs.TargetMessageExtra, Key: "status_bar"}})
		}),
	}
	for name, m := range cases {
		t.Run(name, func(t *testing.T) {
			err := m.Validate()
			require.Error(t, err)
			assert.True(t, wserr.Is(err, wserr.InvalidManifest), "%v", err)
		})
	}
	t.Run("OK", func(t *testing.T) {
		assert.NoError(t, seedManifest().Validate())
		assert.NoError(t, runs.DefaultManifest().Validate())
	})
	t.Run("ErrUnknownField", func(t *testing.T) {
		_, err := runs.ParseManifest([]byte(`{"workspaceVersion":1,"artifactz":[]}`))
		assert.True(t, wserr.Is(err, wserr.InvalidManifest))
	})
	t.Run("CreateRunFailsFastAndWritesNothing", func(t *testing.T) {
		e := newLifecycleEnv(t)
		bad := cases["ErrUnknownTarget"]
		before := rowCounts(e)
		_, err := e.svc.CreateRun(e.ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "c"}, Manifest: &bad})
		assert.True(t, wserr.Is(err, wserr.InvalidManifest))
		assert.Equal(t, before, rowCounts(e))
	})
}

// TestArtifactWithoutTargetTakesTheDefault: an artifact that names no
// target takes the commit policy's defaultTarget (message_body), whether
// the manifest comes with the run, is set later or is parsed; it is
// stored with it named.
func TestArtifactWithoutTargetTakesTheDefault(t *testing.T) {
	m, err := runs.ParseManifest([]byte(`{"workspaceVersion": 1,
		"artifacts": [{"id": "main", "path": "output/main.md", "required": true}],
		"commitPolicy": {"defaultTarget": "message_body"}}`))
	require.NoError(t, err)
	assert.Equal(t, runs.Target{Kind: runs.TargetMessageBody}, m.Artifacts[0].Target)

	untargeted := runs.Manifest{WorkspaceVersion: 1, Artifacts: []runs.Artifact{{ID: "main", Path: "output/main.md", Required: true}}}
	require.NoError(t, untargeted.Validate())
	e := newLifecycleEnv(t)
	for i, set := range []bool{false, true} {
		req := runs.CreateRequest{}
		if !set {
			req.Manifest = &untargeted
		}
		r := e.create(fmt.Sprint("c", i), req)
		if set {
			require.NoError(t, e.svc.SetManifest(e.ctx, r.ID, untargeted))
		}
		got, err := e.svc.Manifest(e.ctx, r.ID)
		require.NoError(t, err)
		assert.Equal(t, runs.Target{Kind: runs.TargetMessageBody}, got.Artifacts[0].Target, "stored named")
		assert.Equal(t, runs.Target{}, untargeted.Artifacts[0].Target, "the caller's manifest is not changed")
		e.write(r.ID, "output/main.md", "Body")
		sink := &recordingSink{}
		_, err = e.svc.Commit(e.ctx, r.ID, sink, runs.CommitOptions{})
		require.NoError(t, err)
		require.Len(t, sink.got, 1)
		assert.Equal(t, "Body", sink.got[0].Message.Body)
	}
}

func TestCommitAssemblesEveryTarget(t *testing.T) {
	e := newLifecycleEnv(t)
	m := seedManifest()
	r := e.create("c1", runs.CreateRequest{Manifest: &m})
	e.write(r.ID, "output/main.md", "Body")
	e.write(r.ID, "output/status.md", "HP 10")
	e.write(r.ID, "output/theater.md", "Scene")
	e.write(r.ID, "plan/notes.md", "secret")
	sink := &recordingSink{}

	rec, err := e.svc.Commit(e.ctx, r.ID, sink, runs.CommitOptions{})
	require.NoError(t, err)
	require.Len(t, sink.got, 1)
	msg := sink.got[0].Message
	assert.Equal(t, "Body\n\n---\n\nScene", msg.Body)
	assert.Equal(t, map[string]string{"status_bar": "HP 10"}, msg.Extra)
	assert.Equal(t, runs.ModeReplace, sink.got[0].Mode)
	assert.Equal(t, rec.ID, sink.got[0].CommitID)
	assert.Equal(t, r.ID, msg.Agent.RunID)
	assert.Equal(t, "c1", msg.Agent.StableChatID)
	assert.Equal(t, "default", msg.Agent.ProfileID)
	assert.Equal(t, rec.CheckpointID, msg.Agent.CheckpointID)
	assert.Regexp(t, `^artifact_set_[0-9a-f]{12}$`, msg.Agent.ArtifactSetID)
	var ids []string
	for _, a := range msg.Agent.Artifacts {
		ids = append(ids, a.ID)
	}
	assert.Equal(t, []string{"main", "status", "theater"}, ids, "hidden artifacts stay in the run")
	assert.NotContains(t, msg.Agent.Contents, "notes")
	assert.Equal(t, "Scene", msg.Agent.Contents["theater"])
	assert.Equal(t, runs.CommitCompleted, rec.Status)
	assert.JSONEq(t, `{"messageId":42}`, string(rec.Receipt))

	cps, err := e.st.Checkpoints.List(e.ctx, r.ID)
	require.NoError(t, err)
	last := cps[len(cps)-1]
	assert.Equal(t, "before_commit", last.Reason)
	assert.Equal(t, last.ID, rec.CheckpointID)

	evs, err := e.st.Journal.Page(e.ctx, r.ID, journal.PageQuery{AfterSeq: last.EventSeq})
	require.NoError(t, err)
	var types []journal.Type
	for _, ev := range evs {
		types = append(types, ev.Type)
	}
	assert.Equal(t, []journal.Type{journal.ArtifactAssembled, journal.ChatCommitRequested, journal.ChatCommitCompleted}, types)
}

func TestCommitSkipsMissingOptionalArtifacts(t *testing.T) {
	e := newLifecycleEnv(t)
	m := seedManifest()
	r := e.create("c1", runs.CreateRequest{Manifest: &m})
	e.write(r.ID, "output/main.md", "Body")
	sink := &recordingSink{}
	_, err := e.svc.Commit(e.ctx, r.ID, sink, runs.CommitOptions{})
	require.NoError(t, err)
	require.Len(t, sink.got, 1)
	assert.Equal(t, "Body\n\n---\n\n", sink.got[0].Message.Body)
	assert.Empty(t, sink.got[0].Message.Extra)
}

func TestCommitMissingRequiredArtifactFailsAndSinkGetsNothing(t *testing.T) {
	e := newLifecycleEnv(t)
	r := e.create("c1", runs.CreateRequest{})
	e.write(r.ID, "output/other.md", "not the body")
	sink := &recordingSink{}
	before := rowCounts(e)
	_, err := e.svc.Commit(e.ctx, r.ID, sink, runs.CommitOptions{})
	require.Error(t, err)
	assert.True(t, wserr.Is(err, wserr.MissingArtifact), "%v", err)
	assert.Empty(t, sink.got)
	assert.Equal(t, before, rowCounts(e), "a failed assembly records nothing")
}

func TestCommitModes(t *testing.T) {
	e := newLifecycleEnv(t)
	r := e.create("c1", runs.CreateRequest{})
	e.write(r.ID, "output/main.md", "part one")
	e.write(r.ID, "output/part2.md", "part two")
	sink := &recordingSink{}
	_, err := e.svc.Commit(e.ctx, r.ID, sink, runs.CommitOptions{Mode: runs.ModeAppend})
	require.NoError(t, err)
	_, err = e.svc.Commit(e.ctx, r.ID, sink, runs.CommitOptions{Mode: runs.ModeAppend, Path: "output/part2.md"})
	require.NoError(t, err)
	require.Len(t, sink.got, 2)
	assert.Equal(t, runs.ModeAppend, sink.got[1].Mode)
	assert.Equal(t, "part two", sink.got[1].Message.Body)
	assert.NotEqual(t, sink.got[0].CommitID, sink.got[1].CommitID)

	t.Run("ErrBadMode", func(t *testing.T) {
		_, err := e.svc.Commit(e.ctx, r.ID, sink, runs.CommitOptions{Mode: "merge"})
		assert.True(t, wserr.Is(err, wserr.InvalidArgument))
	})
}

func TestCommitSinkFailureLeavesRunAbleToRetry(t *testing.T) {
	e := newLifecycleEnv(t)
	r := e.create("c1", runs.CreateRequest{})
	e.write(r.ID, "output/main.md", "Body")
	sink := &recordingSink{err: errors.New("chat save queue busy")}
	rec, err := e.svc.Commit(e.ctx, r.ID, sink, runs.CommitOptions{})
	require.Error(t, err)
	assert.True(t, wserr.Is(err, wserr.SinkFailed))
	assert.False(t, wserr.CodeOf(err).ModelCorrectable())
	assert.Equal(t, runs.CommitFailed, rec.Status)
	got, err := e.svc.Run(e.ctx, r.ID)
	require.NoError(t, err)
	assert.Equal(t, runs.Running, got.Status)

	t.Run("PanicIsAFailure", func(t *testing.T) {
		_, err := e.svc.Commit(e.ctx, r.ID, runs.SinkFunc(func(context.Context, runs.CommitRequest) (json.RawMessage, error) {
			panic("boom")
		}), runs.CommitOptions{})
		assert.True(t, wserr.Is(err, wserr.SinkFailed))
	})

	sink.err = nil
	rec, err = e.svc.Commit(e.ctx, r.ID, sink, runs.CommitOptions{})
	require.NoError(t, err)
	assert.Equal(t, runs.CommitCompleted, rec.Status)
	commits, err := e.svc.Commits(e.ctx, r.ID)
	require.NoError(t, err)
	var statuses []string
	for _, c := range commits {
		statuses = append(statuses, c.Status)
	}
	assert.Equal(t, []string{runs.CommitFailed, runs.CommitFailed, runs.CommitCompleted}, statuses)
	evs, err := e.st.Journal.Page(e.ctx, r.ID, journal.PageQuery{Limit: 500})
	require.NoError(t, err)
	failed := 0
	for _, ev := range evs {
		if ev.Type == journal.ChatCommitFailed {
			failed++
			assert.Equal(t, journal.Error, ev.Level)
		}
	}
	assert.Equal(t, 2, failed)
}

// TestCommitRetriesKeepTheRunsCheckpoints: retrying a commit whose sink
// fails, with nothing changed in between, names the checkpoint the first
// attempt took, so under a MaxCheckpoints cap the retries do not push the
// run's own checkpoints out; a change in between gets a checkpoint of its
// own.
func TestCommitRetriesKeepTheRunsCheckpoints(t *testing.T) {
	e := newLifecycleEnv(t)
	r := e.create("c1", runs.CreateRequest{Profile: capped(4, true)})
	for _, v := range []string{"v1", "v2", "v3"} {
		e.write(r.ID, "output/main.md", v)
	}
	before := e.checkpointIDs(r.ID)
	sink := &recordingSink{err: errors.New("offline")}
	var named []string
	for range 5 {
		rec, err := e.svc.Commit(e.ctx, r.ID, sink, runs.CommitOptions{})
		require.True(t, wserr.Is(err, wserr.SinkFailed), "%v", err)
		named = append(named, rec.CheckpointID)
	}
	// The first attempt's checkpoint takes the oldest's place, as any
	// checkpoint under the cap does; the retries take none.
	assert.Equal(t, append(before[1:], named[0]), e.checkpointIDs(r.ID), "one before_commit checkpoint for five attempts")
	for _, id := range named {
		assert.Equal(t, named[0], id)
	}
	_, err := e.svc.Rollback(e.ctx, r.ID, 3, runs.RollbackOptions{})
	require.NoError(t, err, "the run's checkpoint of v2 is still there")
	assert.Equal(t, "v2", e.read(e.svc.Workspace(r.ID, runs.HostScope), "output/main.md"))

	e.write(r.ID, "output/main.md", "v4")
	sink.err = nil
	rec, err := e.svc.Commit(e.ctx, r.ID, sink, runs.CommitOptions{})
	require.NoError(t, err)
	assert.NotEqual(t, named[0], rec.CheckpointID, "a changed workspace is committed from a checkpoint of its own")
}

func TestRollbackCommittedMessage(t *testing.T) {
	e := newLifecycleEnv(t)
	r := e.create("c1", runs.CreateRequest{})
	e.write(r.ID, "output/main.md", "first draft")
	sink := &recordingSink{}
	first, err := e.svc.Commit(e.ctx, r.ID, sink, runs.CommitOptions{})
	require.NoError(t, err)
	e.write(r.ID, "output/main.md", "second draft")
	_, err = e.svc.Commit(e.ctx, r.ID, sink, runs.CommitOptions{})
	require.NoError(t, err)
	live, err := e.svc.Run(e.ctx, r.ID)
	require.NoError(t, err)

	seq, err := checkpointSeq(first.CheckpointID)
	require.NoError(t, err)
	rec, err := e.svc.RollbackCommit(e.ctx, r.ID, seq, sink, false)
	require.NoError(t, err)
	require.Len(t, sink.got, 3)
	assert.Equal(t, runs.ModeReplace, sink.got[2].Mode)
	assert.Equal(t, "first draft", sink.got[2].Message.Body)
	assert.Equal(t, "rollback", rec.Kind)
	after, err := e.svc.Run(e.ctx, r.ID)
	require.NoError(t, err)
	assert.Equal(t, live.Root, after.Root, "rolling back the message leaves the workspace alone")

	_, err = e.svc.RollbackCommit(e.ctx, r.ID, seq, sink, true)
	require.NoError(t, err)
	assert.Equal(t, runs.ModeDelete, sink.got[3].Mode)

	evs, err := e.st.Journal.Page(e.ctx, r.ID, journal.PageQuery{Limit: 500})
	require.NoError(t, err)
	n := 0
	for _, ev := range evs {
		if ev.Type == journal.CommitRolledBack {
			n++
		}
	}
	assert.Equal(t, 2, n)

	t.Run("ErrNothingCommitted", func(t *testing.T) {
		r2 := e.create("c2", runs.CreateRequest{})
		_, err := e.svc.RollbackCommit(e.ctx, r2.ID, 1, sink, false)
		assert.True(t, wserr.Is(err, wserr.InvalidState))
	})
}

// TestCommitKeepsAReceiptThatIsNotJSON: the sink has acted whatever its
// receipt says, so one that is not JSON is kept as a JSON string of its
// bytes, and none as {}.
func TestCommitKeepsAReceiptThatIsNotJSON(t *testing.T) {
	e := newLifecycleEnv(t)
	for receipt, want := range map[string]string{
		`msg-42 saved`: `"msg-42 saved"`,
		`{"id":`:       `"{\"id\":"`,
		``:             `{}`,
		` `:            `{}`,
		`{"id":7}`:     `{"id":7}`,
	} {
		r := e.create("c-"+want, runs.CreateRequest{})
		e.write(r.ID, "output/main.md", "Body")
		sink := runs.SinkFunc(func(context.Context, runs.CommitRequest) (json.RawMessage, error) {
			return json.RawMessage(receipt), nil
		})
		rec, err := e.svc.Commit(e.ctx, r.ID, sink, runs.CommitOptions{})
		require.NoError(t, err)
		assert.Equal(t, runs.CommitCompleted, rec.Status)
		assert.JSONEq(t, want, string(rec.Receipt), "receipt %q", receipt)
	}
}

// TestCommitRefusesAMessagePastItsCap commits messages past
// MaxMessageBytes: a file over it, through the manifest, through a
// template that names a smaller one three times, through StoreArtifactsInExtra
// that keeps the body twice, and a file within it whose JSON is past it.
// Each fails with workspace.size_limit_exceeded, hands the sink nothing
// and records nothing; the large file is not read to find out.
func TestCommitRefusesAMessagePastItsCap(t *testing.T) {
	e := newLifecycleEnv(t)
	body := func(n int) string { return strings.Repeat("The keeper lit the lamp.\n", n/25+1)[:n] }
	big := func() *runs.Manifest {
		return &runs.Manifest{WorkspaceVersion: 1, Artifacts: []runs.Artifact{
			{ID: "main", Path: "output/main.md", Target: runs.Target{Kind: runs.TargetMessageBody}, Required: true},
		}}
	}
	refused := func(name string, r runs.Run, opt runs.CommitOptions) {
		t.Helper()
		sink := &recordingSink{}
		before := rowCounts(e)
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		alloc := ms.TotalAlloc
		_, err := e.svc.Commit(e.ctx, r.ID, sink, opt)
		runtime.ReadMemStats(&ms)
		require.Error(t, err, name)
		assert.True(t, wserr.Is(err, wserr.SizeLimitExceeded), "%s: %v", name, err)
		assert.Contains(t, err.Error(), "commit output/main.md:", "%s: the file that fills the message is named", name)
		assert.Empty(t, sink.got, name)
		assert.Equal(t, before, rowCounts(e), "%s: a refused commit records nothing", name)
		assert.Less(t, ms.TotalAlloc-alloc, uint64(runs.MaxMessageBytes), "%s: refused without reading the files", name)
	}

	r := e.create("c1", runs.CreateRequest{Manifest: big()})
	e.write(r.ID, "output/main.md", body(3*runs.MaxMessageBytes))
	refused("a file past the cap", r, runs.CommitOptions{})
	refused("the file named", r, runs.CommitOptions{Path: "output/main.md"})

	m := big()
	m.CommitPolicy.CombineTemplate = "{{main}}\n{{main}}\n{{main}}"
	r2 := e.create("c2", runs.CreateRequest{Manifest: m})
	e.write(r2.ID, "output/main.md", body(runs.MaxMessageBytes/2))
	refused("a placeholder three times", r2, runs.CommitOptions{})

	m = big()
	m.CommitPolicy.StoreArtifactsInExtra = true
	r3 := e.create("c3", runs.CreateRequest{Manifest: m})
	e.write(r3.ID, "output/main.md", body(runs.MaxMessageBytes*3/4))
	refused("the body kept twice", r3, runs.CommitOptions{})

	// Within the cap as bytes, past it as JSON: every quote escaped.
	r4 := e.create("c4", runs.CreateRequest{Manifest: big()})
	e.write(r4.ID, "output/main.md", strings.Repeat(`"`, runs.MaxMessageBytes*3/4))
	sink := &recordingSink{}
	before := rowCounts(e)
	_, err := e.svc.Commit(e.ctx, r4.ID, sink, runs.CommitOptions{})
	assert.True(t, wserr.Is(err, wserr.SizeLimitExceeded), "%v", err)
	assert.Empty(t, sink.got)
	assert.Equal(t, before, rowCounts(e))

	// A manifest stored before a template had to name every
	// combined_markdown artifact: the one it leaves out is listed, not
	// read, and counts nothing.
	r5 := e.create("c5", runs.CreateRequest{})
	require.NoError(t, e.st.DB.Update(e.ctx, func(tx *index.Tx) error {
		_, err := tx.ExecContext(e.ctx, `UPDATE runs SET manifest = ? WHERE id = ?`, `{"workspaceVersion":1,"artifacts":[`+
			`{"id":"main","path":"output/main.md","target":"message_body","required":true},`+
			`{"id":"side","path":"output/side.md","target":"combined_markdown"}],"commitPolicy":{"combineTemplate":"{{main}}"}}`, r5.ID)
		return err
	}))
	e.write(r5.ID, "output/main.md", "Body")
	e.write(r5.ID, "output/side.md", body(3*runs.MaxMessageBytes))
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	alloc := ms.TotalAlloc
	rec, err := e.svc.Commit(e.ctx, r5.ID, sink, runs.CommitOptions{})
	runtime.ReadMemStats(&ms)
	require.NoError(t, err)
	assert.Equal(t, "Body", rec.Message.Body)
	assert.Len(t, rec.Message.Agent.Artifacts, 2)
	assert.Less(t, ms.TotalAlloc-alloc, uint64(runs.MaxMessageBytes), "the artifact the message leaves out is not read")

	// Within it, the same shapes commit, and text full of the characters
	// HTML escapes.
	e.write(r4.ID, "output/main.md", strings.Repeat(`<a & b>`, runs.MaxMessageBytes/8))
	_, err = e.svc.Commit(e.ctx, r4.ID, sink, runs.CommitOptions{})
	require.NoError(t, err)
	e.write(r2.ID, "output/main.md", body(runs.MaxMessageBytes/4))
	rec, err = e.svc.Commit(e.ctx, r2.ID, sink, runs.CommitOptions{})
	require.NoError(t, err)
	assert.Len(t, rec.Message.Body, 3*(runs.MaxMessageBytes/4)+2)
	e.write(r.ID, "output/main.md", body(runs.MaxMessageBytes*9/10))
	_, err = e.svc.Commit(e.ctx, r.ID, sink, runs.CommitOptions{})
	require.NoError(t, err)

	// Rolling the commit back to the checkpoint of the large file is
	// refused the same way.
	cps, err := e.st.Checkpoints.List(e.ctx, r.ID)
	require.NoError(t, err)
	require.Equal(t, "after_workspace_write", cps[1].Reason)
	before = rowCounts(e)
	_, err = e.svc.RollbackCommit(e.ctx, r.ID, cps[1].Seq, sink, false)
	assert.True(t, wserr.Is(err, wserr.SizeLimitExceeded), "%v", err)
	assert.Equal(t, before, rowCounts(e))
}

// TestCommitsPage pages a run's commits: up to the limit, and ending
// before a commit whose message would take the page's messages past
// MaxMessageBytes, so a page holds about one full message's worth;
// Commits reads every page.
func TestCommitsPage(t *testing.T) {
	e := newLifecycleEnv(t)
	r := e.create("c1", runs.CreateRequest{})
	sink := &recordingSink{}
	for i := range 5 {
		e.write(r.ID, "output/main.md", fmt.Sprintf("%d ", i)+strings.Repeat("x", runs.MaxMessageBytes*2/5))
		_, err := e.svc.Commit(e.ctx, r.ID, sink, runs.CommitOptions{})
		require.NoError(t, err)
	}
	e.write(r.ID, "output/main.md", "short")
	_, err := e.svc.Commit(e.ctx, r.ID, sink, runs.CommitOptions{})
	require.NoError(t, err)

	seqs := func(q runs.CommitQuery) ([]int64, bool) {
		t.Helper()
		page, more, err := e.svc.CommitsPage(e.ctx, r.ID, q)
		require.NoError(t, err)
		var out []int64
		for _, c := range page {
			out = append(out, c.Seq)
			assert.NotEmpty(t, c.Message.Body, "a page carries its messages")
		}
		return out, more
	}
	got, more := seqs(runs.CommitQuery{})
	assert.Equal(t, []int64{1, 2}, got, "two messages of 2/5 of the cap fill a page")
	assert.True(t, more)
	got, more = seqs(runs.CommitQuery{AfterSeq: 4})
	assert.Equal(t, []int64{5, 6}, got)
	assert.False(t, more)
	got, more = seqs(runs.CommitQuery{AfterSeq: 1, Limit: 1})
	assert.Equal(t, []int64{2}, got)
	assert.True(t, more)
	got, more = seqs(runs.CommitQuery{AfterSeq: 4, Limit: 2})
	assert.Equal(t, []int64{5, 6}, got, "exactly the limit left")
	assert.False(t, more)
	got, more = seqs(runs.CommitQuery{AfterSeq: 6})
	assert.Empty(t, got)
	assert.False(t, more)

	// A message stored past the cap (before there was one) is a page of
	// its own.
	require.NoError(t, e.st.DB.Update(e.ctx, func(tx *index.Tx) error {
		_, err := tx.ExecContext(e.ctx, `UPDATE commits SET message = json_object('mes', ?) WHERE run_id = ? AND seq = 5`,
			strings.Repeat("y", runs.MaxMessageBytes+1), r.ID)
		return err
	}))
	got, more = seqs(runs.CommitQuery{AfterSeq: 4})
	assert.Equal(t, []int64{5}, got)
	assert.True(t, more)

	all, err := e.svc.Commits(e.ctx, r.ID)
	require.NoError(t, err)
	assert.Len(t, all, 6)
	_, err = e.svc.Commits(e.ctx, "no-such-run")
	assert.True(t, wserr.Is(err, wserr.RunNotFound), "a run the store does not hold is not one without commits: %v", err)
	none, more, err := e.svc.CommitsPage(e.ctx, r.ID, runs.CommitQuery{AfterSeq: 6})
	require.NoError(t, err)
	assert.NotNil(t, none)
	assert.Empty(t, none, "past the last commit")
	assert.False(t, more)

	for _, q := range []runs.CommitQuery{{AfterSeq: -1}, {Limit: -1}, {Limit: runs.MaxCommitPage + 1}} {
		_, _, err := e.svc.CommitsPage(e.ctx, r.ID, q)
		assert.True(t, wserr.Is(err, wserr.InvalidArgument), "%+v: %v", q, err)
	}
}

// TestCommitNamesArtifactsByTheirWorkspacePath: a manifest may spell an
// artifact's path loosely ("./output/main.md"); the message and the journal
// name the file by its workspace path, as every other record does.
func TestCommitNamesArtifactsByTheirWorkspacePath(t *testing.T) {
	e := newLifecycleEnv(t)
	m := runs.Manifest{WorkspaceVersion: 1, Artifacts: []runs.Artifact{
		{ID: "main", Path: "./output/main.md", Target: runs.Target{Kind: runs.TargetMessageBody}, Required: true},
		{ID: "status", Path: "output//status.md", Target: runs.Target{Kind: runs.TargetMessageExtra, Key: "status_bar"}},
	}}
	r := e.create("c1", runs.CreateRequest{Manifest: &m})
	e.write(r.ID, "output/main.md", "Body")
	e.write(r.ID, "output/status.md", "HP 10")
	sink := &recordingSink{}
	_, err := e.svc.Commit(e.ctx, r.ID, sink, runs.CommitOptions{})
	require.NoError(t, err)
	require.Len(t, sink.got, 1)
	var paths []string
	for _, a := range sink.got[0].Message.Agent.Artifacts {
		paths = append(paths, a.Path)
	}
	assert.Equal(t, []string{"output/main.md", "output/status.md"}, paths)

	e.write(r.ID, "output/main.md", "")
	_, err = e.svc.Workspace(r.ID, runs.ModelScope).Delete(e.ctx, vfs.MustPath("output/main.md"))
	require.NoError(t, err)
	_, err = e.svc.Commit(e.ctx, r.ID, sink, runs.CommitOptions{})
	var we *wserr.Error
	require.ErrorAs(t, err, &we)
	assert.Equal(t, wserr.MissingArtifact, we.Code)
	assert.Equal(t, "output/main.md", we.Path)
}
