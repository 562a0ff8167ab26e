package httpapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/actors"
	"github.com/wsstore/wsstore/httpapi"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/tokens"
	"github.com/wsstore/wsstore/vfs"
)

// gatedSpaces counts the large listing pages being read at once and
// holds each until gate closes; a page of at most
// httpapi.MaxListEntriesUnturned entries passes.
type gatedSpaces struct {
	*actors.Spaces
	gate         chan struct{}
	inside, most atomic.Int64
}

func (g *gatedSpaces) hold(limit int) {
	if limit > 0 && limit <= httpapi.MaxListEntriesUnturned {
		return
	}
	n := g.inside.Add(1)
	for m := g.most.Load(); n > m && !g.most.CompareAndSwap(m, n); m = g.most.Load() {
	}
	<-g.gate
	g.inside.Add(-1)
}

func (g *gatedSpaces) ListPage(ctx context.Context, actor, path string, depth int, page vfs.ListPage) ([]vfs.Listed, bool, error) {
	g.hold(page.Limit)
	return g.Spaces.ListPage(ctx, actor, path, depth, page)
}

func (g *gatedSpaces) WorkspacePage(ctx context.Context, only []string, path string, depth int, cursor actors.WorkspaceCursor, limit int) ([]actors.WorkspaceEntry, bool, error) {
	g.hold(limit)
	return g.Spaces.WorkspacePage(ctx, only, path, depth, cursor, limit)
}

// TestLargeListingsTakeTurns: a listing page that may hold more than
// MaxListEntriesUnturned entries (GET /workspace/files with an actor or
// without, and the actor.ls op through POST /v1/op; none asking for a
// limit asks for 10,000) takes a transfer's turn, as a download does: of
// eight such listings sent at once with MaxTransfers 2, two are read at
// a time, the other six wait and are answered 503 store.busy once
// BusyDeadline passes; a page of at most MaxListEntriesUnturned entries
// is served while the turns are taken.
func TestLargeListingsTakeTurns(t *testing.T) {
	st := storetest.OpenStore(t)
	spaces := &gatedSpaces{Spaces: st.Actors, gate: make(chan struct{})}
	b := httpapi.FromStore(st)
	b.Actors, b.Protocol.Actors = spaces, spaces
	h := mustNew(t, b, httpapi.Options{MaxTransfers: 2, BusyDeadline: 200 * time.Millisecond})
	t.Cleanup(h.Close)
	_, tok, err := st.Tokens.Create(context.Background(), tokens.Spec{Name: "full"})
	require.NoError(t, err)
	serve := func(method, u, body string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, u, strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+tok)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec
	}
	rec := serve(http.MethodPost, "/workspace/upload?actor=a&path=f.txt", "f\n")
	require.Equal(t, http.StatusOK, rec.Code, "%s", rec.Body)

	listings := []struct{ method, u, body string }{
		{http.MethodGet, "/workspace/files?actor=a", ""},
		{http.MethodGet, "/workspace/files?actor=a&limit=5000", ""},
		{http.MethodGet, "/workspace/files", ""},
		{http.MethodGet, "/workspace/files?limit=100000", ""},
		{http.MethodPost, "/v1/op", `{"op":"actor.ls","actor":"a"}`},
		{http.MethodPost, "/v1/op", `{"op":"actor.ls","actor":"a","limit":100000}`},
		{http.MethodPost, "/v1/op", `{"op":"actor.ls"}`},
		{http.MethodPost, "/v1/op", `{"op":"actor.ls","limit":1001}`},
	}
	codes := make(chan int, len(listings))
	for _, l := range listings {
		go func() { codes <- serve(l.method, l.u, l.body).Code }()
	}
	// Those without a turn are answered once BusyDeadline passes; the two
	// with one are held in the read until the gate opens.
	count := map[int]int{}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for got := 0; got < len(listings)-2; {
		select {
		case c := <-codes:
			count[c]++
			got++
		case <-tick.C:
			if n := spaces.inside.Load(); n > 2 {
				close(spaces.gate)
				t.Fatalf("%d listings read at once, with two turns", n)
			}
		}
	}
	assert.Equal(t, int64(2), spaces.inside.Load(), "two listings read at once")
	rec = serve(http.MethodGet, "/workspace/files?actor=a&limit=1000", "")
	assert.Equal(t, http.StatusOK, rec.Code, "a page of 1,000 entries is served at once: %s", rec.Body)
	rec = serve(http.MethodPost, "/v1/op", `{"op":"actor.ls","actor":"a","limit":10}`)
	assert.Equal(t, http.StatusOK, rec.Code, "a small page is served at once: %s", rec.Body)
	close(spaces.gate)
	for range 2 {
		count[<-codes]++
	}
	t.Logf("answers: %v; most listings read at once: %d", count, spaces.most.Load())
	assert.Equal(t, map[int]int{http.StatusOK: 2, http.StatusServiceUnavailable: len(listings) - 2}, count)
	assert.Equal(t, int64(2), spaces.most.Load(), "never more listings read at once than turns")
}

// TestRunListingsTakeTurns: GET /v1/runs/{run}/files and the list,
// checkpoint.view and actors.list ops, asking for more than
// MaxListEntriesUnturned entries (or for the default), wait for a
// transfer's turn: with every turn taken they are answered 503
// store.busy; a page of fewer entries is served at once, and once a turn
// is free the large one is too.
func TestRunListingsTakeTurns(t *testing.T) {
	s := newServer(t, httpapi.Options{MaxTransfers: 1, BusyDeadline: 200 * time.Millisecond})
	s.mustOp(map[string]any{"op": "run.create", "runId": "r1", "chat": map[string]any{"kind": "c", "stableChatId": "c1"}})
	s.mustOp(map[string]any{"op": "write", "runId": "r1", "path": "output/a.md", "content": "one\n"})

	release := s.holdTurn()
	for _, u := range []string{s.url("/v1/runs/r1/files"), s.url("/v1/runs/r1/files", "limit", "1001")} {
		resp, b := s.do(http.MethodGet, u, s.full, nil)
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "%s: %s", u, b)
		assert.Equal(t, "store.busy", errCode(t, b))
		assert.Equal(t, "1", resp.Header.Get("Retry-After"))
	}
	for _, req := range []map[string]any{
		{"op": "list", "runId": "r1"},
		{"op": "list", "runId": "r1", "limit": 100000},
		{"op": "checkpoint.view", "runId": "r1", "checkpointId": "cp_000001"},
		{"op": "actors.list", "limit": 5000},
	} {
		status, m := s.op(s.full, req)
		assert.Equal(t, http.StatusServiceUnavailable, status, "%v: %v", req, m)
	}
	m := s.okJSON(http.MethodGet, s.url("/v1/runs/r1/files", "limit", "1000"), nil)
	assert.NotEmpty(t, m["entries"], "a page of 1,000 entries is served at once")
	s.mustOp(map[string]any{"op": "list", "runId": "r1", "limit": 1000})
	s.mustOp(map[string]any{"op": "actors.list", "limit": 10})

	release()
	m = s.okJSON(http.MethodGet, s.url("/v1/runs/r1/files"), nil)
	assert.NotEmpty(t, m["entries"], "served once a turn is free")
	s.mustOp(map[string]any{"op": "list", "runId": "r1"})
}
