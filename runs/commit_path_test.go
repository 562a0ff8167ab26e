package runs_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// TestCommitPath commits the one file the model names (workspace.commit's
// path argument): the model commits only a stored file it can see, never
// the run's input, and every refusal is a model-correctable code that
// leaves the store as it was and the sink untouched.
func TestCommitPath(t *testing.T) {
	e := newLifecycleEnv(t)
	v := vfs.NewVirtual()
	require.NoError(t, v.Mount(vfs.MustPath("chat/history.tail.md"), vfs.FileProvider(func(context.Context) ([]byte, error) {
		return []byte("user: hello\n"), nil
	})))
	e.svc = e.service(runs.Options{Virtual: v})
	inputs := map[string][]byte{"prompt_snapshot.json": []byte(`{"system":"secret prompt"}`)}
	narrow := e.create("c1", runs.CreateRequest{Inputs: inputs,
		Profile: &runs.Profile{ID: "writer", VisibleRoots: []string{"output", "scratch"}}})
	e.write(narrow.ID, "output/main.md", "the answer")
	e.write(narrow.ID, "output/dir/nested.md", "x")
	open := e.create("c2", runs.CreateRequest{Inputs: inputs,
		Profile: &runs.Profile{ID: "inspector", VisibleRoots: []string{"output", "plan"}, WritableRoots: []string{"output"}}})

	cases := []struct {
		name  string
		runID string
		path  string
		code  wserr.Code
	}{
		{"OK", narrow.ID, "output/main.md", ""},
		{"ErrInvalidPath", narrow.ID, "../secrets.json", wserr.InvalidPath},
		{"ErrFileNotFound", narrow.ID, "output/mian.md", wserr.FileNotFound},
		{"ErrDirectory", narrow.ID, "output/dir", wserr.PathIsDirectory},
		{"ErrRoot", narrow.ID, "output", wserr.PathIsDirectory},
		{"ErrEmptyRoot", open.ID, "plan", wserr.PathIsDirectory},
		{"ErrEmptyWritableRoot", open.ID, "output", wserr.PathIsDirectory},
		{"ErrHiddenInput", narrow.ID, "input/prompt_snapshot.json", wserr.PathNotVisible},
		{"ErrHiddenStoreFile", narrow.ID, "input/persist_snapshot.json", wserr.PathNotVisible},
		{"ErrHiddenRoot", narrow.ID, "plan/plan.md", wserr.PathNotVisible},
		{"ErrTopLevelFile", narrow.ID, "main.md", wserr.PathNotVisible},
		{"ErrVirtual", narrow.ID, "chat/history.tail.md", wserr.InvalidPath},
		{"ErrInputInWiderProfile", open.ID, "input/prompt_snapshot.json", wserr.PathNotVisible},
		{"ErrRuntimeRecord", open.ID, "tool-args/call_1.json", wserr.PathNotVisible},
		{"ErrManifestFile", open.ID, "manifest.json", wserr.PathNotVisible},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sink := &recordingSink{}
			before := rowCounts(e)
			rec, err := e.svc.Commit(e.ctx, tc.runID, sink, runs.CommitOptions{Path: tc.path})
			if tc.code == "" {
				require.NoError(t, err)
				require.Len(t, sink.got, 1)
				assert.Equal(t, "the answer", sink.got[0].Message.Body)
				assert.Equal(t, runs.CommitCompleted, rec.Status)
				return
			}
			requireModelError(t, err, tc.code)
			if tc.code == wserr.PathNotVisible {
				// It names the root the path is below, or the path at
				// the top: "plan/ is not visible", "main.md is not".
				top, _, below := strings.Cut(tc.path, "/")
				if below {
					top += "/"
				}
				assert.Contains(t, wserr.MessageOf(err), top+" is not visible")
			}
			assert.Empty(t, sink.got, "the sink is not called")
			assert.Equal(t, before, rowCounts(e), "a refused commit records nothing")
			run, err := e.svc.Run(e.ctx, tc.runID)
			require.NoError(t, err)
			assert.Equal(t, runs.Running, run.Status, "the model can correct the path and go on")
		})
	}
}
