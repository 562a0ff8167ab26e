package httpapi_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/httpapi"
)

// rawRequest writes head and body to the server on a connection of its
// own, closes the sending side and returns the response.
func (s *server) rawRequest(head, body string) *http.Response {
	s.t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.srv.URL, "http://"))
	require.NoError(s.t, err)
	s.t.Cleanup(func() { conn.Close() })
	_, err = io.WriteString(conn, head+"\r\n"+body)
	require.NoError(s.t, err)
	require.NoError(s.t, conn.(*net.TCPConn).CloseWrite())
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(s.t, err)
	s.t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// TestUploadBodyCutShort: an upload whose body ends before its
// Content-Length, whose chunked encoding breaks, or whose multipart form
// lacks its closing boundary is the client's error, a 4xx with a code,
// and stores nothing.
func TestUploadBodyCutShort(t *testing.T) {
	s := newServer(t, httpapi.Options{})
	content := strings.Repeat("0123456789", 5)
	const boundary = "XyZ"
	part := "--" + boundary + "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.txt\"\r\n\r\n"
	form := part + content
	// Past the 1 MiB the server holds in memory: spooled, then streamed
	// into the store, which stored what came before the cut.
	bigForm := part + strings.Repeat("0123456789abcdef", 3<<16)
	for _, tc := range []struct{ name, headers, body string }{
		{"ShortOfContentLength", "Content-Length: 100\r\n", content},
		{"BrokenChunks", "Transfer-Encoding: chunked\r\n", "5\r\nhello\r\nzz\r\n"},
		{"MultipartWithoutClosingBoundary", fmt.Sprintf("Content-Type: multipart/form-data; boundary=%s\r\nContent-Length: %d\r\n", boundary, len(form)), form},
		{"LargeMultipartWithoutClosingBoundary", fmt.Sprintf("Content-Type: multipart/form-data; boundary=%s\r\nContent-Length: %d\r\n", boundary, len(bigForm)), bigForm},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := "cut/" + tc.name + ".txt"
			head := "POST /workspace/upload?actor=alice&path=" + path + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + s.full + "\r\n" + tc.headers
			resp := s.rawRequest(head, tc.body)
			b, _ := io.ReadAll(resp.Body)
			assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s", b)
			assert.Contains(t, string(b), `"code":"workspace.invalid_argument"`)

			dl, body := s.do(http.MethodGet, s.url("/workspace/file", "actor", "alice", "path", path), s.full, nil)
			assert.Equal(t, http.StatusNotFound, dl.StatusCode, "nothing stored: %s", body)
			assert.Equal(t, "workspace.file_not_found", errCode(t, body))
		})
	}
}

// TestMethodNotAllowed: an endpoint's path with another method is 405
// with the methods it takes in Allow; a path no endpoint has is 404
// http.not_found.
func TestMethodNotAllowed(t *testing.T) {
	s := newServer(t, httpapi.Options{})
	for _, tc := range []struct{ method, path, allow string }{
		{http.MethodPut, "/workspace/upload", "POST"},
		{http.MethodGet, "/v1/op", "POST"},
		{http.MethodPost, "/workspace/file", "GET, HEAD, DELETE"},
		{http.MethodDelete, "/v1/runs/r1", "GET, HEAD"},
	} {
		resp, b := s.do(tc.method, s.url(tc.path), s.full, nil)
		assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, "%s %s: %s", tc.method, tc.path, b)
		assert.Equal(t, tc.allow, resp.Header.Get("Allow"), "%s %s", tc.method, tc.path)
		assert.Contains(t, string(b), `"code":"http.method_not_allowed"`)
	}
	resp, b := s.do(http.MethodGet, s.url("/no/such/endpoint"), s.full, nil)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "%s", b)
	assert.Equal(t, "http.not_found", errCode(t, b), "a client's mistake, not a missing object")
	assert.Empty(t, resp.Header.Get("Allow"))
}

// TestImportBodyCutShort: an import whose body ends before its
// Content-Length is the client's error (400 workspace.invalid_argument),
// as an upload's is, and imports nothing, wherever in the archive it ends:
// before its first entry, in its manifest, in a blob, or in its last bytes
// (the request's context, which the server ends as the read fails, is not
// the answer).
func TestImportBodyCutShort(t *testing.T) {
	src := newServer(t, httpapi.Options{})
	src.okJSON(http.MethodPost, src.url("/workspace/upload", "actor", "alice", "path", "notes.md"), strings.NewReader(strings.Repeat("note\n", 1000)))
	resp, arc := src.do(http.MethodGet, src.url("/v1/export", "all", "true"), src.full, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", arc)

	dst := newServer(t, httpapi.Options{})
	for _, cut := range []int{0, 10, 1024, 3000, len(arc) / 2, len(arc) - 10} {
		head := fmt.Sprintf("POST /v1/import HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n", dst.full, len(arc))
		resp = dst.rawRequest(head, string(arc[:cut]))
		b, _ := io.ReadAll(resp.Body)
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "cut at %d of %d: %s", cut, len(arc), b)
		assert.Contains(t, string(b), `"code":"workspace.invalid_argument"`, "cut at %d of %d", cut, len(arc))
	}
	dl, body := dst.do(http.MethodGet, dst.url("/workspace/file", "actor", "alice", "path", "notes.md"), dst.full, nil)
	assert.Equal(t, http.StatusNotFound, dl.StatusCode, "nothing imported: %s", body)
}
