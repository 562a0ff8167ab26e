package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/httpapi"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/tokens"
)

// spacesServer is a server whose store holds three actors' spaces:
// alice's reports/ and notes.md, bob's drafts/, carol's x.md.
func spacesServer(t *testing.T) *server {
	s := newServer(t, httpapi.Options{})
	for _, f := range [][3]string{
		{"alice", "reports/weekly.md", "weekly"},
		{"alice", "reports/daily.md", "daily"},
		{"alice", "notes.md", "notes"},
		{"bob", "drafts/contract.md", "contract"},
		{"carol", "x.md", "x"},
	} {
		s.okJSON(http.MethodPost, s.url("/workspace/upload", "actor", f[0], "path", f[1]), strings.NewReader(f[2]))
	}
	return s
}

// get sends a GET with token, requires 200 and decodes the body.
func (s *server) get(token, path string, kv ...string) map[string]any {
	s.t.Helper()
	resp, b := s.do(http.MethodGet, s.url(path, kv...), token, nil)
	require.Equal(s.t, http.StatusOK, resp.StatusCode, "%s %v: %s", path, kv, b)
	var m map[string]any
	require.NoError(s.t, json.Unmarshal(b, &m), "%s", b)
	return m
}

// paths lists the "path" of each object of m[key].
func paths(m map[string]any, key, field string) []string {
	out := []string{}
	for _, e := range m[key].([]any) {
		out = append(out, e.(map[string]any)[field].(string))
	}
	return out
}

func TestWorkspaceFilesWithoutActor(t *testing.T) {
	s := spacesServer(t)
	ac := s.token(tokens.Spec{Actors: []string{"carol", "alice", "dave"}, ReadOnly: true})

	t.Run("RootListsADirectoryPerActor", func(t *testing.T) {
		m := s.get(s.full, "/workspace/files")
		assert.Equal(t, []string{"alice", "bob", "carol"}, paths(m, "entries", "path"))
		alice := m["entries"].([]any)[0].(map[string]any)
		assert.Equal(t, "dir", alice["kind"])
		assert.Equal(t, "alice", alice["name"])
		assert.Equal(t, float64(len("weekly")+len("daily")+len("notes")), alice["size"], "the bytes of its files")
		st := s.get(s.full, "/workspace/stats", "actor", "alice")
		assert.Equal(t, st["root"], alice["hash"], "its hash is the space's root")
		assert.Equal(t, false, m["more"])
	})
	t.Run("DepthCountsFromThePath", func(t *testing.T) {
		m := s.get(s.full, "/workspace/files", "depth", "2")
		assert.Equal(t, []string{"alice", "alice/notes.md", "alice/reports", "bob", "bob/drafts", "carol", "carol/x.md"}, paths(m, "entries", "path"))
		m = s.get(s.full, "/workspace/files", "path", "alice", "depth", "2")
		assert.Equal(t, []string{"alice/notes.md", "alice/reports", "alice/reports/daily.md", "alice/reports/weekly.md"}, paths(m, "entries", "path"))
		m = s.get(s.full, "/workspace/files", "path", "alice/reports")
		assert.Equal(t, []string{"alice/reports/daily.md", "alice/reports/weekly.md"}, paths(m, "entries", "path"))
		m = s.get(s.full, "/workspace/files", "path", "./alice/reports/weekly.md")
		assert.Equal(t, []string{"alice/reports/weekly.md"}, paths(m, "entries", "path"), "a file lists itself")
	})
	t.Run("ATokenSeesItsActorsOnly", func(t *testing.T) {
		m := s.get(ac, "/workspace/files", "depth", "9")
		assert.Equal(t, []string{"alice", "alice/notes.md", "alice/reports", "alice/reports/daily.md", "alice/reports/weekly.md", "carol", "carol/x.md"},
			paths(m, "entries", "path"), "bob is absent, and dave has no space")
		m = s.get(ac, "/workspace/files", "path", "bob")
		assert.Empty(t, m["entries"], "bob's space reads as an actor's without one")
		resp, b := s.do(http.MethodGet, s.url("/workspace/files", "path", "bob/drafts"), ac, nil)
		assert.Equal(t, http.StatusNotFound, resp.StatusCode, "%s", b)
		assert.Equal(t, "workspace.file_not_found", errCode(t, b))
		assert.Contains(t, string(b), "bob/drafts")
	})
	t.Run("AMissingActorIsAsToday", func(t *testing.T) {
		m := s.get(s.full, "/workspace/files", "path", "ghost")
		assert.Empty(t, m["entries"])
		resp, b := s.do(http.MethodGet, s.url("/workspace/files", "path", "ghost/x"), s.full, nil)
		assert.Equal(t, http.StatusNotFound, resp.StatusCode, "%s", b)
		assert.Equal(t, "workspace.file_not_found", errCode(t, b))
		resp, b = s.do(http.MethodGet, s.url("/workspace/files", "actor", "ghost", "path", "x"), s.full, nil)
		assert.Equal(t, http.StatusNotFound, resp.StatusCode, "%s", b)
	})
	t.Run("PagesOfOneGiveEveryEntryOnce", func(t *testing.T) {
		for _, tc := range []struct {
			token, path, depth string
		}{{s.full, "", "1"}, {s.full, "", "2"}, {s.full, "", "9"}, {ac, "", "9"}, {s.full, "alice", "9"}, {ac, "alice/reports", "1"}} {
			whole := paths(s.get(tc.token, "/workspace/files", "path", tc.path, "depth", tc.depth), "entries", "path")
			var got []string
			after := ""
			for range len(whole) + 1 {
				m := s.get(tc.token, "/workspace/files", "path", tc.path, "depth", tc.depth, "limit", "1", "after", after)
				page := paths(m, "entries", "path")
				require.LessOrEqual(t, len(page), 1)
				got = append(got, page...)
				if m["more"] == false {
					break
				}
				after = page[0]
			}
			assert.Equal(t, whole, got, "path %q depth %s", tc.path, tc.depth)
		}
	})
	t.Run("BadInput", func(t *testing.T) {
		for _, tc := range []struct {
			name   string
			kv     []string
			status int
			code   string
		}{
			{"ErrInvalidPath", []string{"path", "../x"}, http.StatusUnprocessableEntity, "workspace.invalid_path"},
			{"ErrInvalidActor", []string{"path", strings.Repeat("a", 200) + "/x"}, http.StatusUnprocessableEntity, "workspace.invalid_actor"},
			{"ErrCursor", []string{"after", "../x"}, http.StatusBadRequest, "workspace.invalid_argument"},
			{"ErrLimit", []string{"limit", "-1"}, http.StatusBadRequest, "workspace.invalid_argument"},
			{"ErrDepth", []string{"depth", "-1"}, http.StatusBadRequest, "workspace.invalid_argument"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				resp, b := s.do(http.MethodGet, s.url("/workspace/files", tc.kv...), s.full, nil)
				assert.Equal(t, tc.status, resp.StatusCode, "%s", b)
				assert.Equal(t, tc.code, errCode(t, b))
			})
		}
	})
	t.Run("ActorLsOp", func(t *testing.T) {
		status, m := s.op(ac, map[string]any{"op": "actor.ls", "depth": 2})
		require.Equal(t, http.StatusOK, status, "%v", m)
		assert.Equal(t, []string{"alice", "alice/notes.md", "alice/reports", "carol", "carol/x.md"}, paths(m["result"].(map[string]any), "entries", "path"))
		status, m = s.op(ac, map[string]any{"op": "actor.ls", "path": "alice/reports", "after": "alice/reports/daily.md"})
		require.Equal(t, http.StatusOK, status, "%v", m)
		assert.Equal(t, []string{"alice/reports/weekly.md"}, paths(m["result"].(map[string]any), "entries", "path"))
		// A null field counts as absent, for the token check as for the
		// op.
		status, m = s.op(ac, map[string]any{"op": "actor.ls", "actor": nil, "depth": 1})
		require.Equal(t, http.StatusOK, status, "%v", m)
		assert.Equal(t, []string{"alice", "carol"}, paths(m["result"].(map[string]any), "entries", "path"))
		status, m = s.op(ac, map[string]any{"op": "actor.ls", "at": 1})
		assert.Equal(t, http.StatusBadRequest, status, "at needs an actor: %v", m)
		status, m = s.op(ac, map[string]any{"op": "actor.rm-prefix", "prefix": "x"})
		assert.Equal(t, http.StatusForbidden, status, "a change without an actor is beyond the token's actors: %v", m)
	})
}

