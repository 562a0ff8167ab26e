package httpapi_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/httpapi"
	"github.com/wsstore/wsstore/tokens"
)

// endpoint is one request of the authorization matrix: on actor bob's
// space (or a run), a change or a read.
type endpoint struct {
	name   string
	method string
	path   string
	kv     []string
	body   string
	write  bool
	store  bool // beyond one actor: runs, every actor's gc
}

func matrixEndpoints() []endpoint {
	op := func(name, body string, write, store bool) endpoint {
		return endpoint{name: "op/" + name, method: http.MethodPost, path: "/v1/op", body: body, write: write, store: store}
	}
	return []endpoint{
		{name: "files", method: http.MethodGet, path: "/workspace/files", kv: []string{"actor", "bob"}},
		{name: "file", method: http.MethodGet, path: "/workspace/file", kv: []string{"actor", "bob", "path", "keep.md"}},
		{name: "upload", method: http.MethodPost, path: "/workspace/upload", kv: []string{"actor", "bob", "path", "new.md"}, body: "x", write: true},
		{name: "delete", method: http.MethodDelete, path: "/workspace/file", kv: []string{"actor", "bob", "path", "keep.md"}, write: true},
		{name: "stats", method: http.MethodGet, path: "/workspace/stats", kv: []string{"actor", "bob"}},
		{name: "gc", method: http.MethodPost, path: "/workspace/gc", kv: []string{"actor", "bob"}, write: true},
		{name: "gc-all", method: http.MethodPost, path: "/workspace/gc", write: true, store: true},
		{name: "delete-by-prefix", method: http.MethodDelete, path: "/workspace/delete-by-prefix", kv: []string{"actor", "bob", "prefix", "k"}, write: true},
		{name: "ops-help", method: http.MethodGet, path: "/v1/ops"},
		{name: "run", method: http.MethodGet, path: "/v1/runs/r1", store: true},
		{name: "checkpoints", method: http.MethodGet, path: "/v1/runs/r1/checkpoints", store: true},
		{name: "run-files", method: http.MethodGet, path: "/v1/runs/r1/files", store: true},
		{name: "run-file", method: http.MethodGet, path: "/v1/runs/r1/file", kv: []string{"path", "output/answer.md"}, store: true},
		{name: "diff", method: http.MethodGet, path: "/v1/runs/r1/diff", kv: []string{"from", "1"}, store: true},
		{name: "events", method: http.MethodGet, path: "/v1/runs/r1/events", store: true},
		{name: "export-actor", method: http.MethodGet, path: "/v1/export", kv: []string{"actor", "bob"}},
		{name: "export-all", method: http.MethodGet, path: "/v1/export", kv: []string{"all", "true"}, store: true},
		{name: "export-run", method: http.MethodGet, path: "/v1/export", kv: []string{"run", "r1"}, store: true},
		{name: "import", method: http.MethodPost, path: "/v1/import", body: "not an archive", write: true, store: true},
		{name: "follow", method: http.MethodGet, path: "/v1/runs/r1/events/follow", kv: []string{"wait", "1ms"}, store: true},
		op("read", `{"op":"read","runId":"r1","path":"output/answer.md"}`, false, true),
		op("write", `{"op":"write","runId":"r1","path":"output/answer.md","content":"pwned"}`, true, true),
		op("run.create", `{"op":"run.create","runId":"r9","chat":{"kind":"c","stableChatId":"z"}}`, true, true),
		op("actor.ls", `{"op":"actor.ls","actor":"bob"}`, false, false),
		op("actor.download", `{"op":"actor.download","actor":"bob","path":"keep.md"}`, false, false),
		op("actor.upload", `{"op":"actor.upload","actor":"bob","path":"new.md","content":"x"}`, true, false),
		op("actor.rm", `{"op":"actor.rm","actor":"bob","path":"keep.md"}`, true, false),
		op("actor.gc-all", `{"op":"actor.gc"}`, true, true),
		op("actor.upload-dup-key", `{"op":"actor.upload","actor":"alice","actor":"bob","path":"new.md","content":"x"}`, true, false),
		op("garbage", `{"op":`, true, true),
	}
}

