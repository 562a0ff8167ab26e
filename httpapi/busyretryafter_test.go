package httpapi_test

import (
	"context"
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

// TestBusyPastTheDeadlineSaysWhenToRetry: a store another process keeps
// busy past the busy deadline is answered 503 store.busy with
// Retry-After, as a transfer that found no turn is, by the Workspace
// endpoints and by /v1/op alike; nothing changes.
func TestBusyPastTheDeadlineSaysWhenToRetry(t *testing.T) {
	ctx := context.Background()
	st := storetest.OpenStoreWith(t, wsstore.Options{Index: index.Options{BusyTimeout: 5 * time.Millisecond}})
	_, tok, err := st.Tokens.Create(ctx, tokens.Spec{})
	require.NoError(t, err)
	srv := httptest.NewServer(mustNew(t, httpapi.FromStore(st), httpapi.Options{BusyDeadline: 50 * time.Millisecond, SpoolDir: t.TempDir()}))
	defer srv.Close()
	release := storetest.HoldWriteLock(t, filepath.Join(st.Dir, wsstore.DBName))
	defer release()

	for _, rq := range [][3]string{
		{http.MethodPost, "/workspace/upload?actor=alice&path=a.md", "hello"},
		{http.MethodDelete, "/workspace/delete-by-prefix?actor=alice&prefix=a", ""},
		{http.MethodPost, "/v1/op", `{"op":"actor.upload","actor":"alice","path":"b.md","content":"op"}`},
	} {
		req, err := http.NewRequest(rq[0], srv.URL+rq[1], strings.NewReader(rq[2]))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "%s %s", rq[0], rq[1])
		assert.Equal(t, "1", resp.Header.Get("Retry-After"), "%s %s", rq[0], rq[1])
	}
	release()
	s, err := st.Actors.Stats(ctx, "alice")
	require.NoError(t, err)
	assert.Zero(t, s.Seq, "nothing changed")
}
