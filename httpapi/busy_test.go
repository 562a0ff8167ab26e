package httpapi_test

import (
	"context"
	"database/sql"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/httpapi"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/tokens"
)

// TestBusyIsRetried: another process holds the store's write lock far
// longer than the store's busy timeout; the requests that need it wait
// (retrying) and succeed once it is released, never answering busy.
func TestBusyIsRetried(t *testing.T) {
	ctx := context.Background()
	st := storetest.OpenStoreWith(t, wsstore.Options{Index: index.Options{BusyTimeout: 5 * time.Millisecond}})
	_, tok, err := st.Tokens.Create(ctx, tokens.Spec{})
	require.NoError(t, err)
	srv := httptest.NewServer(httpapi.New(httpapi.FromStore(st), httpapi.Options{}))
	defer srv.Close()

	raw, err := sql.Open("sqlite", filepath.Join(st.Dir, wsstore.DBName)+"?_pragma=busy_timeout(5000)")
	require.NoError(t, err)
	defer raw.Close()
	conn, err := raw.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.ExecContext(ctx, `BEGIN IMMEDIATE`)
	require.NoError(t, err)
	released := make(chan struct{})
	go func() {
		time.Sleep(300 * time.Millisecond)
		_, err := conn.ExecContext(ctx, `ROLLBACK`)
		assert.NoError(t, err)
		close(released)
	}()

	send := func(method, u, body string) (int, string) {
		req, err := http.NewRequest(method, srv.URL+u, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	status, body := send(http.MethodPost, "/workspace/upload?actor=alice&path=a.md", "hello")
	assert.Equal(t, http.StatusOK, status, body)
	status, body = send(http.MethodPost, "/v1/op", `{"op":"actor.upload","actor":"alice","path":"b.md","content":"op"}`)
	assert.Equal(t, http.StatusOK, status, body)
	<-released
	status, body = send(http.MethodGet, "/workspace/file?actor=alice&path=a.md", "")
	assert.Equal(t, http.StatusOK, status)
	assert.Equal(t, "hello", body)
}
