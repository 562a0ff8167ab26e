package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBatchHostPath: run.hostpath maps an absolute host path inside the
// run's allowPaths to the workspace path the run reaches it by, and the
// run writes through that path onto the host; paths outside, relative
// ones, the system's temporary directory and runs without allowPaths are
// refused with codes, and the refusals change nothing on the host.
func TestBatchHostPath(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	proj := filepath.Join(t.TempDir(), "myapp")
	require.NoError(t, os.MkdirAll(filepath.Join(proj, "src"), 0o755))
	outside := t.TempDir()
	profile, err := json.Marshal(map[string]any{"allowPaths": []any{map[string]any{"path": proj, "writable": true}}})
	require.NoError(t, err)
	q := func(p string) string { b, _ := json.Marshal(p); return string(b) }
	lines := []string{
		`{"op":"run.create","chat":{"kind":"character","stableChatId":"hp"},"runId":"hp1","profile":` + string(profile) + `}`,
		`{"op":"run.hostpath","hostPath":` + q(proj) + `}`,
		`{"op":"run.hostpath","hostPath":` + q(filepath.Join(proj, "src", "main.go")) + `}`,
		`{"op":"run.hostpath","hostPath":` + q(proj+"/src/../README.md") + `}`,
		`{"op":"write","path":"host/myapp/src/main.go","content":"package main\n"}`,
		`{"op":"run.hostpath","hostPath":` + q(filepath.Join(outside, "x.md")) + `}`,
		`{"op":"run.hostpath","hostPath":` + q(filepath.Join(proj, "..", "myapp-other", "x.md")) + `}`,
		`{"op":"run.hostpath","hostPath":` + q(os.TempDir()) + `}`,
		`{"op":"run.hostpath","hostPath":"myapp/src/main.go"}`,
		`{"op":"run.hostpath"}`,
		`{"op":"run.create","chat":{"kind":"character","stableChatId":"hp"},"runId":"hp2"}`,
		`{"op":"run.hostpath","hostPath":` + q(proj) + `}`,
		`{"op":"run.hostpath","runId":"hp1","hostPath":` + q(filepath.Join(proj, "src")) + `}`,
		`{"op":"run.hostpath","runId":"nope","hostPath":` + q(proj) + `}`,
	}
	rs := c.batch(strings.Join(lines, "\n") + "\n")
	require.Len(t, rs, len(lines), "one response per request")
	for i, want := range []struct {
		path, code string
	}{
		{"", ""},
		{"host/myapp", ""},
		{"host/myapp/src/main.go", ""},
		{"host/myapp/README.md", ""}, // cleaned, still inside
		{"", ""},                     // the write
		{"", "workspace.path_not_allowed"},
		{"", "workspace.path_not_allowed"},
		{"", "workspace.path_not_allowed"},
		{"", "workspace.invalid_path"},
		{"", "batch.invalid_request"},
		{"", ""},
		{"", "workspace.path_not_allowed"}, // hp2 has no allowPaths
		{"host/myapp/src", ""},
		{"", "run.not_found"},
	} {
		r := rs[i]
		if want.code != "" {
			assert.Equal(t, want.code, r.code(), "request %d %s", i, lines[i])
			continue
		}
		require.True(t, r.OK, "request %d %s: %+v", i, lines[i], r.Error)
		if want.path != "" {
			assert.Equal(t, want.path, r.Result["path"], "request %d %s", i, lines[i])
		}
	}
	b, err := os.ReadFile(filepath.Join(proj, "src", "main.go"))
	require.NoError(t, err, "the write went through the host path")
	assert.Equal(t, "package main\n", string(b))
	entries, err := os.ReadDir(outside)
	require.NoError(t, err)
	assert.Empty(t, entries, "nothing lands outside the allowed path")
	assert.NoDirExists(t, filepath.Join(proj, "..", "myapp-other"), "no host directory is created")
}
