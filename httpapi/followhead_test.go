package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/httpapi"
)

// TestFollowHead: a HEAD of the events follow route, long poll or
// stream, waits for nothing: with no event to come and a server that
// would wait an hour, the handler returns with the headers its GET would
// send and no body. It waited as a GET does (a stream for as long as the
// client stayed). A HEAD is checked as its GET is: a run that does not
// exist is 404, a wait that is no duration 400.
func TestFollowHead(t *testing.T) {
	s := newServer(t, httpapi.Options{MaxWait: time.Hour, Heartbeat: time.Hour})
	s.mustOp(map[string]any{"op": "run.create", "runId": "r1", "chat": map[string]any{"kind": "c", "stableChatId": "c1"}})
	head := func(accept string, kv ...string) *httptest.ResponseRecorder {
		t.Helper()
		req := httptest.NewRequest(http.MethodHead, s.url("/v1/runs/r1/events/follow", kv...), nil)
		req.Header.Set("Authorization", "Bearer "+s.full)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		rec := httptest.NewRecorder()
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.h.ServeHTTP(rec, req)
		}()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			require.FailNow(t, "the HEAD is still waiting for events", "%s %v", accept, kv)
		}
		return rec
	}
	rec := head("", "afterSeq", "1000", "wait", "1h")
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.Equal(t, "application/json; charset=utf-8", rec.Header().Get("Content-Type"))
	assert.Empty(t, rec.Body.String())

	rec = head("text/event-stream", "afterSeq", "1000")
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.Equal(t, "text/event-stream", rec.Header().Get("Content-Type"))
	assert.Empty(t, rec.Body.String())

	rec = head("", "wait", "soon")
	assert.Equal(t, http.StatusBadRequest, rec.Code)
	req := httptest.NewRequest(http.MethodHead, s.url("/v1/runs/nope/events/follow"), nil)
	req.Header.Set("Authorization", "Bearer "+s.full)
	rec = httptest.NewRecorder()
	s.h.ServeHTTP(rec, req)
	assert.Equal(t, http.StatusNotFound, rec.Code)
}
