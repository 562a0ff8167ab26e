package runs_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/wserr"
)

// TestCommitRefusesWhatCannotEnterTheChat: a commit by path of the file
// the manifest keeps hidden, and a commit whose message would carry bytes
// that are not UTF-8 (by path, or as an artifact the message carries), are
// refused with a model-correctable code, nothing recorded, the sink not
// called; the same binary file as an artifact the message does not carry
// commits.
func TestCommitRefusesWhatCannotEnterTheChat(t *testing.T) {
	e := newLifecycleEnv(t)
	r := e.create("c1", runs.CreateRequest{Profile: &runs.Profile{ID: "wide", VisibleRoots: []string{"output", "plan"}, WritableRoots: []string{"output", "plan"}}})
	require.NoError(t, e.svc.SetManifest(e.ctx, r.ID, seedManifest()))
	e.write(r.ID, "output/main.md", "the answer")
	e.write(r.ID, "plan/notes.md", "PRIVATE PLAN")
	e.write(r.ID, "output/bin.dat", "\xff\xfe\x00bin")
	for _, c := range []struct {
		name, path string
		code       wserr.Code
	}{
		{"ErrHiddenArtifact", "plan/notes.md", wserr.InvalidPath},
		{"ErrBinaryByPath", "output/bin.dat", wserr.InvalidArgument},
	} {
		t.Run(c.name, func(t *testing.T) {
			sink := &recordingSink{}
			before := rowCounts(e)
			_, err := e.svc.Commit(e.ctx, r.ID, sink, runs.CommitOptions{Path: c.path})
			requireModelError(t, err, c.code)
			assert.Empty(t, sink.got)
			assert.Equal(t, before, rowCounts(e))
		})
	}
	t.Run("ErrHiddenArtifactNamedAnotherWay", func(t *testing.T) {
		// The manifest spells the hidden artifact's path another way.
		r2 := e.create("c2", runs.CreateRequest{Profile: &runs.Profile{ID: "wide", VisibleRoots: []string{"output", "plan"}, WritableRoots: []string{"output", "plan"}}})
		m := seedManifest()
		m.Artifacts[3].Path = "./plan//notes.md"
		require.NoError(t, e.svc.SetManifest(e.ctx, r2.ID, m))
		e.write(r2.ID, "output/main.md", "the answer")
		e.write(r2.ID, "plan/notes.md", "PRIVATE PLAN")
		sink := &recordingSink{}
		_, err := e.svc.Commit(e.ctx, r2.ID, sink, runs.CommitOptions{Path: "plan/notes.md"})
		requireModelError(t, err, wserr.InvalidPath)
		assert.Empty(t, sink.got)
	})
	t.Run("ErrBinaryArtifact", func(t *testing.T) {
		e.write(r.ID, "output/status.md", "HP \xc3")
		sink := &recordingSink{}
		before := rowCounts(e)
		_, err := e.svc.Commit(e.ctx, r.ID, sink, runs.CommitOptions{})
		requireModelError(t, err, wserr.InvalidArgument)
		assert.Empty(t, sink.got)
		assert.Equal(t, before, rowCounts(e))
	})
	t.Run("OKBinaryNotCarried", func(t *testing.T) {
		e.write(r.ID, "output/status.md", "HP 10")
		e.write(r.ID, "plan/notes.md", "\xff hidden, never read")
		sink := &recordingSink{}
		_, err := e.svc.Commit(e.ctx, r.ID, sink, runs.CommitOptions{})
		require.NoError(t, err)
		require.Len(t, sink.got, 1)
		assert.Equal(t, "HP 10", sink.got[0].Message.Extra["status_bar"])
	})
}

