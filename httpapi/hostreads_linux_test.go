package httpapi_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/httpapi"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/runs"
)

// TestHostFileDownloadReadsTwice: a download of a host file reads it
// twice, once to hash it for the ETag and once as it streams (checked
// against that hash), not a third time to describe it first. The bytes
// the process reads are counted; the response is recorded in memory, so
// no socket read counts.
func TestHostFileDownloadReadsTwice(t *testing.T) {
	s := newServer(t, httpapi.Options{})
	dir := t.TempDir()
	const size = 4 << 20
	content := bytes.Repeat([]byte("0123456789abcdef"), size/16)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "big.bin"), content, 0o644))
	_, err := s.st.Runs.CreateRun(context.Background(), runs.CreateRequest{RunID: "rreads", Chat: runs.ChatKey{Kind: "chat", StableChatID: "c-rreads"},
		Profile: &runs.Profile{AllowPaths: []runs.HostPath{{Path: dir, Name: "h"}}}})
	require.NoError(t, err)

	get := func(hdr ...string) (*httptest.ResponseRecorder, int64) {
		req := httptest.NewRequest(http.MethodGet, "/v1/runs/rreads/file?path=host/h/big.bin", nil)
		req.Header.Set("Authorization", "Bearer "+s.full)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		rec := httptest.NewRecorder()
		before := storetest.ProcIO(t, "rchar")
		s.h.ServeHTTP(rec, req)
		return rec, storetest.ProcIO(t, "rchar") - before
	}

	rec, n := get()
	require.Equal(t, http.StatusOK, rec.Code, "%.300s", rec.Body.String())
	assert.True(t, bytes.Equal(content, rec.Body.Bytes()), "the whole file")
	assert.Equal(t, `"`+cas.Sum(content).String()+`"`, rec.Header().Get("ETag"))
	t.Logf("a download of a %d-byte host file read %d bytes", size, n)
	assert.GreaterOrEqual(t, n, int64(2*size), "hashed and streamed: the count sees the file's reads")
	assert.Less(t, n, int64(2*size+size/2), "read at most twice")

	rec, n = get("Range", "bytes=-20")
	require.Equal(t, http.StatusPartialContent, rec.Code)
	assert.Equal(t, string(content[size-20:]), rec.Body.String())
	assert.Less(t, n, int64(2*size+size/2), "a range reads the file at most twice")
}
