package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/httpapi"
)

// TestDownloadHonoursIfMatch: a download whose If-Match names another
// version of the file (a client resuming a range of the version it began
// with) is 412 http.precondition_failed and carries none of the file's
// bytes, rather than the bytes of the version there now; the file's ETag,
// or "*", matches.
func TestDownloadHonoursIfMatch(t *testing.T) {
	s := newServer(t, httpapi.Options{})
	u := s.url("/workspace/file", "actor", "alice", "path", "a.md")
	s.okJSON(http.MethodPost, s.url("/workspace/upload", "actor", "alice", "path", "a.md"), strings.NewReader("first version"))
	resp, _ := s.do(http.MethodGet, u, s.full, nil)
	old := resp.Header.Get("ETag")
	require.NotEmpty(t, old)
	s.okJSON(http.MethodPost, s.url("/workspace/upload", "actor", "alice", "path", "a.md"), strings.NewReader("second version"))

	for _, method := range []string{http.MethodGet, http.MethodHead} {
		resp, b := s.do(method, u, s.full, nil, "If-Match", old, "Range", "bytes=6-")
		assert.Equal(t, http.StatusPreconditionFailed, resp.StatusCode, "%s: %s", method, b)
		assert.NotContains(t, string(b), "second", method)
		if method == http.MethodGet {
			assert.Equal(t, "http.precondition_failed", errCode(t, b))
		}
	}
	resp, b := s.do(http.MethodGet, u, s.full, nil, "If-Match", "W/"+old)
	assert.Equal(t, http.StatusPreconditionFailed, resp.StatusCode, "a weak tag never matches: %s", b)

	resp, _ = s.do(http.MethodGet, u, s.full, nil)
	cur := resp.Header.Get("ETag")
	for _, im := range []string{cur, "*", old + ", " + cur} {
		resp, b = s.do(http.MethodGet, u, s.full, nil, "If-Match", im, "Range", "bytes=7-")
		assert.Equal(t, http.StatusPartialContent, resp.StatusCode, "If-Match %s: %s", im, b)
		assert.Equal(t, "version", string(b))
	}
}
