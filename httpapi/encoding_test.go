package httpapi_test

import (
	"bytes"
	"compress/gzip"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/httpapi"
)

// TestContentEncodingIsRefused: a body sent in a content coding (gzip)
// the server does not decode is refused, 415 http.unsupported_encoding,
// and stores nothing, rather than stored as the file's bytes still
// encoded; identity is no coding.
func TestContentEncodingIsRefused(t *testing.T) {
	s := newServer(t, httpapi.Options{})
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, err := zw.Write([]byte("hello"))
	require.NoError(t, err)
	require.NoError(t, zw.Close())

	resp, b := s.do(http.MethodPost, s.url("/workspace/upload", "actor", "alice", "path", "a.md"), s.full, bytes.NewReader(gz.Bytes()),
		"Content-Encoding", "gzip")
	assert.Equal(t, http.StatusUnsupportedMediaType, resp.StatusCode, "%s", b)
	assert.Equal(t, "http.unsupported_encoding", errCode(t, b))
	m := s.okJSON(http.MethodGet, s.url("/workspace/stats", "actor", "alice"), nil)
	assert.Equal(t, float64(0), m["files"], "nothing was stored")

	resp, b = s.do(http.MethodPost, s.url("/v1/op"), s.full, strings.NewReader(`{"op":"actors.list"}`), "Content-Encoding", "br")
	assert.Equal(t, http.StatusUnsupportedMediaType, resp.StatusCode, "%s", b)
	assert.Equal(t, "http.unsupported_encoding", errCode(t, b))

	resp, b = s.do(http.MethodPost, s.url("/workspace/upload", "actor", "alice", "path", "a.md"), s.full, strings.NewReader("hello"),
		"Content-Encoding", "identity")
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	resp, b = s.do(http.MethodGet, s.url("/workspace/file", "actor", "alice", "path", "a.md"), s.full, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "hello", string(b))
}