// TestAuthorizationMatrix: for every endpoint, a request with no token, a
// malformed one, a wrong secret, a revoked token, a read-only token
// changing something, and a token for actor alice touching bob's space or
// a run: none succeeds, and nothing changes. The same requests with a
// token that may succeed are not refused.
func TestAuthorizationMatrix(t *testing.T) {
	s := newServer(t, httpapi.Options{})
	ctx := context.Background()
	s.newRun("r1")
	s.okJSON(http.MethodPost, s.url("/workspace/upload", "actor", "bob", "path", "keep.md"), strings.NewReader("bob's"))

	revokedTok := s.token(tokens.Spec{})
	revoked, err := s.st.Tokens.List(ctx)
	require.NoError(t, err)
	require.NoError(t, s.st.Tokens.Revoke(ctx, revoked[len(revoked)-1].ID))
	readOnly := s.token(tokens.Spec{ReadOnly: true})
	alice := s.token(tokens.Spec{Actors: []string{"alice"}})
	bobRO := s.token(tokens.Spec{Actors: []string{"bob"}, ReadOnly: true})
	bob := s.token(tokens.Spec{Actors: []string{"bob"}})
	id, _, _ := strings.Cut(strings.TrimPrefix(s.full, tokens.Prefix), "_")
	wrongSecret := tokens.Prefix + id + "_" + strings.Repeat("A", 43)

	type tokenCase struct {
		name, token string
		refuses     func(e endpoint) bool
		status      int
	}
	always := func(endpoint) bool { return true }
	cases := []tokenCase{
		{"NoToken", "", always, http.StatusUnauthorized},
		{"Malformed", "not-a-token", always, http.StatusUnauthorized},
		{"WrongSecret", wrongSecret, always, http.StatusUnauthorized},
		{"Revoked", revokedTok, always, http.StatusUnauthorized},
		{"ReadOnlyWriting", readOnly, func(e endpoint) bool { return e.write }, http.StatusForbidden},
		{"ActorAOnB", alice, func(e endpoint) bool { return e.name != "ops-help" }, http.StatusForbidden},
		{"ActorBReadOnlyWriting", bobRO, func(e endpoint) bool { return e.write || e.store }, http.StatusForbidden},
		{"ActorBBeyondB", bob, func(e endpoint) bool { return e.store }, http.StatusForbidden},
	}
	send := func(e endpoint, tok string) (*http.Response, []byte) {
		var body io.Reader
		if e.body != "" {
			body = strings.NewReader(e.body)
		}
		return s.do(e.method, s.url(e.path, e.kv...), tok, body)
	}
	state := func() string {
		_, a := s.do(http.MethodGet, s.url("/workspace/files", "actor", "bob", "depth", "9"), s.full, nil)
		_, b := s.do(http.MethodGet, s.url("/v1/runs/r1/events"), s.full, nil)
		_, c := s.do(http.MethodGet, s.url("/v1/runs/r9"), s.full, nil)
		return string(a) + string(b) + string(c)
	}
	before := state()
	unauthorizedSuccesses, refusals := 0, 0
	for _, tc := range cases {
		for _, e := range matrixEndpoints() {
			if !tc.refuses(e) {
				continue
			}
			t.Run(tc.name+"/"+e.name, func(t *testing.T) {
				resp, b := send(e, tc.token)
				refusals++
				if resp.StatusCode < 300 {
					unauthorizedSuccesses++
				}
				code := errCode(t, b)
				switch {
				case tc.status == http.StatusUnauthorized:
					assert.Equal(t, tc.status, resp.StatusCode, "%s", b)
					assert.Equal(t, "auth.unauthorized", code)
					assert.NotEmpty(t, resp.Header.Get("WWW-Authenticate"))
				case e.name == "op/garbage":
					// Names nothing to run: the client's mistake for any
					// valid token (TestOpUnreadableBodyIsTheClientsMistake).
					assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s", b)
					assert.Equal(t, "batch.invalid_json", code)
				default:
					assert.Equal(t, tc.status, resp.StatusCode, "%s", b)
					assert.Equal(t, "auth.forbidden", code)
				}
			})
		}
	}
	assert.Zero(t, unauthorizedSuccesses, "unauthorized successes")
	assert.Greater(t, refusals, 100)
	assert.Equal(t, before, state(), "no refused request changed anything")

	// The controls: a token that may do it is not refused.
	for _, e := range matrixEndpoints() {
		t.Run("Allowed/"+e.name, func(t *testing.T) {
			tok := bob
			if e.store || e.name == "ops-help" {
				tok = s.full
			}
			if e.name == "op/garbage" {
				tok = s.full
			}
			resp, b := send(e, tok)
			assert.NotContains(t, []int{http.StatusUnauthorized, http.StatusForbidden}, resp.StatusCode, "%s", b)
		})
	}
}

// countingBody counts the bytes read from it.
type countingBody struct {
	r io.Reader
	n int64
}

func (c *countingBody) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *countingBody) Close() error { return nil }

// TestOpReadsNoBodyWithoutAToken: /v1/op refuses a request without a valid
// token before it reads the body, so a client without one cannot make the
// server hold up to --max-request-bytes per connection.
func TestOpReadsNoBodyWithoutAToken(t *testing.T) {
	s := newServer(t, httpapi.Options{})
	for _, auth := range []string{"", "Bearer wst_bogus"} {
		body := &countingBody{r: io.LimitReader(zeros{}, 32<<20)}
		req := httptest.NewRequest(http.MethodPost, "/v1/op", body)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		rec := httptest.NewRecorder()
		s.h.ServeHTTP(rec, req)
		assert.Equal(t, http.StatusUnauthorized, rec.Code, "%q", auth)
		assert.Zero(t, body.n, "%q: bytes of the body read", auth)
	}
}

