package wsstore_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// scratchRun creates a run with files in output/, plan/ and scratch/,
// over several checkpoints, and returns the scratch contents.
func scratchRun(e *env, runID string, prof *runs.Profile) map[string][]byte {
	e.t.Helper()
	_, err := e.s.Runs.CreateRun(e.ctx, runs.CreateRequest{
		Chat: runs.ChatKey{Kind: "character", StableChatID: "scratch-" + runID}, RunID: runID, Profile: prof,
	})
	require.NoError(e.t, err)
	scratch := map[string][]byte{
		"scratch/a.md":       []byte("scratch only " + runID + "\n"),
		"scratch/deep/b.bin": []byte("\x00\x01scratch bytes " + runID),
	}
	e.write(runID, "output/main.md", []byte("the answer "+runID+"\n"))
	e.write(runID, "scratch/a.md", scratch["scratch/a.md"])
	e.write(runID, "plan/plan.md", []byte("plan "+runID+"\n"))
	e.write(runID, "scratch/deep/b.bin", scratch["scratch/deep/b.bin"])
	return scratch
}

func (e *env) events(runID string, typ journal.Type) []journal.Event {
	e.t.Helper()
	evs, err := e.s.Journal.Page(e.ctx, runID, journal.PageQuery{Limit: 500})
	require.NoError(e.t, err)
	var out []journal.Event
	for _, ev := range evs {
		if ev.Type == typ {
			out = append(out, ev)
		}
	}
	return out
}

func (e *env) lookupErr(runID string, seq int64, path string) error {
	_, err := e.statAt(runID, seq, path)
	return err
}

// statAt describes path in run runID's host view, live (seq 0) or at
// checkpoint seq.
func (e *env) statAt(runID string, seq int64, path string) (vfs.FileInfo, error) {
	ws := e.s.Runs.Workspace(runID, runs.HostScope)
	if seq > 0 {
		ws = e.s.Runs.WorkspaceAt(runID, seq, runs.HostScope)
	}
	return ws.Stat(e.ctx, vfs.MustPath(path))
}

// TestScratchCollectedWhenRunCompletes: finishing a run removes scratch/
// from its workspace and every checkpoint in the transaction that
// completes it, records scratch_collected, leaves the other roots as
// they were, and lets gc free the scratch bytes.
func TestScratchCollectedWhenRunCompletes(t *testing.T) {
	e := newEnv(t)
	scratch := scratchRun(e, "run_s", nil)
	cps, err := e.s.Checkpoints.List(e.ctx, "run_s")
	require.NoError(t, err)
	require.Len(t, cps, 5)
	require.NoError(t, e.lookupErr("run_s", 0, "scratch/a.md"), "scratch is writable and stored while the run is active")
	require.NoError(t, e.lookupErr("run_s", cps[4].Seq, "scratch/deep/b.bin"), "and checkpointed")
	e.collect()

	_, err = e.s.Runs.Finish(e.ctx, "run_s")
	require.NoError(t, err)

	for _, seq := range []int64{0, 1, 2, 3, 4, 5} {
		// scratch/ is a root of the profile, so it reads as an empty
		// directory: nothing is left below it.
		fi, err := e.statAt("run_s", seq, "scratch")
		require.NoError(t, err, "checkpoint %d", seq)
		assert.Equal(t, vfs.KindDir, fi.Kind, "checkpoint %d", seq)
		assert.Zero(t, fi.Size, "checkpoint %d reads scratch as empty", seq)
		assert.True(t, wserr.Is(e.lookupErr("run_s", seq, "scratch/a.md"), wserr.FileNotFound), "checkpoint %d reads scratch/a.md as absent", seq)
	}
	assert.NoError(t, e.lookupErr("run_s", 0, "output/main.md"))
	assert.NoError(t, e.lookupErr("run_s", 0, "plan/plan.md"))
	assert.NoError(t, e.lookupErr("run_s", 0, "input/persist_snapshot.json"))
	assert.NoError(t, e.lookupErr("run_s", 3, "output/main.md"), "checkpoints keep their other files")
	after, err := e.s.Checkpoints.List(e.ctx, "run_s")
	require.NoError(t, err)
	require.Len(t, after, 5, "no checkpoint is deleted")
	for i := range after {
		assert.Equal(t, cps[i].ID, after[i].ID)
		assert.Equal(t, cps[i].EventSeq, after[i].EventSeq)
	}
	run, err := e.s.Runs.Run(e.ctx, "run_s")
	require.NoError(t, err)
	assert.Equal(t, after[len(after)-1].Root, run.Root, "the head checkpoint still matches the live root")

	evs := e.events("run_s", journal.ScratchCollected)
	require.Len(t, evs, 1)
	var p journal.Collected
	require.NoError(t, json.Unmarshal(evs[0].Payload, &p))
	assert.Equal(t, journal.Collected{Status: "completed", Bytes: int64(len(scratch["scratch/a.md"]) + len(scratch["scratch/deep/b.bin"])),
		Files: 2, Checkpoints: 3, Root: run.Root.String(), PrevRoot: p.PrevRoot}, p)
	all, err := e.s.Journal.Page(e.ctx, "run_s", journal.PageQuery{Limit: 500})
	require.NoError(t, err)
	assert.Equal(t, journal.RunCompleted, all[len(all)-2].Type, "collected right after the run completed, in its transaction")

	rep := e.gc(wsstore.GCOptions{Grace: -1, Now: e.later})
	assert.Equal(t, 2, rep.Freed.Blobs, "the two scratch files' blobs are freed")
	for p, c := range scratch {
		assert.False(t, e.has(cas.Sum(c)), p)
	}
	assert.True(t, e.has(cas.Sum([]byte("the answer run_s\n"))))
}