func TestWorkspaceStatsWithoutActor(t *testing.T) {
	s := spacesServer(t)
	ac := s.token(tokens.Spec{Actors: []string{"carol", "alice"}, ReadOnly: true})

	m := s.get(s.full, "/workspace/stats")
	assert.Equal(t, []string{"alice", "bob", "carol"}, paths(m, "stats", "actor"))
	assert.Equal(t, false, m["more"])
	for i, actor := range []string{"alice", "bob", "carol"} {
		one := s.get(s.full, "/workspace/stats", "actor", actor)
		assert.Equal(t, one, m["stats"].([]any)[i], "the object ?actor=%s answers", actor)
	}

	var got []string
	after := ""
	for range 4 {
		m := s.get(s.full, "/workspace/stats", "limit", "1", "after", after)
		page := paths(m, "stats", "actor")
		require.Len(t, page, 1)
		got = append(got, page...)
		if m["more"] == false {
			break
		}
		after = page[0]
	}
	assert.Equal(t, []string{"alice", "bob", "carol"}, got, "pages of one")

	m = s.get(ac, "/workspace/stats")
	assert.Equal(t, []string{"alice", "carol"}, paths(m, "stats", "actor"), "a token sees its actors only")
	status, res := s.op(ac, map[string]any{"op": "actor.stats", "after": "alice"})
	require.Equal(t, http.StatusOK, status, "%v", res)
	assert.Equal(t, []string{"carol"}, paths(res["result"].(map[string]any), "stats", "actor"))
	status, res = s.op(ac, map[string]any{"op": "actor.stats", "actor": nil})
	require.Equal(t, http.StatusOK, status, "a null actor is no actor: %v", res)
	assert.Equal(t, []string{"alice", "carol"}, paths(res["result"].(map[string]any), "stats", "actor"))

	for _, kv := range [][]string{{"limit", "1001"}, {"limit", "x"}, {"actor", "alice", "limit", "1"}} {
		resp, b := s.do(http.MethodGet, s.url("/workspace/stats", kv...), s.full, nil)
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "%v: %s", kv, b)
		assert.Equal(t, "workspace.invalid_argument", errCode(t, b))
	}
	status, res = s.op(s.full, map[string]any{"op": "actor.stats", "actor": "alice", "limit": 1})
	assert.Equal(t, http.StatusBadRequest, status, "%v", res)
}