// zeros reads as an endless run of 'a'.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	return len(p), nil
}

// TestOpUnreadableBodyIsTheClientsMistake: a /v1/op body that is not a
// JSON object with a string op names nothing that could run, so every
// token, a read-only or actor-limited one too, gets 400 for it
// (batch.invalid_json when it is not JSON, batch.invalid_request when it
// is no request, batch.unknown_op when its op is not in the table), as a
// full token does, not a refusal of what it may do; one that names an op
// the token may not run is still 403, and nothing changes.
func TestOpUnreadableBodyIsTheClientsMistake(t *testing.T) {
	s := newServer(t, httpapi.Options{})
	s.newRun("r1")
	ro := s.token(tokens.Spec{ReadOnly: true})
	alice := s.token(tokens.Spec{Actors: []string{"alice"}})
	for _, tok := range []string{s.full, ro, alice} {
		for body, code := range map[string]string{
			`not json`: "batch.invalid_json", `{"op":"write"} {"op":"write"}`: "batch.invalid_json",
			`[]`: "batch.invalid_request", `{"op":7}`: "batch.invalid_request", `{}`: "batch.invalid_request",
			`{"op":null}`: "batch.invalid_request", "{\"op\":\"actor.ls\",\"actor\":\"\xff\"}": "batch.invalid_json",
		} {
			resp, b := s.do(http.MethodPost, s.url("/v1/op"), tok, strings.NewReader(body))
			assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s: %s", body, b)
			assert.Equal(t, code, errCode(t, b), "%s", body)
		}
	}
	// The request's id comes back, as a session gives it back.
	for _, tok := range []string{s.full, ro, alice} {
		resp, b := s.do(http.MethodPost, s.url("/v1/op"), tok, strings.NewReader(`{"op":7,"id":"myid"}`))
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s", b)
		assert.Contains(t, string(b), `"id":"myid"`)
	}
	// An op the table does not have names nothing that could run either:
	// batch.unknown_op, whatever the token may do, the op and id echoed.
	aliceRO := s.token(tokens.Spec{Actors: []string{"alice"}, ReadOnly: true})
	for _, tok := range []string{s.full, ro, alice, aliceRO} {
		for _, body := range []string{`{"op":"nope","id":"myid"}`, `{"op":"actor.nope","actor":"bob","id":"myid"}`, `{"op":"Write","id":"myid"}`} {
			resp, b := s.do(http.MethodPost, s.url("/v1/op"), tok, strings.NewReader(body))
			assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s: %s", body, b)
			assert.Equal(t, "batch.unknown_op", errCode(t, b), "%s", body)
			assert.Contains(t, string(b), `"id":"myid"`)
		}
	}
	// What the token may not do is still refused as such.
	resp, b := s.do(http.MethodPost, s.url("/v1/op"), alice, strings.NewReader(`{"op":"write","runId":"r1","path":"output/x.md","content":"x"}`))
	assert.Equal(t, http.StatusForbidden, resp.StatusCode, "%s", b)
	resp, b = s.do(http.MethodPost, s.url("/v1/op"), ro, strings.NewReader(`{"op":"write","runId":"r1","path":"output/x.md","content":"x"} trailing`))
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s", b)
	m := s.okJSON(http.MethodGet, s.url("/v1/runs/r1/files", "path", "output"), nil)
	assert.NotContains(t, fmt.Sprint(m["entries"]), "output/x.md", "nothing written")
}

// TestNoActorIsTheClientsMistakeForEveryToken: an endpoint that must name
// its actor, given none, is 422 workspace.invalid_actor for a token
// limited to actors as for a full one, never 403 naming actor "";
// nothing changes.
func TestNoActorIsTheClientsMistakeForEveryToken(t *testing.T) {
	s := newServer(t, httpapi.Options{})
	alice := s.token(tokens.Spec{Actors: []string{"alice"}})
	for _, tok := range []string{s.full, alice} {
		for _, req := range []struct{ method, path string }{
			{http.MethodGet, "/workspace/file?path=a.md"},
			{http.MethodPost, "/workspace/upload?path=a.md"},
			{http.MethodDelete, "/workspace/file?path=a.md"},
			{http.MethodDelete, "/workspace/delete-by-prefix?prefix=a"},
			{http.MethodGet, "/v1/export?actor="},
			{http.MethodGet, "/v1/export?actor=&actor=alice"},
		} {
			resp, b := s.do(req.method, s.url(req.path), tok, strings.NewReader("x"))
			assert.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, "%s %s: %s", req.method, req.path, b)
			assert.Equal(t, "workspace.invalid_actor", errCode(t, b), "%s %s", req.method, req.path)
		}
		req, err := http.NewRequest(http.MethodHead, s.url("/v1/export?actor="), nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := s.srv.Client().Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, "HEAD /v1/export?actor=")
	}
}
