package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/httpapi"
)

// TestActorVersionAfterGCChange: a gc change moves no file, so the
// version after it is the one before it. The space's seq after a gc (as
// its stats give it) names the live version, which actor.ls at= and
// actor.diff read; a gc that pruned the version before it reads as
// pruned.
func TestActorVersionAfterGCChange(t *testing.T) {
	s := newServer(t, httpapi.Options{})
	up := func(path, body string) {
		s.okJSON(http.MethodPost, s.url("/workspace/upload", "actor", "alice", "path", path), strings.NewReader(body))
	}
	up("a.md", "one")
	up("a.md", "two")
	gc := s.okJSON(http.MethodPost, s.url("/workspace/gc", "actor", "alice"), nil)
	require.EqualValues(t, 1, gc["pruned"].(map[string]any)["pruned"])
	st := s.okJSON(http.MethodGet, s.url("/workspace/stats", "actor", "alice"), nil)
	seq := st["seq"].(float64)
	require.EqualValues(t, 3, seq, "the gc change is the space's last")

	ls := s.mustOp(map[string]any{"op": "actor.ls", "actor": "alice", "at": seq})
	entries := ls["entries"].([]any)
	require.Len(t, entries, 1)
	assert.Equal(t, st["root"], s.mustOp(map[string]any{"op": "actor.stats", "actor": "alice"})["root"])
	assert.Equal(t, "a.md", entries[0].(map[string]any)["path"])

	d := s.mustOp(map[string]any{"op": "actor.diff", "actor": "alice", "from": 2, "to": seq})
	assert.Empty(t, d["changes"], "the gc change changed no file")
	d = s.mustOp(map[string]any{"op": "actor.diff", "actor": "alice", "from": 0, "to": seq})
	assert.Len(t, d["changes"], 1)

	// After another change and a gc, the first gc change leaves the
	// version of change 2, which is pruned now.
	up("b.md", "three")
	s.okJSON(http.MethodPost, s.url("/workspace/gc", "actor", "alice"), nil)
	status, m := s.op(s.full, map[string]any{"op": "actor.ls", "actor": "alice", "at": 3})
	assert.Equal(t, http.StatusNotFound, status, "%v", m)
	assert.Equal(t, "store.not_found", m["error"].(map[string]any)["code"], "%v", m)
	s.mustOp(map[string]any{"op": "actor.ls", "actor": "alice", "at": 5})
}
