package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/httpapi"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/tokens"
)

// actsOnFlush stands for the network: once the commit's response is
// flushed to the client, the client has it whole and acts on it (here:
// sends finish on another connection) while the server goes on.
type actsOnFlush struct {
	http.ResponseWriter
	once sync.Once
	act  func()
	done chan struct{}
}

func (w *actsOnFlush) Flush() {
	http.NewResponseController(w.ResponseWriter).Flush()
	w.start()
	// The server goes on a moment later, so the client's request lands
	// while the commit is still being recorded.
	select {
	case <-w.done:
	case <-time.After(100 * time.Millisecond):
	}
}

func (w *actsOnFlush) start() {
	w.once.Do(func() {
		go func() {
			defer close(w.done)
			w.act()
		}()
	})
}

// TestFinishRightAfterAnHTTPCommit: a host commits over /v1/op and,
// holding the ok response with its message, finishes the run at once on
// another connection. The response is flushed from the commit's sink,
// before the outcome is recorded and the chat's save turn released, so
// the finish may land while the run has a commit being saved: that is
// store.busy, which /v1/op retries, and the finish goes through.
func TestFinishRightAfterAnHTTPCommit(t *testing.T) {
	st := storetest.OpenStore(t)
	h := mustNew(t, httpapi.FromStore(st), httpapi.Options{})
	_, tok, err := st.Tokens.Create(context.Background(), tokens.Spec{Name: "full"})
	require.NoError(t, err)
	var srv *httptest.Server
	// Each request on a connection of its own: one that waited for the
	// commit's connection would reach the server only after the commit.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	post := func(body string) (int, []byte) {
		r, err := http.NewRequest(http.MethodPost, srv.URL+"/v1/op", bytes.NewReader([]byte(body)))
		require.NoError(t, err)
		r.Header.Set("Authorization", "Bearer "+tok)
		resp, err := client.Do(r)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	var finishStatus int
	var finishBody []byte
	finished := make(chan struct{})
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		if bytes.Contains(b, []byte(`"op":"commit"`)) {
			aw := &actsOnFlush{ResponseWriter: w, done: finished, act: func() {
				finishStatus, finishBody = post(`{"op":"finish","runId":"r"}`)
			}}
			h.ServeHTTP(aw, r)
			aw.start() // not flushed early: the client acts once the answer is complete
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { h.Close(); srv.Close() })

	status, b := post(`{"op":"run.create","runId":"r","chat":{"kind":"chat","stableChatId":"c"}}`)
	require.Equal(t, http.StatusOK, status, "%s", b)
	status, b = post(`{"op":"write","runId":"r","path":"output/main.md","content":"the reply"}`)
	require.Equal(t, http.StatusOK, status, "%s", b)
	status, b = post(`{"op":"commit","runId":"r"}`)
	require.Equal(t, http.StatusOK, status, "%s", b)
	var commit struct{ OK bool }
	require.NoError(t, json.Unmarshal(b, &commit))
	require.True(t, commit.OK)

	<-finished // the commit's answer is whole to the client when flushed: the finish may still be going
	assert.Equal(t, http.StatusOK, finishStatus, "finish sent once the commit's ok response was in hand: %s", finishBody)
}

// goneWriter behaves as net/http's response writer does once the client's
// connection broke: the flush fails, and so does the write unless it
// lands in the server's buffer (buffered).
type goneWriter struct {
	http.ResponseWriter
	gone, buffered bool
}

var errGone = errors.New("write tcp: broken pipe")

func (w *goneWriter) Write(b []byte) (int, error) {
	if w.gone && !w.buffered {
		return 0, errGone
	}
	return w.ResponseWriter.Write(b)
}
func (w *goneWriter) Flush() { _ = w.FlushError() }
func (w *goneWriter) FlushError() error {
	if w.gone {
		return errGone
	}
	return http.NewResponseController(w.ResponseWriter).Flush()
}

// TestHTTPCommitToAClientThatWentAway: a commit over /v1/op whose
// response cannot be written, or is written into the server's buffer but
// cannot be flushed (the client's connection broke), is recorded failed,
// not completed: the client never had the message.
func TestHTTPCommitToAClientThatWentAway(t *testing.T) {
	for _, buffered := range []bool{false, true} {
		t.Run(map[bool]string{false: "WriteFails", true: "FlushFails"}[buffered], func(t *testing.T) {
			st := storetest.OpenStore(t)
			h := mustNew(t, httpapi.FromStore(st), httpapi.Options{})
			_, tok, err := st.Tokens.Create(context.Background(), tokens.Spec{Name: "full"})
			require.NoError(t, err)
			op := func(req string, gone bool) int {
				r := httptest.NewRequest(http.MethodPost, "/v1/op", strings.NewReader(req))
				r.Header.Set("Authorization", "Bearer "+tok)
				rec := httptest.NewRecorder()
				h.ServeHTTP(&goneWriter{ResponseWriter: rec, gone: gone, buffered: buffered}, r)
				return rec.Code
			}
			require.Equal(t, http.StatusOK, op(`{"op":"run.create","runId":"r","chat":{"kind":"chat","stableChatId":"c"}}`, false))
			require.Equal(t, http.StatusOK, op(`{"op":"write","runId":"r","path":"output/main.md","content":"the reply"}`, false))

			op(`{"op":"commit","runId":"r"}`, true)

			cs, err := st.Runs.Commits(context.Background(), "r")
			require.NoError(t, err)
			require.Len(t, cs, 1)
			assert.Equal(t, runs.CommitFailed, cs[0].Status)
		})
	}
}

// TestHTTPCommitAnswerStatesItsLength: a commit's answer, flushed from its
// sink before its outcome is recorded, states its length, so a client has
// it whole once it is flushed rather than waiting for a closing chunk that
// a server ended meanwhile never sends.
func TestHTTPCommitAnswerStatesItsLength(t *testing.T) {
	s := newServer(t, httpapi.Options{})
	s.okJSON(http.MethodPost, s.url("/v1/op"), strings.NewReader(`{"op":"run.create","runId":"r","chat":{"kind":"chat","stableChatId":"c"}}`))
	s.okJSON(http.MethodPost, s.url("/v1/op"), strings.NewReader(`{"op":"write","runId":"r","path":"output/main.md","content":"the reply"}`))
	resp, b := s.do(http.MethodPost, s.url("/v1/op"), s.full, strings.NewReader(`{"op":"commit","runId":"r"}`))
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	assert.Equal(t, int64(len(b)), resp.ContentLength)
	assert.Empty(t, resp.TransferEncoding)
}
