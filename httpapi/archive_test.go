package httpapi_test

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/archive"
	"github.com/wsstore/wsstore/httpapi"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/tokens"
)

// export GETs /v1/export with token and the query kv, and returns the
// status, the body and the summary trailer.
func (s *server) export(token string, kv ...string) (int, []byte, map[string]any) {
	s.t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.url("/v1/export", kv...), nil)
	require.NoError(s.t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := s.srv.Client().Do(req)
	require.NoError(s.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(s.t, err)
	var sum map[string]any
	if v := resp.Trailer.Get(httpapi.SummaryTrailer); v != "" {
		require.NoError(s.t, json.Unmarshal([]byte(v), &sum), v)
	}
	return resp.StatusCode, b, sum
}

// TestArchive: GET /v1/export streams an archive that POST /v1/import
// takes into another store, with wsctl export's and import's codes, and
// tokens may export only what they may read and import only if they may
// write everything.
func TestArchive(t *testing.T) {
	a := newServer(t, httpapi.Options{})
	a.newRun("r1")
	a.okJSON(http.MethodPost, a.url("/workspace/upload", "actor", "alice", "path", "notes.md"), bytes.NewReader([]byte("alice's")))
	a.okJSON(http.MethodPost, a.url("/workspace/upload", "actor", "bob", "path", "notes.md"), bytes.NewReader([]byte("bob's")))

	status, arc, sum := a.export(a.full, "all", "true")
	require.Equal(t, http.StatusOK, status, "%s", arc)
	require.NotNil(t, sum, "the summary trailer")
	assert.Equal(t, float64(1), sum["runs"])
	assert.Equal(t, float64(2), sum["actors"])
	assert.Equal(t, float64(len(arc)), sum["archiveBytes"])
	first, err := tar.NewReader(bytes.NewReader(arc)).Next()
	require.NoError(t, err)
	assert.Equal(t, "wsstore-archive.json", first.Name)

	b := newServer(t, httpapi.Options{})
	t.Run("Import", func(t *testing.T) {
		m := b.okJSON(http.MethodPost, b.url("/v1/import"), bytes.NewReader(arc))
		assert.Equal(t, float64(1), m["runs"])
		res := b.mustOp(map[string]any{"op": "read", "runId": "r1", "path": "output/answer.md"})
		assert.Equal(t, "v1\n", res["content"])
		_, body := b.do(http.MethodGet, b.url("/workspace/file", "actor", "bob", "path", "notes.md"), b.full, nil)
		assert.Equal(t, "bob's", string(body))
		m = b.okJSON(http.MethodPost, b.url("/v1/import"), bytes.NewReader(arc))
		assert.Len(t, m["unchanged"], 4, "importing again changes nothing: %v", m)
	})
	t.Run("ErrConflict", func(t *testing.T) {
		c := newServer(t, httpapi.Options{})
		c.newRun("r1")
		c.mustOp(map[string]any{"op": "write", "runId": "r1", "path": "output/answer.md", "content": "other\n"})
		_, one, _ := a.export(a.full, "run", "r1")
		resp, body := c.do(http.MethodPost, c.url("/v1/import"), c.full, bytes.NewReader(one))
		assert.Equal(t, http.StatusConflict, resp.StatusCode, "%s", body)
		assert.Equal(t, "store.conflict", errCode(t, body))
		assert.Contains(t, string(body), `"conflicts"`, "the summary comes with the conflict")
	})
	t.Run("ErrHostPaths", func(t *testing.T) {
		// A run that reaches host directories, as the host may create it,
		// does not come in through an HTTP import: a client would give
		// itself the server's files.
		h := newServer(t, httpapi.Options{})
		_, err := h.st.Runs.CreateRun(context.Background(), runs.CreateRequest{RunID: "rh", Chat: runs.ChatKey{Kind: "chat", StableChatID: "c-rh"},
			Profile: &runs.Profile{AllowPaths: []runs.HostPath{{Path: t.TempDir(), Name: "h", Writable: true}}}})
		require.NoError(t, err)
		status, hostArc, _ := h.export(h.full, "run", "rh")
		require.Equal(t, http.StatusOK, status, "%s", hostArc)

		d := newServer(t, httpapi.Options{})
		resp, body := d.do(http.MethodPost, d.url("/v1/import"), d.full, bytes.NewReader(hostArc))
		assert.Equal(t, http.StatusForbidden, resp.StatusCode, "%s", body)
		assert.Equal(t, "auth.forbidden", errCode(t, body))
		status, m := d.op(d.full, map[string]any{"op": "run.show", "runId": "rh"})
		assert.Equal(t, http.StatusNotFound, status, "nothing imported: %v", m)

		_, err = d.st.Archive.Import(context.Background(), bytes.NewReader(hostArc), archive.Options{})
		require.NoError(t, err, "the host imports it through the Go API")
	})
	t.Run("ErrCorrupt", func(t *testing.T) {
		resp, body := b.do(http.MethodPost, b.url("/v1/import"), b.full, bytes.NewReader(arc[:len(arc)/2]))
		assert.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, "%s", body)
		assert.Equal(t, "archive.corrupt", errCode(t, body))
	})
	t.Run("ExportErrors", func(t *testing.T) {
		for _, tc := range []struct {
			name   string
			kv     []string
			status int
			code   string
		}{
			{"ErrNothingSelected", nil, http.StatusBadRequest, "workspace.invalid_argument"},
			{"ErrRunNotFound", []string{"run", "zz"}, http.StatusNotFound, "run.not_found"},
			{"ErrBadBool", []string{"all", "maybe"}, http.StatusBadRequest, "workspace.invalid_argument"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				status, body, _ := a.export(a.full, tc.kv...)
				assert.Equal(t, tc.status, status, "%s", body)
				assert.Equal(t, tc.code, errCode(t, body))
			})
		}
	})
	t.Run("Tokens", func(t *testing.T) {
		ro := a.token(tokens.Spec{Name: "ro", ReadOnly: true})
		alice := a.token(tokens.Spec{Name: "alice", Actors: []string{"alice"}})
		for _, tc := range []struct {
			name   string
			token  string
			kv     []string
			status int
		}{
			{"ReadOnlyExportsAll", ro, []string{"all", "true"}, http.StatusOK},
			{"ActorTokenExportsItsActor", alice, []string{"actor", "alice"}, http.StatusOK},
			{"ErrActorTokenOtherActor", alice, []string{"actor", "alice", "actor", "bob"}, http.StatusForbidden},
			{"ErrActorTokenAll", alice, []string{"all", "true"}, http.StatusForbidden},
			{"ErrActorTokenRun", alice, []string{"run", "r1"}, http.StatusForbidden},
			{"ErrNoToken", "", []string{"all", "true"}, http.StatusUnauthorized},
		} {
			t.Run(tc.name, func(t *testing.T) {
				status, body, _ := a.export(tc.token, tc.kv...)
				assert.Equal(t, tc.status, status, "%.200s", body)
			})
		}
		for _, tc := range []struct {
			name  string
			token string
		}{{"ErrReadOnlyImports", ro}, {"ErrActorTokenImports", alice}, {"ErrNoToken", ""}} {
			t.Run(tc.name, func(t *testing.T) {
				resp, body := a.do(http.MethodPost, a.url("/v1/import"), tc.token, bytes.NewReader(arc))
				assert.Contains(t, []int{http.StatusUnauthorized, http.StatusForbidden}, resp.StatusCode, "%s", body)
			})
		}
	})
}