// TestWorkspacePagesReadAPageOfActors: a page of the listing or the stats
// without an actor runs the same statements among 4 spaces as among 80,
// and its read of the spaces' table reads about as many pages: it reads
// the page's spaces, not every space.
func TestWorkspacePagesReadAPageOfActors(t *testing.T) {
	type cost struct {
		files, stats []string
		pages        [2]int
	}
	measure := func(n int) cost {
		var rec storetest.Statements
		st := storetest.OpenStoreWith(t, wsstore.Options{Index: index.Options{Trace: rec.Trace}})
		h := mustNew(t, httpapi.FromStore(st), httpapi.Options{})
		srv := httptest.NewServer(h)
		t.Cleanup(func() { h.Close(); srv.Close() })
		s := &server{t: t, st: st, h: h, srv: srv}
		s.full = s.token(tokens.Spec{Name: "full"})
		for i := range n {
			s.okJSON(http.MethodPost, s.url("/workspace/upload", "actor", fmt.Sprintf("actor%03d", i), "path", "docs/a.md"), strings.NewReader(fmt.Sprint("a", i)))
		}
		var c cost
		c.files = rec.Record(func() {
			m := s.get(s.full, "/workspace/files", "depth", "3", "limit", "5", "after", "actor001/docs")
			assert.Equal(t, []string{"actor001/docs/a.md", "actor002", "actor002/docs", "actor002/docs/a.md", "actor003"}, paths(m, "entries", "path"))
			assert.Equal(t, true, m["more"])
		})
		c.stats = rec.Record(func() {
			m := s.get(s.full, "/workspace/stats", "limit", "2", "after", "actor001")
			assert.Equal(t, []string{"actor002", "actor003"}, paths(m, "stats", "actor"))
		})
		for i, stmts := range [][]string{c.files, c.stats} {
			for _, q := range stmts {
				if strings.Contains(q, "FROM actor_spaces WHERE actor > ?") {
					limit := []int{5, 3}[i] // the rows a page asks for
					c.pages[i] = storetest.PagesRead(t, st.DB.Path(), q, []string{"actor001", "actor001"}[i], limit)
				}
			}
		}
		return c
	}
	small, large := measure(4), measure(80)
	t.Logf("statements of a files page: %d among 4 spaces, %d among 80; of a stats page: %d, %d; pages of the spaces read: %v, %v",
		len(small.files), len(large.files), len(small.stats), len(large.stats), small.pages, large.pages)
	assert.Equal(t, len(small.files), len(large.files), "statements of a files page")
	assert.Equal(t, len(small.stats), len(large.stats), "statements of a stats page")
	for i := range 2 {
		require.NotZero(t, small.pages[i], "the page reads the spaces' table")
		assert.LessOrEqual(t, large.pages[i], small.pages[i]+1, "pages of the spaces read among 80")
	}
}

// TestActorsListOfATokenLimitedToActors: actors.list through /v1/op lists
// the spaces of a token's actors alone, paged as for any token, as
// actor.stats without an actor does; it was 403 for such a token.
func TestActorsListOfATokenLimitedToActors(t *testing.T) {
	s := spacesServer(t)
	ac := s.token(tokens.Spec{Actors: []string{"carol", "alice", "dave"}, ReadOnly: true})
	list := func(token string, req map[string]any) ([]string, any) {
		t.Helper()
		req["op"] = "actors.list"
		status, res := s.op(token, req)
		require.Equal(t, http.StatusOK, status, "%v", res)
		r := res["result"].(map[string]any)
		return paths(r, "actors", "actor"), r["more"]
	}
	got, more := list(s.full, map[string]any{})
	assert.Equal(t, []string{"alice", "bob", "carol"}, got)
	assert.Equal(t, false, more)

	got, more = list(ac, map[string]any{})
	assert.Equal(t, []string{"alice", "carol"}, got, "its actors with a space, by name")
	assert.Equal(t, false, more)
	got, more = list(ac, map[string]any{"limit": 1})
	assert.Equal(t, []string{"alice"}, got)
	assert.Equal(t, true, more)
	got, more = list(ac, map[string]any{"limit": 1, "after": "alice"})
	assert.Equal(t, []string{"carol"}, got)
	assert.Equal(t, false, more, "dave has no space")
	got, _ = list(ac, map[string]any{"after": "carol"})
	assert.Empty(t, got)
}
