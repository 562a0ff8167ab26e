package runs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/wserr"
)

// TestProfileAndManifestFitARow: a run's row holds its profile and its
// manifest whole, and an archive row holds at most 64 MiB, so a profile
// or manifest past 1 MiB as JSON is refused where it is given, nothing
// changed, rather than making the store one no export (or sync) takes.
func TestProfileAndManifestFitARow(t *testing.T) {
	e := newLifecycleEnv(t)
	r := e.create("c1", runs.CreateRequest{})
	longTemplate := func(n int) *runs.Manifest {
		return &runs.Manifest{WorkspaceVersion: 1,
			Artifacts:    []runs.Artifact{{ID: "main", Path: "output/main.md", Target: runs.Target{Kind: runs.TargetMessageBody}, Required: true}},
			CommitPolicy: runs.CommitPolicy{CombineTemplate: "{{main}}" + strings.Repeat("\n", n)}}
	}
	manyRoots := func(n int) *runs.Profile {
		p := runs.Profile{VisibleRoots: []string{"output"}}
		for i := range n {
			p.VisibleRoots = append(p.VisibleRoots, fmt.Sprintf("%0200d", i)) // 203 bytes as JSON
		}
		return &p
	}
	runsBefore, eventsBefore := e.count("runs"), e.count("events")
	manBefore, err := e.svc.Manifest(e.ctx, r.ID)
	require.NoError(t, err)

	t.Run("ErrProfileTooLong", func(t *testing.T) {
		_, err := e.svc.CreateRun(e.ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "c2"}, Profile: manyRoots(runs.MaxProfileBytes/203 + 1)})
		requireModelError(t, err, wserr.InvalidArgument)
		assert.Equal(t, runsBefore, e.count("runs"))
	})
	t.Run("ErrManifestTooLong", func(t *testing.T) {
		// A newline is two bytes as JSON: the limit counts the JSON.
		_, err := e.svc.CreateRun(e.ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "c2"}, Manifest: longTemplate(runs.MaxManifestBytes/2 + 1)})
		require.Equal(t, wserr.InvalidManifest, wserr.CodeOf(err), "%v", err)
		assert.Equal(t, runsBefore, e.count("runs"))

		err = e.svc.SetManifest(e.ctx, r.ID, *longTemplate(runs.MaxManifestBytes/2 + 1))
		require.Equal(t, wserr.InvalidManifest, wserr.CodeOf(err), "%v", err)
		after, err := e.svc.Manifest(e.ctx, r.ID)
		require.NoError(t, err)
		assert.Equal(t, manBefore, after)
		assert.Equal(t, eventsBefore, e.count("events"))
	})
	t.Run("OK", func(t *testing.T) {
		require.NoError(t, e.svc.SetManifest(e.ctx, r.ID, *longTemplate(runs.MaxManifestBytes/2 - 1024)))
		e.create("c3", runs.CreateRequest{Profile: manyRoots(runs.MaxProfileBytes/203 - 64), Manifest: longTemplate(runs.MaxManifestBytes/2 - 1024)})
	})
}

// TestResolveCommitFitsARow: the commit's row holds the receipt and the
// error a host states, so each is held to MaxOutcomeBytes, as JSON and as
// text, refused with workspace.invalid_argument and nothing recorded.
func TestResolveCommitFitsARow(t *testing.T) {
	e := newLifecycleEnv(t)
	gone := e.service(runs.Options{}) // the process that dies while its sink runs
	e.create("c1", runs.CreateRequest{RunID: "run_x"})
	e.write("run_x", "output/main.md", "hello")
	req, _ := e.stuckCommit(gone, "run_x", 0)
	before := e.lastSeq("run_x")
	for name, out := range map[string]runs.CommitOutcome{
		"Receipt": {Status: runs.CommitCompleted, Receipt: json.RawMessage(`"` + strings.Repeat("r", runs.MaxOutcomeBytes) + `"`)},
		"Error":   {Status: runs.CommitFailed, Error: strings.Repeat("e", runs.MaxOutcomeBytes+1)},
	} {
		_, err := e.svc.ResolveCommit(e.ctx, "run_x", req.CommitID, out)
		requireModelError(t, err, wserr.InvalidArgument)
		assert.Equal(t, before, e.lastSeq("run_x"), name)
	}
	rec, err := e.svc.ResolveCommit(e.ctx, "run_x", req.CommitID, runs.CommitOutcome{Status: runs.CommitCompleted,
		Receipt: json.RawMessage(`"` + strings.Repeat("r", runs.MaxOutcomeBytes-2) + `"`)})
	require.NoError(t, err)
	assert.Equal(t, runs.CommitCompleted, rec.Status)
}

// TestSinkOutcomeFitsARow: a sink's receipt and error text are held to
// MaxOutcomeBytes as ResolveCommit's are: a receipt past it records
// nothing and leaves the commit pending, with workspace.invalid_argument,
// for the host to resolve; an error text past it is recorded cut.
func TestSinkOutcomeFitsARow(t *testing.T) {
	e := newLifecycleEnv(t)
	e.create("c1", runs.CreateRequest{RunID: "run_x"})
	e.write("run_x", "output/main.md", "hello")

	big := json.RawMessage(`"` + strings.Repeat("r", runs.MaxOutcomeBytes) + `"`)
	sink := runs.SinkFunc(func(context.Context, runs.CommitRequest) (json.RawMessage, error) { return big, nil })
	rec, err := e.svc.Commit(e.ctx, "run_x", sink, runs.CommitOptions{})
	requireModelError(t, err, wserr.InvalidArgument)
	assert.Equal(t, runs.CommitPending, rec.Status)
	before := e.lastSeq("run_x")
	cs, err := e.svc.Commits(e.ctx, "run_x")
	require.NoError(t, err)
	require.Len(t, cs, 1)
	assert.Equal(t, runs.CommitPending, cs[0].Status)
	assert.JSONEq(t, `{}`, string(cs[0].Receipt))
	rec, err = e.svc.ResolveCommit(e.ctx, "run_x", rec.ID, runs.CommitOutcome{Status: runs.CommitCompleted, Receipt: json.RawMessage(`{"saved":true}`)})
	require.NoError(t, err)
	assert.Equal(t, runs.CommitCompleted, rec.Status)
	assert.Greater(t, e.lastSeq("run_x"), before)

	long := strings.Repeat("é", runs.MaxOutcomeBytes) // two bytes each
	failing := runs.SinkFunc(func(context.Context, runs.CommitRequest) (json.RawMessage, error) { return nil, errors.New(long) })
	rec, err = e.svc.Commit(e.ctx, "run_x", failing, runs.CommitOptions{})
	require.Equal(t, wserr.SinkFailed, wserr.CodeOf(err), "%v", err)
	assert.Contains(t, err.Error(), long, "the caller's error keeps the whole text")
	cs, err = e.svc.Commits(e.ctx, "run_x")
	require.NoError(t, err)
	require.Len(t, cs, 2)
	got := cs[1]
	assert.Equal(t, runs.CommitFailed, got.Status)
	assert.LessOrEqual(t, len(got.Error), runs.MaxOutcomeBytes)
	assert.True(t, utf8.ValidString(got.Error))
	assert.True(t, strings.HasPrefix(got.Error, strings.Repeat("é", 1000)))
	assert.Contains(t, got.Error, fmt.Sprintf("(cut: %d bytes in all)", len(long)))
	assert.Equal(t, got.Error, rec.Error)
}