// TestImportDeclaredPastTheLimitReadsNothing: an archive whose
// Content-Length is past MaxUploadBytes is refused as announced, 422
// workspace.size_limit_exceeded with none of it read, as an upload is,
// rather than left waiting for a body it would refuse.
func TestImportDeclaredPastTheLimitReadsNothing(t *testing.T) {
	s := newServer(t, httpapi.Options{MaxUploadBytes: 1000})
	body := bytes.NewReader(make([]byte, 2000))
	req := httptest.NewRequest(http.MethodPost, "/v1/import", body)
	req.Header.Set("Authorization", "Bearer "+s.full)
	rec := httptest.NewRecorder()
	s.h.ServeHTTP(rec, req)
	assert.Equal(t, http.StatusUnprocessableEntity, rec.Code, "%s", rec.Body)
	assert.Equal(t, "workspace.size_limit_exceeded", errCode(t, rec.Body.Bytes()))
	assert.Equal(t, 2000, body.Len(), "nothing of it read")
}

// TestImportChunkedPastTheLimit: an archive sent without a Content-Length
// that runs past MaxUploadBytes is refused for its size, 422
// workspace.size_limit_exceeded, not called damaged, and nothing of it is
// visible.
func TestImportChunkedPastTheLimit(t *testing.T) {
	src := newServer(t, httpapi.Options{})
	src.okJSON(http.MethodPost, src.url("/workspace/upload", "actor", "alice", "path", "big.bin"), bytes.NewReader(randomBytes(64<<10, 7)))
	status, arc, _ := src.export(src.full, "all", "true")
	require.Equal(t, http.StatusOK, status, "%s", arc)

	// Limits that cut the archive in its header, in a blob, between
	// entries and in its end blocks.
	for _, limit := range []int{100, 700, len(arc) / 2, len(arc) - 1030, len(arc) - 1} {
		dst := newServer(t, httpapi.Options{MaxUploadBytes: int64(limit)})
		req, err := http.NewRequest(http.MethodPost, dst.url("/v1/import"), io.MultiReader(bytes.NewReader(arc))) // no length: sent chunked
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+dst.full)
		resp, err := dst.srv.Client().Do(req)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, "limit %d of %d: %s", limit, len(arc), body)
		assert.Equal(t, "workspace.size_limit_exceeded", errCode(t, body), "limit %d of %d", limit, len(arc))

		st, err := dst.st.Stats(context.Background())
		require.NoError(t, err)
		assert.Zero(t, st.ReferencedBytes, "nothing visible (blobs stored before the cut are garbage for gc)")
	}
}