// TestScratchKeptAfterFailureByDefault: seed 000 §11 keeps a failed or
// cancelled run's workspace for debugging; a profile may say otherwise.
func TestScratchKeptAfterFailureByDefault(t *testing.T) {
	yes, no := true, false
	for _, tc := range []struct {
		name string
		keep *runs.KeepScratch
		end  runs.Status
		kept bool
	}{
		{"FailedKeeps", nil, runs.Failed, true},
		{"CancelledKeeps", nil, runs.Cancelled, true},
		{"CompletedCollects", nil, runs.Completed, false},
		{"FailedCollectsWhenAsked", &runs.KeepScratch{Failed: &no}, runs.Failed, false},
		{"CompletedKeepsWhenAsked", &runs.KeepScratch{Completed: &yes}, runs.Completed, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			prof := runs.DefaultProfile()
			prof.KeepScratch = tc.keep
			scratchRun(e, "run_k", &prof)
			if tc.end == runs.Completed {
				_, err := e.s.Runs.Finish(e.ctx, "run_k")
				require.NoError(t, err)
			} else {
				require.NoError(t, e.s.Runs.SetStatus(e.ctx, "run_k", tc.end, "test"))
			}
			err := e.lookupErr("run_k", 0, "scratch/deep/b.bin")
			if tc.kept {
				assert.NoError(t, err)
				assert.Empty(t, e.events("run_k", journal.ScratchCollected))
			} else {
				assert.True(t, wserr.Is(err, wserr.FileNotFound), "%v", err)
				assert.Len(t, e.events("run_k", journal.ScratchCollected), 1)
			}
			assert.NoError(t, e.lookupErr("run_k", 0, "output/main.md"))
		})
	}
}

// TestScratchNeverCommitted: neither a manifest nor the model's named
// file can take a commit from scratch/.
func TestScratchNeverCommitted(t *testing.T) {
	e := newEnv(t)
	scratchRun(e, "run_c", nil)
	man := runs.DefaultManifest()
	man.Artifacts[0].Path = "scratch/a.md"
	err := e.s.Runs.SetManifest(e.ctx, "run_c", man)
	assert.True(t, wserr.Is(err, wserr.InvalidManifest), "%v", err)
	called := false
	sink := runs.SinkFunc(func(context.Context, runs.CommitRequest) (json.RawMessage, error) {
		called = true
		return nil, nil
	})
	_, err = e.s.Runs.Commit(e.ctx, "run_c", sink, runs.CommitOptions{Path: "scratch/a.md"})
	assert.True(t, wserr.Is(err, wserr.InvalidPath), "%v", err)
	assert.False(t, called, "the sink never sees scratch content")
}
