package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/actors"
	"github.com/wsstore/wsstore/httpapi"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/tokens"
	"github.com/wsstore/wsstore/wserr"
)

// busyOnceCollector is a Collector whose first collection prunes and is
// then busy, as one whose store gc (or a later page of the prune) meets
// another process's write lock: the versions pruned stay pruned.
type busyOnceCollector struct {
	httpapi.Collector
	calls *int
}

func (c busyOnceCollector) ActorGC(ctx context.Context, opt actors.GCOptions, gc wsstore.GCOptions) (actors.GCReport, wsstore.GCReport, error) {
	*c.calls++
	pruned, rep, err := c.Collector.ActorGC(ctx, opt, gc)
	if *c.calls == 1 && err == nil {
		return pruned, wsstore.GCReport{}, wserr.New(wserr.Busy, "gc", "", "database is locked")
	}
	return pruned, rep, err
}

// TestWorkspaceGCRetriedCountsWhatItPruned: a POST /workspace/gc retried
// after a busy store answers the versions the request pruned, those the
// attempt that met the busy store pruned included.
func TestWorkspaceGCRetriedCountsWhatItPruned(t *testing.T) {
	ctx := context.Background()
	st := storetest.OpenStore(t)
	_, tok, err := st.Tokens.Create(ctx, tokens.Spec{})
	require.NoError(t, err)
	for _, v := range []string{"1", "2", "3"} {
		_, err := st.Actors.Upload(ctx, "alice", "a.md", strings.NewReader(v))
		require.NoError(t, err)
	}
	calls := 0
	b := httpapi.FromStore(st)
	b.GC = busyOnceCollector{b.GC, &calls}
	h := mustNew(t, b, httpapi.Options{})
	srv := httptest.NewServer(h)
	t.Cleanup(func() { h.Close(); srv.Close() })

	req, err := http.NewRequest(http.MethodPost, srv.URL+"/workspace/gc", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var got struct {
		Pruned actors.GCReport `json:"pruned"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&got))
	require.Equal(t, 2, calls, "retried once")
	assert.Equal(t, actors.GCReport{Actors: 1, Pruned: 2}, got.Pruned)
}
