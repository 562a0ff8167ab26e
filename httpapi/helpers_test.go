package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/httpapi"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/tokens"
)

// server is the API over a fresh store, on a real listener on 127.0.0.1.
type server struct {
	t   *testing.T
	st  *wsstore.Store
	h   *httpapi.Handler
	srv *httptest.Server
	// full is a token that may do everything.
	full string
}

func newServer(t *testing.T, opts httpapi.Options) *server {
	t.Helper()
	st := storetest.OpenStore(t)
	if opts.FollowPoll == 0 {
		opts.FollowPoll = 5 * time.Millisecond
	}
	h := mustNew(t, httpapi.FromStore(st), opts)
	srv := httptest.NewServer(h)
	t.Cleanup(func() { h.Close(); srv.Close() })
	s := &server{t: t, st: st, h: h, srv: srv}
	s.full = s.token(tokens.Spec{Name: "full"})
	return s
}

// token creates a token as spec says and returns it.
func (s *server) token(spec tokens.Spec) string {
	s.t.Helper()
	_, tok, err := s.st.Tokens.Create(context.Background(), spec)
	require.NoError(s.t, err)
	return tok
}

// url builds the address of path with query parameters k1, v1, k2, v2, …
func (s *server) url(path string, kv ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		q.Set(kv[i], kv[i+1])
	}
	u := s.srv.URL + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u
}

// do sends a request with token (none if "") and returns the response,
// its body read whole.
func (s *server) do(method, u, token string, body io.Reader, hdr ...string) (*http.Response, []byte) {
	s.t.Helper()
	req, err := http.NewRequest(method, u, body)
	require.NoError(s.t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	resp, err := s.srv.Client().Do(req)
	require.NoError(s.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(s.t, err)
	return resp, b
}

// okJSON sends a request with the full token, requires 200 and decodes
// the body into a map.
func (s *server) okJSON(method, u string, body io.Reader) map[string]any {
	s.t.Helper()
	resp, b := s.do(method, u, s.full, body)
	require.Equal(s.t, http.StatusOK, resp.StatusCode, "%s %s: %s", method, u, b)
	var m map[string]any
	require.NoError(s.t, json.Unmarshal(b, &m), "%s", b)
	return m
}

// op sends one protocol request with token and returns the status and
// the response object.
func (s *server) op(token string, req map[string]any) (int, map[string]any) {
	s.t.Helper()
	line, err := json.Marshal(req)
	require.NoError(s.t, err)
	resp, b := s.do(http.MethodPost, s.url("/v1/op"), token, bytes.NewReader(line))
	var m map[string]any
	require.NoError(s.t, json.Unmarshal(b, &m), "%s", b)
	return resp.StatusCode, m
}

// mustOp sends a request with the full token and requires it to succeed.
func (s *server) mustOp(req map[string]any) map[string]any {
	s.t.Helper()
	status, m := s.op(s.full, req)
	require.Equal(s.t, http.StatusOK, status, "%v", m)
	require.Equal(s.t, true, m["ok"], "%v", m)
	res, _ := m["result"].(map[string]any)
	return res
}

// errCode decodes an error body's code.
func errCode(t *testing.T, b []byte) string {
	t.Helper()
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal(b, &e), "%s", b)
	require.NotEmpty(t, e.Error.Message, "%s", b)
	return e.Error.Code
}

// compareWriter counts the bytes written and notes whether they differ
// from want's.
type compareWriter struct {
	want   io.Reader
	buf    []byte
	n      int64
	differ bool
}

func (w *compareWriter) Write(b []byte) (int, error) {
	if cap(w.buf) < len(b) {
		w.buf = make([]byte, len(b))
	}
	want := w.buf[:len(b)]
	if _, err := io.ReadFull(w.want, want); err != nil || !bytes.Equal(want, b) {
		w.differ = true
	}
	w.n += int64(len(b))
	return len(b), nil
}

// mustNew is httpapi.New for options the test knows are valid.
func mustNew(tb testing.TB, b httpapi.Backend, opts httpapi.Options) *httpapi.Handler {
	tb.Helper()
	h, err := httpapi.New(b, opts)
	require.NoError(tb, err)
	return h
}
