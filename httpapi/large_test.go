package httpapi_test

import (
	"flag"
	"io"
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/httpapi"
)

var huge = flag.Bool("httpapi.huge", false, "upload and download 1 GiB instead of 256 MiB")

// TestLargeUploadDownload streams a generated file up and down through the
// loopback listener; neither side ever holds it, and the live heap grows
// by a bounded amount whatever its size.
func TestLargeUploadDownload(t *testing.T) {
	if testing.Short() {
		t.Skip("streams 256 MiB")
	}
	size := int64(256 << 20)
	if *huge {
		size = 1 << 30
	}
	s := newServer(t, httpapi.Options{})
	u := s.url("/workspace/upload", "actor", "alice", "path", "data/big.log")

	var resp *http.Response
	var body []byte
	growth := heapGrowth(func() {
		req, err := http.NewRequest(http.MethodPost, u, newGenerator(size))
		require.NoError(t, err)
		req.ContentLength = -1 // chunked: the size is not announced
		req.Header.Set("Authorization", "Bearer "+s.full)
		resp, err = s.srv.Client().Do(req)
		require.NoError(t, err)
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
	})
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	assert.Less(t, growth, uint64(64<<20), "the upload streams")
	t.Logf("upload: heap grew by at most %d MiB", growth>>20)

	var cw *compareWriter
	growth = heapGrowth(func() {
		req, err := http.NewRequest(http.MethodGet, s.url("/workspace/file", "actor", "alice", "path", "data/big.log"), nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+s.full)
		resp, err = s.srv.Client().Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		cw = &compareWriter{want: newGenerator(size)}
		_, err = io.Copy(cw, resp.Body)
		require.NoError(t, err)
	})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, strconv.FormatInt(size, 10), resp.Header.Get("Content-Length"))
	assert.Equal(t, size, cw.n)
	assert.False(t, cw.differ, "the downloaded bytes are the uploaded ones")
	assert.Less(t, growth, uint64(64<<20), "the download streams")
	t.Logf("download: heap grew by at most %d MiB", growth>>20)
}
