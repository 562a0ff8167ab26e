package httpapi_test

import (
	"bytes"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/httpapi"
)

// TestUploadToADirectoryPath: a path ending in "/" names a directory, so
// an upload to it (a raw body, a multipart form's file, an actor.upload)
// is refused, 422 workspace.invalid_path, and stores nothing, rather than
// made a file named as the directory.
func TestUploadToADirectoryPath(t *testing.T) {
	s := newServer(t, httpapi.Options{})
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, err := mw.CreateFormFile("file", "weekly.pdf")
	require.NoError(t, err)
	_, err = fw.Write([]byte("pdf"))
	require.NoError(t, err)
	require.NoError(t, mw.Close())

	for _, path := range []string{"reports/", "a/reports/", "reports//"} {
		resp, b := s.do(http.MethodPost, s.url("/workspace/upload", "actor", "alice", "path", path), s.full, strings.NewReader("x"))
		assert.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, "%s: %s", path, b)
		assert.Equal(t, "workspace.invalid_path", errCode(t, b))
		resp, b = s.do(http.MethodPost, s.url("/workspace/upload", "actor", "alice", "path", path), s.full, bytes.NewReader(buf.Bytes()),
			"Content-Type", mw.FormDataContentType())
		assert.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, "%s: %s", path, b)
		assert.Equal(t, "workspace.invalid_path", errCode(t, b))
		status, m := s.op(s.full, map[string]any{"op": "actor.upload", "actor": "alice", "path": path, "content": "x"})
		assert.Equal(t, http.StatusUnprocessableEntity, status, "%v", m)
	}
	m := s.okJSON(http.MethodGet, s.url("/workspace/stats", "actor", "alice"), nil)
	assert.Equal(t, float64(0), m["files"], "nothing was stored")
	assert.Equal(t, float64(0), m["seq"])

	// The file's own name below the directory is taken.
	s.okJSON(http.MethodPost, s.url("/workspace/upload", "actor", "alice", "path", "reports/weekly.pdf"), strings.NewReader("pdf"))
}
