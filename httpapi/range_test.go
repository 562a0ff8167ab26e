package httpapi_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/httpapi"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/tokens"
)

// countingBlobs counts what the handler reads of stored contents.
type countingBlobs struct {
	httpapi.Blobs
	ranged atomic.Int64 // bytes read
}

func (c *countingBlobs) GetRange(ctx context.Context, h cas.Hash, off, n int64) (io.ReadCloser, error) {
	rc, err := c.Blobs.GetRange(ctx, h, off, n)
	if err != nil {
		return nil, err
	}
	return struct {
		io.Reader
		io.Closer
	}{&countingReader{r: rc, n: &c.ranged}, rc}, nil
}

type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n.Add(int64(n))
	return n, err
}

// TestRange: downloads answer one byte range with 206 and only its bytes,
// read alone; a range outside the file gets 416; the ETag is the content
// hash and If-None-Match with it gets 304 without a byte read.
func TestRange(t *testing.T) {
	st := storetest.OpenStore(t)
	b := httpapi.FromStore(st)
	blobs := &countingBlobs{Blobs: b.Blobs}
	b.Blobs = blobs
	srv := httptest.NewServer(mustNew(t, b, httpapi.Options{}))
	defer srv.Close()
	_, tok, err := st.Tokens.Create(context.Background(), tokens.Spec{})
	require.NoError(t, err)
	s := &server{t: t, st: st, srv: srv, full: tok}

	content, err := io.ReadAll(storetest.Text(9 << 20)) // chunked: over the 4 MiB inline limit
	require.NoError(t, err)
	s.okJSON(http.MethodPost, s.url("/workspace/upload", "actor", "alice", "path", "big.log"), bytes.NewReader(content))
	s.newRun("r1")

	for _, file := range []struct {
		name    string
		u       string
		content []byte
	}{
		{"ActorFile", s.url("/workspace/file", "actor", "alice", "path", "big.log"), content},
		{"RunFileAtCheckpoint", s.url("/v1/runs/r1/file", "path", "output/answer.md", "at", "cp_000002"), []byte("v1\n")},
	} {
		t.Run(file.name, func(t *testing.T) {
			size := int64(len(file.content))
			etag := `"` + cas.Sum(file.content).String() + `"`
			for _, tc := range []struct {
				name       string
				rng        string
				a, b       int64 // the bytes expected, [a, b]; b < a: the whole file
				status     int
				contentRng string
			}{
				{"Whole", "", 0, -1, http.StatusOK, ""},
				{"FirstBytes", "bytes=0-1", 0, 1, http.StatusPartialContent, "bytes 0-1/" + strconv.FormatInt(size, 10)},
				{"Open", "bytes=1-", 1, size - 1, http.StatusPartialContent, "bytes 1-" + strconv.FormatInt(size-1, 10) + "/" + strconv.FormatInt(size, 10)},
				{"Suffix", "bytes=-2", size - 2, size - 1, http.StatusPartialContent, "bytes " + strconv.FormatInt(size-2, 10) + "-" + strconv.FormatInt(size-1, 10) + "/" + strconv.FormatInt(size, 10)},
				{"PastEndCut", "bytes=1-999999999", 1, size - 1, http.StatusPartialContent, "bytes 1-" + strconv.FormatInt(size-1, 10) + "/" + strconv.FormatInt(size, 10)},
				{"PastWhatInt64Holds", "bytes=1-99999999999999999999", 1, size - 1, http.StatusPartialContent, "bytes 1-" + strconv.FormatInt(size-1, 10) + "/" + strconv.FormatInt(size, 10)},
				{"SuffixPastWhatInt64Holds", "bytes=-99999999999999999999", 0, size - 1, http.StatusPartialContent, "bytes 0-" + strconv.FormatInt(size-1, 10) + "/" + strconv.FormatInt(size, 10)},
				{"ErrStartPastWhatInt64Holds", "bytes=99999999999999999999-", 0, 0, http.StatusRequestedRangeNotSatisfiable, "bytes */" + strconv.FormatInt(size, 10)},
				{"SeveralGetWhole", "bytes=0-0,2-2", 0, -1, http.StatusOK, ""},
				{"MalformedGetsWhole", "bytes=x-y", 0, -1, http.StatusOK, ""},
				{"ErrUnsatisfiable", "bytes=" + strconv.FormatInt(size, 10) + "-", 0, 0, http.StatusRequestedRangeNotSatisfiable, "bytes */" + strconv.FormatInt(size, 10)},
			} {
				t.Run(tc.name, func(t *testing.T) {
					var hdr []string
					if tc.rng != "" {
						hdr = []string{"Range", tc.rng}
					}
					resp, body := s.do(http.MethodGet, file.u, s.full, nil, hdr...)
					require.Equal(t, tc.status, resp.StatusCode, "%s", body)
					assert.Equal(t, "bytes", resp.Header.Get("Accept-Ranges"))
					assert.Equal(t, etag, resp.Header.Get("ETag"))
					assert.Equal(t, tc.contentRng, resp.Header.Get("Content-Range"))
					if tc.status == http.StatusRequestedRangeNotSatisfiable {
						assert.Equal(t, "http.range_not_satisfiable", errCode(t, body))
						return
					}
					want := file.content
					if tc.b >= tc.a {
						want = file.content[tc.a : tc.b+1]
					}
					assert.True(t, bytes.Equal(want, body), "got %d bytes, want %d", len(body), len(want))
				})
			}
			t.Run("IfRangeOtherVersionGetsWhole", func(t *testing.T) {
				resp, body := s.do(http.MethodGet, file.u, s.full, nil, "Range", "bytes=0-0", "If-Range", `"`+cas.Sum([]byte("other")).String()+`"`)
				assert.Equal(t, http.StatusOK, resp.StatusCode)
				assert.Len(t, body, len(file.content))
				resp, body = s.do(http.MethodGet, file.u, s.full, nil, "Range", "bytes=0-0", "If-Range", etag)
				assert.Equal(t, http.StatusPartialContent, resp.StatusCode)
				assert.Len(t, body, 1)
			})
			t.Run("IfNoneMatch", func(t *testing.T) {
				before := blobs.ranged.Load()
				resp, body := s.do(http.MethodGet, file.u, s.full, nil, "If-None-Match", `"abc", `+etag)
				assert.Equal(t, http.StatusNotModified, resp.StatusCode)
				assert.Empty(t, body)
				assert.Equal(t, before, blobs.ranged.Load(), "a 304 reads nothing")
				resp, _ = s.do(http.MethodGet, file.u, s.full, nil, "If-None-Match", `"abc"`)
				assert.Equal(t, http.StatusOK, resp.StatusCode)
			})
		})
	}
	t.Run("ReadsOnlyTheRange", func(t *testing.T) {
		before := blobs.ranged.Load()
		resp, body := s.do(http.MethodGet, s.url("/workspace/file", "actor", "alice", "path", "big.log"), s.full, nil, "Range", "bytes=5000000-5000099")
		require.Equal(t, http.StatusPartialContent, resp.StatusCode)
		assert.Equal(t, content[5000000:5000100], body)
		assert.Equal(t, int64(100), blobs.ranged.Load()-before, "only the range is read from the store")
	})
}
