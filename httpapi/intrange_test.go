package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/httpapi"
)

// TestIntegersOutOfRange: an integer past what the server holds, in a
// query string (keepVersions=1e20, limit=-1e20, afterSeq= twenty nines)
// or an op's field, is 400 saying it is out of range and naming the
// range, and changes nothing; it said "must be an integer". A number
// that is no integer still says so.
func TestIntegersOutOfRange(t *testing.T) {
	s := newServer(t, httpapi.Options{})
	s.okJSON(http.MethodPost, s.url("/workspace/upload", "actor", "alice", "path", "a.md"), strings.NewReader("one"))
	s.okJSON(http.MethodPost, s.url("/workspace/upload", "actor", "alice", "path", "a.md"), strings.NewReader("two"))
	s.mustOp(map[string]any{"op": "run.create", "runId": "r", "chat": map[string]string{"kind": "character", "stableChatId": "c"}})
	nines := strings.Repeat("9", 20)
	for _, c := range []struct {
		method, path string
		kv           []string
		want         string
	}{
		{http.MethodPost, "/workspace/gc", []string{"actor", "alice", "keepVersions", "1e20"}, "keepVersions 1e20 is out of range: it takes an integer in 0..9223372036854775807"},
		{http.MethodPost, "/workspace/gc", []string{"actor", "alice", "keepVersions", nines}, "keepVersions " + nines + " is out of range"},
		{http.MethodGet, "/workspace/files", []string{"actor", "alice", "limit", "-1e20"}, "limit -1e20 is out of range: it takes an integer in 0..100000"},
		{http.MethodGet, "/workspace/files", []string{"depth", "1E400"}, "depth 1E400 is out of range"},
		{http.MethodGet, "/workspace/stats", []string{"limit", "1e20"}, "in 0..1000"},
		{http.MethodGet, "/v1/runs/r/events", []string{"afterSeq", nines}, "afterSeq " + nines + " is out of range: it takes an integer in 0..9223372036854775807"},
		{http.MethodGet, "/v1/runs/r/events", []string{"limit", "1e20"}, "in 0..500"},
		{http.MethodGet, "/v1/runs/r/checkpoints", []string{"limit", "1e20"}, "in 0..10000"},
		{http.MethodGet, "/v1/runs/r/diff", []string{"from", "cp_000001", "maxBytes", "1e20"}, "in 0..16777216"},
		{http.MethodPost, "/workspace/gc", []string{"actor", "alice", "keepVersions", "1.5"}, `keepVersions must be an integer, not "1.5"`},
	} {
		resp, b := s.do(c.method, s.url(c.path, c.kv...), s.full, nil)
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s %v: %s", c.path, c.kv, b)
		var e struct {
			Error struct{ Code, Message string }
		}
		require.NoError(t, json.Unmarshal(b, &e), "%s", b)
		assert.Equal(t, "workspace.invalid_argument", e.Error.Code)
		assert.Contains(t, e.Error.Message, c.want, "%s %v", c.path, c.kv)
	}

	for _, body := range []string{
		`{"op":"actor.gc","actor":"alice","keepVersions":1e20}`,
		`{"op":"actor.gc","actor":"alice","keepVersions":-1e20}`,
		`{"op":"actor.gc","actor":"alice","keepVersions":` + nines + `}`,
	} {
		resp, b := s.do(http.MethodPost, s.url("/v1/op"), s.full, strings.NewReader(body))
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s: %s", body, b)
		var res struct {
			Error struct{ Code, Message string }
		}
		require.NoError(t, json.Unmarshal(b, &res), "%s", b)
		assert.Equal(t, "batch.invalid_request", res.Error.Code)
		assert.Contains(t, res.Error.Message, `field "keepVersions": `)
		assert.Contains(t, res.Error.Message, "is out of range: it takes an integer in -9223372036854775808..9223372036854775807", body)
	}
	st := s.mustOp(map[string]any{"op": "actor.stats", "actor": "alice"})
	assert.Equal(t, float64(2), st["versions"], "nothing was pruned")
}
