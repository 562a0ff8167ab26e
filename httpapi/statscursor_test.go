package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/wsstore/wsstore/httpapi"
)

// TestActorPageCursorIsAnActor: the cursor of a page of actors (after= of
// GET /workspace/stats, after of actor.stats and actors.list) is the last
// actor of the page before; one that is no actor's name is refused, as
// after= of GET /workspace/files is, rather than answer a page that leaves
// out the actors sorting before it (" a", "!b" before "/").
func TestActorPageCursorIsAnActor(t *testing.T) {
	s := newServer(t, httpapi.Options{})
	for _, a := range []string{" a", "!b", "c"} {
		s.okJSON(http.MethodPost, s.url("/workspace/upload", "actor", a, "path", "x.md"), strings.NewReader(a))
	}
	for _, after := range []string{"/", ".", "..", "a/b", "\xff"} {
		resp, b := s.do(http.MethodGet, s.url("/workspace/stats", "after", after), s.full, nil)
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "after=%q: %s", after, b)
		assert.Equal(t, "workspace.invalid_argument", errCode(t, b))
		if after == "\xff" {
			continue // JSON carries no bytes that are not UTF-8
		}
		for _, op := range []string{"actor.stats", "actors.list"} {
			status, m := s.op(s.full, map[string]any{"op": op, "after": after})
			assert.Equal(t, http.StatusBadRequest, status, "%s after %q: %v", op, after, m)
			if e, ok := m["error"].(map[string]any); assert.True(t, ok, "%v", m) {
				assert.Equal(t, "batch.invalid_request", e["code"])
			}
		}
	}
	m := s.okJSON(http.MethodGet, s.url("/workspace/stats", "after", "!b"), nil)
	assert.Equal(t, []string{"c"}, paths(m, "stats", "actor"))
	m = s.mustOp(map[string]any{"op": "actors.list", "after": " a"})
	assert.Equal(t, []string{"!b", "c"}, paths(m, "actors", "actor"))
}
