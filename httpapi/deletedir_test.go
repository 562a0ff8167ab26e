package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/httpapi"
)

// TestDeleteOfAFileAsADirectory: DELETE /workspace/file with a path
// ending in "/" names a directory; given a file (x.md/) it is 422
// workspace.not_a_directory, as actor.rm is, and the file stays, also
// when If-Match names it; a directory so named is removed.
func TestDeleteOfAFileAsADirectory(t *testing.T) {
	s := newServer(t, httpapi.Options{})
	for _, p := range []string{"x.md", "old/y.md"} {
		s.okJSON(http.MethodPost, s.url("/workspace/upload", "actor", "alice", "path", p), strings.NewReader("x"))
	}
	get, _ := s.do(http.MethodGet, s.url("/workspace/file", "actor", "alice", "path", "x.md"), s.full, nil)
	require.Equal(t, http.StatusOK, get.StatusCode)
	for _, headers := range [][]string{nil, {"If-Match", get.Header.Get("ETag")}} {
		resp, b := s.do(http.MethodDelete, s.url("/workspace/file", "actor", "alice", "path", "x.md/"), s.full, nil, headers...)
		assert.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, "%v: %s", headers, b)
		assert.Equal(t, "workspace.not_a_directory", errCode(t, b))
	}
	status, res := s.op(s.full, map[string]any{"op": "actor.rm", "actor": "alice", "path": "x.md/"})
	assert.Equal(t, http.StatusUnprocessableEntity, status, "%v", res)
	resp, b := s.do(http.MethodGet, s.url("/workspace/file", "actor", "alice", "path", "x.md"), s.full, nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode, "the file stays: %s", b)

	s.okJSON(http.MethodDelete, s.url("/workspace/file", "actor", "alice", "path", "old/"), nil)
	resp, _ = s.do(http.MethodGet, s.url("/workspace/file", "actor", "alice", "path", "old/y.md"), s.full, nil)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "the directory is removed")
}
