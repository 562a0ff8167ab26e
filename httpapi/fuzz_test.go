package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/archive"
	"github.com/wsstore/wsstore/httpapi"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/tokens"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// fuzzRoutes are the routes FuzzRequest sends to, by method and path.
var fuzzRoutes = []struct{ method, path string }{
	{"GET", "/workspace/files"},
	{"GET", "/workspace/file"},
	{"POST", "/workspace/upload"},
	{"DELETE", "/workspace/file"},
	{"GET", "/workspace/stats"},
	{"POST", "/workspace/gc"},
	{"DELETE", "/workspace/delete-by-prefix"},
	{"POST", "/v1/op"},
	{"GET", "/v1/ops"},
	{"GET", "/v1/export"},
	{"HEAD", "/v1/export"},
	{"POST", "/v1/import"},
	{"GET", "/v1/runs/r"},
	{"GET", "/v1/runs/r/checkpoints"},
	{"GET", "/v1/runs/r/files"},
	{"GET", "/v1/runs/r/file"},
	{"GET", "/v1/runs/r/diff"},
	{"GET", "/v1/runs/r/events"},
	{"GET", "/v1/runs/r/events/follow"},
}

// FuzzRequest sends one request of the fuzzer's query, body and header to
// a route of the API over a store with a run, r, and an actor space,
// alice, each holding a file at first: no answer is a 500, every answer
// of 400 or more is the error body with a code, and the store is sound
// after it.
func FuzzRequest(f *testing.F) {
	seeds := []struct {
		route       uint8
		query, body string
		header      string
	}{
		{0, "actor=alice&path=reports&depth=2&limit=1", "", ""},
		{0, "path=alice/reports&after=alice/a&limit=2", "", ""},
		{1, "actor=alice&path=reports/w.md", "", "Range: bytes=2-7"},
		{1, "actor=alice&path=reports/w.md", "", "If-None-Match: \"x\""},
		{1, "actor=alice&path=reports/w.md", "", "Range: bytes=-3,5-"},
		{2, "actor=alice&path=reports/n.md", "# N\n", "If-None-Match: *"},
		{2, "actor=alice&path=up.md", "--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a\"\r\n\r\nx\r\n--b--\r\n", "Content-Type: multipart/form-data; boundary=b"},
		{3, "actor=alice&path=reports/w.md", "", "If-Match: *"},
		{4, "actor=alice", "", ""},
		{4, "after=a&limit=1", "", ""},
		{5, "actor=alice&keepVersions=1", "", ""},
		{6, "actor=alice&prefix=reports/", "", ""},
		{7, "", `{"op":"write","runId":"r","path":"output/main.md","content":"x"}`, "Content-Type: application/json"},
		{8, "", "", ""},
		{9, "run=r&actor=alice&skipWorkspace=true", "", ""},
		{10, "all=true", "", ""},
		{11, "", "not an archive", ""},
		{12, "", "", ""},
		{13, "afterSeq=1&limit=2", "", ""},
		{14, "path=output&depth=1&at=1&after=output/a&limit=3", "", ""},
		{15, "path=output/main.md&at=cp_000001", "", "Range: bytes=0-"},
		{16, "from=1&to=2&maxBytes=100&limit=1", "", ""},
		{17, "afterSeq=0&beforeSeq=5&limit=2", "", ""},
		{18, "afterSeq=1&wait=1ms", "", "Accept: text/event-stream"},
	}
	for _, s := range seeds {
		f.Add(s.route, s.query, []byte(s.body), s.header)
	}
	// One store for every input, as a server has: an input's answer may
	// depend on what the inputs before it changed.
	ctx := context.Background()
	st := storetest.OpenStore(f)
	_, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "k", StableChatID: "s"}, RunID: "r"})
	require.NoError(f, err)
	_, err = st.Runs.Workspace("r", runs.HostScope).Write(ctx, vfs.MustPath("output/main.md"), []byte("# A\nb\n"), vfs.WriteOptions{})
	require.NoError(f, err)
	_, err = st.Actors.Upload(ctx, "alice", "reports/w.md", strings.NewReader("week 1"))
	require.NoError(f, err)
	_, tok, err := st.Tokens.Create(ctx, tokens.Spec{Name: "full"})
	require.NoError(f, err)
	h := mustNew(f, httpapi.FromStore(st), httpapi.Options{MaxWait: 10 * time.Millisecond, Heartbeat: 5 * time.Millisecond,
		FollowPoll: time.Millisecond, IOTimeout: -1, SpoolDir: f.TempDir()})
	f.Cleanup(h.Close)
	var arc bytes.Buffer
	_, err = st.Archive.Export(ctx, &arc, archive.Scope{All: true}, archive.Options{})
	require.NoError(f, err)
	f.Add(uint8(11), "", arc.Bytes(), "Content-Type: application/x-tar")
	f.Fuzz(func(t *testing.T, route uint8, query string, body []byte, header string) {
		rt := fuzzRoutes[int(route)%len(fuzzRoutes)]
		req, err := http.NewRequest(rt.method, "http://wsstore"+rt.path, bytes.NewReader(body))
		require.NoError(t, err)
		req.URL.RawQuery = query
		req.Header.Set("Authorization", "Bearer "+tok)
		if k, v, ok := strings.Cut(header, ": "); ok && k != "" && !strings.EqualFold(k, "Authorization") {
			req.Header.Set(k, v)
		}
		// A stream of server-sent events lasts until its client goes.
		rctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req.WithContext(rctx))
		res := rec.Result()
		assert.NotEqual(t, http.StatusInternalServerError, res.StatusCode, "%s %s?%s: %s", rt.method, rt.path, query, rec.Body.Bytes())
		if res.StatusCode >= 400 && rt.method != "HEAD" {
			var eb struct {
				Error struct {
					Code    wserr.Code `json:"code"`
					Message string     `json:"message"`
				} `json:"error"`
			}
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &eb), "%d %s", res.StatusCode, rec.Body.Bytes())
			assert.NotEmpty(t, eb.Error.Code, "%d %s", res.StatusCode, rec.Body.Bytes())
		}
		rep, err := st.Fsck(ctx, nil)
		require.NoError(t, err)
		require.Empty(t, rep.Problems)
	})
}
