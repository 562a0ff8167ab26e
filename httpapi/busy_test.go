package httpapi_test

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/archive"
	"github.com/wsstore/wsstore/httpapi"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/tokens"
)

// randomBytes returns n incompressible bytes.
func randomBytes(n int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, seed+1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// TestBusyIsRetried: another process holds the store's write lock far
// longer than the store's busy timeout; the requests that need it (small
// and large uploads, an op, an import) wait, retrying, and succeed once it
// is released, never answering busy: a large body is sent to the store
// again from its first byte.
func TestBusyIsRetried(t *testing.T) {
	ctx := context.Background()
	st := storetest.OpenStoreWith(t, wsstore.Options{Index: index.Options{BusyTimeout: 5 * time.Millisecond}})
	_, tok, err := st.Tokens.Create(ctx, tokens.Spec{})
	require.NoError(t, err)
	srv := httptest.NewServer(mustNew(t, httpapi.FromStore(st), httpapi.Options{SpoolDir: t.TempDir()}))
	defer srv.Close()

	// An archive of 3 MiB from another store, for the import.
	other := storetest.OpenStore(t)
	_, err = other.Actors.Upload(ctx, "carol", "big.bin", bytes.NewReader(randomBytes(3<<20, 9)))
	require.NoError(t, err)
	var arc bytes.Buffer
	_, err = other.Archive.Export(ctx, &arc, archive.Scope{Actors: []string{"carol"}}, archive.Options{})
	require.NoError(t, err)

	release := storetest.HoldWriteLock(t, filepath.Join(st.Dir, wsstore.DBName))
	released := make(chan struct{})

	send := func(method, u string, body []byte) (int, string) {
		req, err := http.NewRequest(method, srv.URL+u, bytes.NewReader(body))
		require.NoError(t, err)
		req.ContentLength = -1 // streamed: the handler cannot tell its size
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	inline, chunked := randomBytes(3<<20, 1), randomBytes(9<<20, 2) // over 1 MiB; one row, and chunks
	requests := []struct {
		name, method, u string
		body            []byte
	}{
		{"SmallUpload", http.MethodPost, "/workspace/upload?actor=alice&path=a.md", []byte("hello")},
		{"LargeUpload", http.MethodPost, "/workspace/upload?actor=alice&path=inline.bin", inline},
		{"ChunkedUpload", http.MethodPost, "/workspace/upload?actor=alice&path=chunked.bin", chunked},
		{"Op", http.MethodPost, "/v1/op", []byte(`{"op":"actor.upload","actor":"alice","path":"b.md","content":"op"}`)},
		{"Import", http.MethodPost, "/v1/import", arc.Bytes()},
	}
	var wg sync.WaitGroup
	for _, rq := range requests {
		wg.Go(func() {
			status, body := send(rq.method, rq.u, rq.body)
			select {
			case <-released:
			default:
				t.Errorf("%s: answered while the store was locked", rq.name)
			}
			assert.Equal(t, http.StatusOK, status, "%s: %.300s", rq.name, body)
			assert.NotContains(t, body, "store.busy", rq.name)
		})
	}
	time.Sleep(300 * time.Millisecond)
	release()
	close(released)
	wg.Wait()

	for path, want := range map[string][]byte{"a.md": []byte("hello"), "inline.bin": inline, "chunked.bin": chunked, "b.md": []byte("op")} {
		status, body := send(http.MethodGet, "/workspace/file?actor=alice&path="+path, nil)
		assert.Equal(t, http.StatusOK, status)
		assert.True(t, bytes.Equal(want, []byte(body)), "%s holds what was uploaded", path)
	}
	status, body := send(http.MethodGet, "/workspace/stats?actor=carol", nil)
	assert.Equal(t, http.StatusOK, status)
	assert.True(t, strings.Contains(body, `"files":1`), "the import is in: %s", body)
}
