package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/actors"
	"github.com/wsstore/wsstore/httpapi"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/protocol"
	"github.com/wsstore/wsstore/tokens"
	"github.com/wsstore/wsstore/wserr"
)

// busyAfterAStep is a store whose collections free a blob in a step and
// then find the store busy.
type busyAfterAStep struct {
	protocol.Maintenance
	calls *int
}

func (m busyAfterAStep) CollectSteps(context.Context, wsstore.GCStepOptions) (wsstore.GCReport, error) {
	*m.calls++
	return wsstore.GCReport{Freed: wsstore.ObjectCounts{Blobs: 1}, FreedBytes: 10},
		wserr.New(wserr.Busy, "gc", "", "database is locked")
}

// TestOpBusyAfterAStepIsAnsweredWithWhatCommitted: POST /v1/op retries an
// op the store was too busy for, but not one that failed busy after some
// of its steps committed (another attempt's answer would leave them out):
// that is answered 503 at once, with partial.
func TestOpBusyAfterAStepIsAnsweredWithWhatCommitted(t *testing.T) {
	st := storetest.OpenStore(t)
	_, tok, err := st.Tokens.Create(context.Background(), tokens.Spec{})
	require.NoError(t, err)
	calls := 0
	b := httpapi.FromStore(st)
	b.Protocol.Store = busyAfterAStep{st, &calls}
	s := serverOver(t, st, b, httpapi.Options{BusyDeadline: 300 * time.Millisecond})
	resp, body := s.do(http.MethodPost, s.srv.URL+"/v1/op", tok, strings.NewReader(`{"op":"gc"}`))
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, 1, calls, "not run again")
	var got struct {
		Error   protocol.ErrorBody `json:"error"`
		Partial wsstore.GCReport   `json:"partial"`
	}
	require.NoError(t, json.Unmarshal(body, &got), "%s", body)
	assert.Equal(t, wserr.Busy, got.Error.Code)
	assert.Equal(t, 1, got.Partial.Freed.Blobs)
}

// failingCollector prunes as the store does, then fails its collection.
type failingCollector struct{ httpapi.Collector }

func (c failingCollector) ActorGC(ctx context.Context, opt actors.GCOptions, gc wsstore.GCOptions) (actors.GCReport, wsstore.GCReport, error) {
	pruned, _, err := c.Collector.ActorGC(ctx, opt, gc)
	if err == nil {
		err = wserr.New(wserr.DiskFull, "gc", "", "disk full")
	}
	return pruned, wsstore.GCReport{}, err
}

// TestWorkspaceGCFailingAfterThePruneSaysWhatItPruned: POST /workspace/gc
// whose collection fails after the versions were pruned answers the error
// with partial, the answer's shape, counting them.
func TestWorkspaceGCFailingAfterThePruneSaysWhatItPruned(t *testing.T) {
	ctx := context.Background()
	st := storetest.OpenStore(t)
	_, tok, err := st.Tokens.Create(ctx, tokens.Spec{})
	require.NoError(t, err)
	for _, v := range []string{"1", "2", "3"} {
		_, err := st.Actors.Upload(ctx, "alice", "a.md", strings.NewReader(v))
		require.NoError(t, err)
	}
	b := httpapi.FromStore(st)
	b.GC = failingCollector{b.GC}
	s := serverOver(t, st, b, httpapi.Options{})
	resp, body := s.do(http.MethodPost, s.srv.URL+"/workspace/gc", tok, nil)
	assert.Equal(t, http.StatusInsufficientStorage, resp.StatusCode, "%s", body)
	var got struct {
		Error   protocol.ErrorBody `json:"error"`
		Partial struct {
			Pruned actors.GCReport  `json:"pruned"`
			GC     wsstore.GCReport `json:"gc"`
		} `json:"partial"`
	}
	require.NoError(t, json.Unmarshal(body, &got), "%s", body)
	assert.Equal(t, wserr.DiskFull, got.Error.Code)
	assert.Equal(t, actors.GCReport{Actors: 1, Pruned: 2}, got.Partial.Pruned)
	stats, err := st.Actors.Stats(ctx, "alice")
	require.NoError(t, err)
	assert.Equal(t, int64(1), stats.Versions, "pruned, as partial says")
}

// serverOver serves b, over st, as newServer serves a store.
func serverOver(t *testing.T, st *wsstore.Store, b httpapi.Backend, opts httpapi.Options) *server {
	t.Helper()
	h := mustNew(t, b, opts)
	srv := httptest.NewServer(h)
	t.Cleanup(func() { h.Close(); srv.Close() })
	return &server{t: t, st: st, h: h, srv: srv}
}