// countingArchiver counts the exports its Archiver runs.
type countingArchiver struct {
	httpapi.Archiver
	exports atomic.Int64
}

func (a *countingArchiver) Export(ctx context.Context, w io.Writer, scope archive.Scope, opt archive.Options) (archive.Summary, error) {
	a.exports.Add(1)
	return a.Archiver.Export(ctx, w, scope, opt)
}

// TestHeadExport: HEAD /v1/export answers the status and headers GET would
// (the archive's type; the codes of a bad parameter, of a run, chat or
// actor that does not exist, of a token that may not) without exporting:
// no export runs, and the statements it runs do not grow with the run.
func TestHeadExport(t *testing.T) {
	var rec storetest.Statements
	st := storetest.OpenStoreWith(t, wsstore.Options{Index: index.Options{Trace: rec.Trace}})
	b := httpapi.FromStore(st)
	counting := &countingArchiver{Archiver: b.Archive}
	b.Archive = counting
	h := mustNew(t, b, httpapi.Options{})
	srv := httptest.NewServer(h)
	t.Cleanup(func() { h.Close(); srv.Close() })
	s := &server{t: t, st: st, h: h, srv: srv}
	s.full = s.token(tokens.Spec{Name: "full"})
	alice := s.token(tokens.Spec{Actors: []string{"alice"}})
	s.newRun("small")
	s.newRun("big")
	for i := range 50 {
		s.mustOp(map[string]any{"op": "write", "runId": "big", "path": fmt.Sprintf("output/%d.md", i), "content": strings.Repeat("x", 1000)})
	}
	s.okJSON(http.MethodPost, s.url("/workspace/upload", "actor", "alice", "path", "notes.md"), strings.NewReader("alice's"))

	head := func(token, query string) (*http.Response, []string) {
		req, err := http.NewRequest(http.MethodHead, srv.URL+"/v1/export?"+query, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		var resp *http.Response
		stmts := rec.Record(func() {
			resp, err = srv.Client().Do(req)
			require.NoError(t, err)
			resp.Body.Close()
		})
		return resp, stmts
	}
	for _, tc := range []struct {
		name, token, query string
		status             int
	}{
		{"Run", s.full, "run=small", http.StatusOK},
		{"Chat", s.full, "chat=chat:c-big", http.StatusOK},
		{"Actor", alice, "actor=alice", http.StatusOK},
		{"All", s.full, "all=true&skipWorkspace=true", http.StatusOK},
		{"ErrRunNotFound", s.full, "run=nope", http.StatusNotFound},
		{"ErrChatNotFound", s.full, "chat=chat_0000000000000000", http.StatusNotFound},
		{"ErrActorNotFound", s.full, "actor=nobody", http.StatusNotFound},
		{"ErrInvalidActor", s.full, "actor=..", http.StatusUnprocessableEntity},
		{"ErrBadBool", s.full, "all=maybe", http.StatusBadRequest},
		{"ErrNothing", s.full, "", http.StatusBadRequest},
		{"ErrAllAndRun", s.full, "all=true&run=small", http.StatusBadRequest},
		{"ErrForbidden", alice, "run=small", http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, _ := head(tc.token, tc.query)
			assert.Equal(t, tc.status, resp.StatusCode)
			req, err := http.NewRequest(http.MethodGet, srv.URL+"/v1/export?"+tc.query, nil)
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer "+tc.token)
			before := counting.exports.Load()
			get, err := srv.Client().Do(req)
			require.NoError(t, err)
			get.Body.Close()
			assert.Equal(t, get.StatusCode, resp.StatusCode, "HEAD answers GET's status")
			if tc.status == http.StatusOK {
				for _, k := range []string{"Content-Type", "Content-Disposition", "X-Content-Type-Options"} {
					assert.Equal(t, get.Header.Get(k), resp.Header.Get(k), k)
				}
				assert.Equal(t, "application/x-tar", resp.Header.Get("Content-Type"))
				assert.Equal(t, before+1, counting.exports.Load(), "GET exports")
			}
		})
	}
	counting.exports.Store(0)
	_, small := head(s.full, "run=small")
	_, big := head(s.full, "run=big")
	assert.Zero(t, counting.exports.Load(), "HEAD exports nothing")
	t.Logf("HEAD of a run: %d statements for 2 writes, %d for 52", len(small), len(big))
	assert.Equal(t, len(small), len(big), "what HEAD reads does not grow with the run")
}
