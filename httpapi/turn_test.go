package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/wsstore/wsstore/httpapi"
)

// TestAnswersThatReadNothingTakeNoTurn: a download's turn (MaxTransfers)
// bounds the buffers of the bytes it sends, so it is taken once the
// answer is known to carry them. With every turn taken, a HEAD, a 304 for
// If-None-Match, a 416 and a 404 are answered at once, as when the server
// is idle; a download of the bytes waits, then is 503 store.busy, with no
// header describing the file.
func TestAnswersThatReadNothingTakeNoTurn(t *testing.T) {
	s := newServer(t, httpapi.Options{MaxTransfers: 1, BusyDeadline: 200 * time.Millisecond})
	s.okJSON(http.MethodPost, s.url("/workspace/upload", "actor", "a", "path", "f.txt"), strings.NewReader("hello\n"))
	s.mustOp(map[string]any{"op": "run.create", "runId": "r1", "chat": map[string]any{"kind": "c", "stableChatId": "c1"}})
	s.mustOp(map[string]any{"op": "write", "runId": "r1", "path": "output/a.md", "content": "hello\n"})
	resp, _ := s.do(http.MethodGet, s.url("/workspace/file", "actor", "a", "path", "f.txt"), s.full, nil)
	etag := resp.Header.Get("ETag")
	assert.NotEmpty(t, etag)

	s.holdTurn()
	for _, u := range []string{s.url("/workspace/file", "actor", "a", "path", "f.txt"), s.url("/v1/runs/r1/file", "path", "output/a.md")} {
		resp, b := s.do(http.MethodHead, u, s.full, nil)
		assert.Equal(t, http.StatusOK, resp.StatusCode, "HEAD %s: %s", u, b)
		assert.Equal(t, int64(6), resp.ContentLength, u)
		resp, b = s.do(http.MethodGet, u, s.full, nil, "If-None-Match", etag)
		assert.Equal(t, http.StatusNotModified, resp.StatusCode, "%s: %s", u, b)
		resp, b = s.do(http.MethodGet, u, s.full, nil, "Range", "bytes=100-")
		assert.Equal(t, http.StatusRequestedRangeNotSatisfiable, resp.StatusCode, "%s: %s", u, b)

		resp, b = s.do(http.MethodGet, u, s.full, nil)
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "%s: %s", u, b)
		assert.Equal(t, "store.busy", errCode(t, b))
		assert.Equal(t, "1", resp.Header.Get("Retry-After"))
		assert.Empty(t, resp.Header.Get("ETag"), "the error body is not the file")
	}
	resp, b := s.do(http.MethodGet, s.url("/workspace/file", "actor", "a", "path", "missing.txt"), s.full, nil)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "%s", b)
}
