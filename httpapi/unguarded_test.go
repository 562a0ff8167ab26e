package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/wsstore/wsstore/httpapi"
)

// TestConditionsWhereNoneAreHonoured: DELETE
// /workspace/delete-by-prefix and POST /workspace/gc change a space
// without looking at If-Match or If-None-Match, so a request carrying
// one is refused (400) and changes nothing, rather than made unguarded.
func TestConditionsWhereNoneAreHonoured(t *testing.T) {
	s := newServer(t, httpapi.Options{})
	for _, body := range []string{"one", "two"} {
		s.okJSON(http.MethodPost, s.url("/workspace/upload", "actor", "alice", "path", "temp/a.md"), strings.NewReader(body))
	}
	stats := func() map[string]any {
		return s.okJSON(http.MethodGet, s.url("/workspace/stats", "actor", "alice"), nil)
	}
	before := stats()
	for _, hdr := range [][2]string{{"If-Match", "*"}, {"If-None-Match", "*"}, {"If-Match", `"0123"`}} {
		resp, b := s.do(http.MethodDelete, s.url("/workspace/delete-by-prefix", "actor", "alice", "prefix", "temp/"), s.full, nil, hdr[0], hdr[1])
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "%v: %s", hdr, b)
		assert.Equal(t, "workspace.invalid_argument", errCode(t, b))
		resp, b = s.do(http.MethodPost, s.url("/workspace/gc", "actor", "alice"), s.full, nil, hdr[0], hdr[1])
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "%v: %s", hdr, b)
		assert.Equal(t, "workspace.invalid_argument", errCode(t, b))
	}
	assert.Equal(t, before, stats(), "nothing changed")

	s.okJSON(http.MethodDelete, s.url("/workspace/delete-by-prefix", "actor", "alice", "prefix", "temp/"), nil)
	assert.Equal(t, float64(0), stats()["files"])
}
