package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/httpapi"
)

// TestActorGCWithAnEmptyActor: a gc given an empty actor (an actor.gc
// op's "actor": "", POST /workspace/gc?actor=) is refused and prunes
// nothing, rather than taken as absent, which prunes every actor's old
// versions.
func TestActorGCWithAnEmptyActor(t *testing.T) {
	s := newServer(t, httpapi.Options{})
	for _, a := range []string{"alice", "bob"} {
		for _, body := range []string{"one", "two"} {
			s.okJSON(http.MethodPost, s.url("/workspace/upload", "actor", a, "path", "a.md"), strings.NewReader(body))
		}
	}
	versions := func() []any {
		var out []any
		for _, a := range []string{"alice", "bob"} {
			out = append(out, s.okJSON(http.MethodGet, s.url("/workspace/stats", "actor", a), nil)["versions"])
		}
		return out
	}
	require.Equal(t, []any{2.0, 2.0}, versions())

	status, m := s.op(s.full, map[string]any{"op": "actor.gc", "actor": ""})
	assert.Equal(t, http.StatusBadRequest, status, "%v", m)
	assert.Equal(t, false, m["ok"], "%v", m)
	if e, ok := m["error"].(map[string]any); assert.True(t, ok, "%v", m) {
		assert.Equal(t, "batch.invalid_request", e["code"])
	}
	assert.Equal(t, []any{2.0, 2.0}, versions(), "an op refused prunes nothing")

	resp, b := s.do(http.MethodPost, s.srv.URL+"/workspace/gc?actor=", s.full, nil)
	assert.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, "%s", b)
	assert.Equal(t, "workspace.invalid_actor", errCode(t, b))
	assert.Equal(t, []any{2.0, 2.0}, versions(), "a request refused prunes nothing")

	// Left out, the actor is every actor.
	res := s.mustOp(map[string]any{"op": "actor.gc"})
	assert.EqualValues(t, 2, res["actors"])
	assert.Equal(t, []any{1.0, 1.0}, versions())
}
