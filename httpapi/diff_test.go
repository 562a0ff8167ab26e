package httpapi_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/httpapi"
)

// holdTurn starts an upload whose handler holds a transfer's turn until
// release is called (at the latest when the test ends): its body is asked
// for (100 Continue, sent when the handler first reads it, after it took
// its turn) and then never comes.
func (s *server) holdTurn() (release func()) {
	s.t.Helper()
	body, feed := io.Pipe()
	reading := make(chan struct{})
	done := make(chan struct{})
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		Got100Continue: func() { close(reading) },
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url("/workspace/upload", "actor", "held", "path", "held.txt"), body)
	require.NoError(s.t, err)
	req.Header.Set("Authorization", "Bearer "+s.full)
	req.Header.Set("Expect", "100-continue")
	client := &http.Client{Transport: &http.Transport{ExpectContinueTimeout: time.Hour}}
	go func() {
		defer close(done)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	<-reading
	var once sync.Once
	release = func() {
		once.Do(func() {
			feed.Close()
			<-done
			client.CloseIdleConnections()
		})
	}
	s.t.Cleanup(release)
	return release
}

// TestRunDiffIsATransfer: GET /v1/runs/{run}/diff answers a page holding
// up to maxBytes of the files' text, read whole, as the diff op does: it
// is served in turn, so with every turn taken it waits, then is answered
// 503 store.busy, as the diff op is; once a turn is free it is served.
func TestRunDiffIsATransfer(t *testing.T) {
	s := newServer(t, httpapi.Options{MaxTransfers: 1, BusyDeadline: 200 * time.Millisecond})
	s.mustOp(map[string]any{"op": "run.create", "runId": "r1", "chat": map[string]any{"kind": "c", "stableChatId": "c1"}})
	s.mustOp(map[string]any{"op": "write", "runId": "r1", "path": "output/a.md", "content": "one\ntwo\n"})

	release := s.holdTurn()
	resp, b := s.do(http.MethodGet, s.url("/v1/runs/r1/diff", "from", "1"), s.full, nil)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "%s", b)
	assert.Equal(t, "store.busy", errCode(t, b))
	assert.Equal(t, "1", resp.Header.Get("Retry-After"))
	status, m := s.op(s.full, map[string]any{"op": "diff", "runId": "r1", "from": 1})
	assert.Equal(t, http.StatusServiceUnavailable, status, "the diff op waits as well: %v", m)
	resp, b = s.do(http.MethodGet, s.url("/v1/runs/r1/diff", "from", "x"), s.full, nil)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "a bad request is answered at once: %s", b)

	release()
	m = s.okJSON(http.MethodGet, s.url("/v1/runs/r1/diff", "from", "1"), nil)
	changes, _ := m["changes"].([]any)
	require.Len(t, changes, 1, "%v", m)
	assert.Contains(t, changes[0].(map[string]any)["unified"], "+two")
}

// TestDiffMaxBytesIsBounded: a diff's page is held whole while it is
// answered, so through this API its maxBytes may be at most MaxDiffBytes:
// GET /v1/runs/{run}/diff and the diff and runs.diff ops refuse more with
// 400 workspace.invalid_argument (the op's id echoed), and take that much.
func TestDiffMaxBytesIsBounded(t *testing.T) {
	s := newServer(t, httpapi.Options{})
	s.mustOp(map[string]any{"op": "run.create", "runId": "r1", "chat": map[string]any{"kind": "c", "stableChatId": "c1"}})
	s.mustOp(map[string]any{"op": "write", "runId": "r1", "path": "output/a.md", "content": "one\ntwo\n"})
	most, over := strconv.Itoa(httpapi.MaxDiffBytes), strconv.Itoa(httpapi.MaxDiffBytes+1)

	resp, b := s.do(http.MethodGet, s.url("/v1/runs/r1/diff", "from", "1", "maxBytes", over), s.full, nil)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s", b)
	assert.Equal(t, "workspace.invalid_argument", errCode(t, b))
	assert.Contains(t, string(b), "limit=")
	m := s.okJSON(http.MethodGet, s.url("/v1/runs/r1/diff", "from", "1", "maxBytes", most), nil)
	assert.Len(t, m["changes"], 1, "%v", m)

	for _, op := range []string{"diff", "runs.diff"} {
		status, m := s.op(s.full, map[string]any{"op": op, "id": 9, "runId": "r1", "from": 1, "maxBytes": httpapi.MaxDiffBytes + 1})
		assert.Equal(t, http.StatusBadRequest, status, "%s: %v", op, m)
		assert.Equal(t, float64(9), m["id"], op)
		errBody, _ := m["error"].(map[string]any)
		assert.Equal(t, "workspace.invalid_argument", errBody["code"], "%s: %v", op, m)
		res := s.mustOp(map[string]any{"op": op, "runId": "r1", "from": 1, "maxBytes": httpapi.MaxDiffBytes})
		assert.Len(t, res["changes"], 1, "%s: %v", op, res)
	}
}