// TestRollbackCommitAfterADelete: once a rollback deleted the committed
// message there is none to delete again or to replace, until the run
// commits again.
func TestRollbackCommitAfterADelete(t *testing.T) {
	e := newLifecycleEnv(t)
	r := e.create("c1", runs.CreateRequest{})
	e.write(r.ID, "output/main.md", "first")
	sink := &recordingSink{}
	first, err := e.svc.Commit(e.ctx, r.ID, sink, runs.CommitOptions{})
	require.NoError(t, err)
	seq, err := checkpointSeq(first.CheckpointID)
	require.NoError(t, err)
	_, err = e.svc.RollbackCommit(e.ctx, r.ID, seq, sink, true)
	require.NoError(t, err)
	for _, del := range []bool{true, false} {
		before := rowCounts(e)
		_, err = e.svc.RollbackCommit(e.ctx, r.ID, seq, sink, del)
		assert.Equal(t, wserr.InvalidState, wserr.CodeOf(err), "delete %v: %v", del, err)
		assert.Equal(t, before, rowCounts(e))
	}
	assert.Len(t, sink.got, 2)
	e.write(r.ID, "output/main.md", "second")
	_, err = e.svc.Commit(e.ctx, r.ID, sink, runs.CommitOptions{})
	require.NoError(t, err)
	_, err = e.svc.RollbackCommit(e.ctx, r.ID, seq, sink, false)
	require.NoError(t, err, "a new commit leaves a message to replace")
	assert.Equal(t, "first", sink.got[3].Message.Body)
}

// TestManifestWithAnUnwritableRequiredArtifact: a manifest whose required
// artifact lies where the run's profile lets no write go is refused (no
// commit could succeed), nothing changed; an optional one there is not.
func TestManifestWithAnUnwritableRequiredArtifact(t *testing.T) {
	e := newLifecycleEnv(t)
	r := e.create("c1", runs.CreateRequest{Profile: &runs.Profile{ID: "narrow", VisibleRoots: []string{"output", "summaries"}, WritableRoots: []string{"output"}}})
	before, err := e.svc.Manifest(e.ctx, r.ID)
	require.NoError(t, err)
	m := runs.Manifest{WorkspaceVersion: 1, Artifacts: []runs.Artifact{
		{ID: "main", Path: "output/main.md", Target: runs.Target{Kind: runs.TargetMessageBody}, Required: true},
		{ID: "sum", Path: "summaries/s.md", Target: runs.Target{Kind: runs.TargetMessageExtra, Key: "summary"}, Required: true},
	}}
	err = e.svc.SetManifest(e.ctx, r.ID, m)
	require.Equal(t, wserr.InvalidManifest, wserr.CodeOf(err), "%v", err)
	after, err := e.svc.Manifest(e.ctx, r.ID)
	require.NoError(t, err)
	assert.Equal(t, before, after)
	m.Artifacts[1].Required = false
	require.NoError(t, e.svc.SetManifest(e.ctx, r.ID, m))

	// and a run created with such a manifest is refused, nothing made
	m.Artifacts[1].Required = true
	runsBefore := e.count("runs")
	_, err = e.svc.CreateRun(e.ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "c2"}, Manifest: &m,
		Profile: &runs.Profile{ID: "narrow", VisibleRoots: []string{"output", "summaries"}, WritableRoots: []string{"output"}}})
	require.Equal(t, wserr.InvalidManifest, wserr.CodeOf(err), "%v", err)
	assert.Equal(t, runsBefore, e.count("runs"))
}

// TestDefaultManifestOutOfTheProfilesReach: a run created without a
// manifest commits output/main.md; a profile that cannot write output/
// is refused at creation (manifest.invalid, nothing written), as
// manifest.set refuses such a manifest, and accepted with a manifest
// whose body it can write.
func TestDefaultManifestOutOfTheProfilesReach(t *testing.T) {
	e := newLifecycleEnv(t)
	notes := runs.Profile{ID: "notes", VisibleRoots: []string{"notes"}}
	before := rowCounts(e)
	_, err := e.svc.CreateRun(e.ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "n"}, Profile: &notes})
	require.Error(t, err)
	assert.True(t, wserr.Is(err, wserr.InvalidManifest), "%v", err)
	assert.Contains(t, err.Error(), "output/main.md")
	assert.Equal(t, before, rowCounts(e), "nothing written")

	m := runs.Manifest{WorkspaceVersion: 1, Artifacts: []runs.Artifact{{ID: "main", Path: "notes/main.md", Target: runs.Target{Kind: runs.TargetMessageBody}, Required: true}}}
	r := e.create("n", runs.CreateRequest{Profile: &notes, Manifest: &m})
	e.write(r.ID, "notes/main.md", "Body")
	sink := &recordingSink{}
	_, err = e.svc.Commit(e.ctx, r.ID, sink, runs.CommitOptions{})
	require.NoError(t, err)
	require.Len(t, sink.got, 1)
	assert.Equal(t, "Body", sink.got[0].Message.Body)
}
