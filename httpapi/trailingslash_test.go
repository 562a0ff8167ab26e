package httpapi_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/httpapi"
	"github.com/wsstore/wsstore/runs"
)

// TestFileDownloadNamedAsADirectory: a download whose path ends in "/"
// or in a "." segment but names a file (stored, on the host, or an
// actor's) is 422 workspace.invalid_path, as a change of it is; it
// answered the file. A directory named so is refused as before, and a
// listing of one answers.
func TestFileDownloadNamedAsADirectory(t *testing.T) {
	s := newServer(t, httpapi.Options{})
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.txt"), []byte("on the host\n"), 0o644))
	_, err := s.st.Runs.CreateRun(context.Background(), runs.CreateRequest{RunID: "r", Chat: runs.ChatKey{Kind: "chat", StableChatID: "c-r"},
		Profile: &runs.Profile{AllowPaths: []runs.HostPath{{Path: dir, Name: "h"}}}})
	require.NoError(t, err)
	s.mustOp(map[string]any{"op": "write", "runId": "r", "path": "output/a.md", "content": "one"})
	s.mustOp(map[string]any{"op": "actor.upload", "actor": "alice", "path": "a.md", "content": "one"})

	for _, u := range []string{
		s.url("/v1/runs/r/file", "path", "output/a.md/"),
		s.url("/v1/runs/r/file", "path", "output/a.md/."),
		s.url("/v1/runs/r/file", "path", "host/h/a.txt/"),
		s.url("/workspace/file", "actor", "alice", "path", "a.md/"),
	} {
		resp, b := s.do(http.MethodGet, u, s.full, nil)
		assert.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, "%s: %s", u, b)
		assert.Equal(t, "workspace.invalid_path", errCode(t, b), u)
		assert.Empty(t, resp.Header.Get("ETag"), u)
	}
	resp, b := s.do(http.MethodGet, s.url("/v1/runs/r/file", "path", "output/"), s.full, nil)
	assert.Equal(t, "workspace.path_is_directory", errCode(t, b), "%d", resp.StatusCode)
	for _, u := range []string{
		s.url("/v1/runs/r/files", "path", "output/"),
		s.url("/v1/runs/r/files", "path", "host/h/"),
		s.url("/workspace/files", "actor", "alice", "path", "./"),
		s.url("/v1/runs/r/file", "path", "host/h/a.txt"),
	} {
		resp, b := s.do(http.MethodGet, u, s.full, nil)
		assert.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", u, b)
	}
}
