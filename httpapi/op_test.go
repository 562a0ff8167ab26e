package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/httpapi"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/protocol"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/tokens"
	"github.com/wsstore/wsstore/vfs"
)

// newRun creates run id with one written file, checkpointed.
func (s *server) newRun(id string) {
	s.t.Helper()
	s.mustOp(map[string]any{"op": "run.create", "runId": id, "chat": map[string]any{"kind": "chat", "stableChatId": "c-" + id}})
	s.mustOp(map[string]any{"op": "write", "runId": id, "path": "output/answer.md", "content": "v1\n"})
}

func TestOps(t *testing.T) {
	s := newServer(t, httpapi.Options{})
	s.newRun("r1")
	s.mustOp(map[string]any{"op": "write", "runId": "r1", "path": "output/answer.md", "content": "v2\n"})

	t.Run("Read", func(t *testing.T) {
		res := s.mustOp(map[string]any{"op": "read", "runId": "r1", "path": "output/answer.md"})
		assert.Equal(t, "v2\n", res["content"])
		res = s.mustOp(map[string]any{"op": "read", "runId": "r1", "path": "output/answer.md", "at": 2})
		assert.Equal(t, "v1\n", res["content"])
	})
	t.Run("ListCheckpointDiffEvents", func(t *testing.T) {
		res := s.mustOp(map[string]any{"op": "list", "runId": "r1", "path": "output"})
		assert.Len(t, res["entries"], 1)
		res = s.mustOp(map[string]any{"op": "checkpoint", "runId": "r1", "reason": "manual"})
		assert.NotEmpty(t, res["checkpointId"])
		res = s.mustOp(map[string]any{"op": "diff", "runId": "r1", "from": 2})
		assert.Len(t, res["changes"], 1)
		res = s.mustOp(map[string]any{"op": "events", "runId": "r1", "limit": 2})
		assert.Len(t, res["events"], 2)
	})
	t.Run("Actor", func(t *testing.T) {
		s.mustOp(map[string]any{"op": "actor.upload", "actor": "alice", "path": "a.md", "content": "hi"})
		res := s.mustOp(map[string]any{"op": "actor.download", "actor": "alice", "path": "a.md"})
		assert.Equal(t, "hi", res["content"])
		res = s.mustOp(map[string]any{"op": "actor.stats", "actor": "alice"})
		assert.Equal(t, float64(1), res["files"])
	})
	t.Run("IDEchoed", func(t *testing.T) {
		status, m := s.op(s.full, map[string]any{"op": "read", "id": 7, "runId": "r1", "path": "output/answer.md"})
		assert.Equal(t, http.StatusOK, status)
		assert.Equal(t, float64(7), m["id"])
	})
	t.Run("Errors", func(t *testing.T) {
		for _, tc := range []struct {
			name   string
			body   string
			status int
			code   string
		}{
			{"InvalidJSON", `{"op":`, http.StatusBadRequest, "batch.invalid_json"},
			{"UnknownOp", `{"op":"nope"}`, http.StatusBadRequest, "batch.unknown_op"},
			{"UnknownField", `{"op":"read","runId":"r1","path":"output/answer.md","bogus":1}`, http.StatusBadRequest, "batch.invalid_request"},
			{"NoCurrentRun", `{"op":"read","path":"output/answer.md"}`, http.StatusBadRequest, "batch.invalid_request"},
			{"RunNotFound", `{"op":"read","runId":"zz","path":"output/answer.md"}`, http.StatusNotFound, "run.not_found"},
			{"PathNotVisible", `{"op":"write","runId":"r1","path":"input/x","content":"x"}`, http.StatusUnprocessableEntity, "workspace.path_not_visible"},
			{"StaleHash", `{"op":"write","runId":"r1","path":"output/answer.md","content":"x","expectedHash":"` + strings.Repeat("ab", 32) + `"}`, http.StatusConflict, "workspace.write_stale_file"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				resp, b := s.do(http.MethodPost, s.url("/v1/op"), s.full, strings.NewReader(tc.body))
				assert.Equal(t, tc.status, resp.StatusCode, "%s", b)
				var m struct {
					OK    bool                  `json:"ok"`
					Error struct{ Code string } `json:"error"`
				}
				require.NoError(t, json.Unmarshal(b, &m))
				assert.False(t, m.OK)
				assert.Equal(t, tc.code, m.Error.Code)
			})
		}
	})
	t.Run("MessagesFitHTTP", func(t *testing.T) {
		// Each request over HTTP stands alone: an error's advice must be
		// one an HTTP client can follow, not a batch session's.
		for _, tc := range []struct{ body, want, not string }{
			{`{"op":"run.create","chat":{"kind":"chat","stableChatId":"c-alone"}}`, "", ""},
			{`{"op":"read","path":"output/answer.md"}`, `"runId"`, "run.create first"},
			{`{"op":"nope"}`, "GET /v1/ops", "batch --help"},
		} {
			_, b := s.do(http.MethodPost, s.url("/v1/op"), s.full, strings.NewReader(tc.body))
			if tc.want == "" {
				continue
			}
			var m struct {
				Error struct{ Message string } `json:"error"`
			}
			require.NoError(t, json.Unmarshal(b, &m), "%s", b)
			assert.Contains(t, m.Error.Message, tc.want, "%s", tc.body)
			assert.NotContains(t, m.Error.Message, tc.not, "%s", tc.body)
		}
	})
	t.Run("HostFileOpsRefused", func(t *testing.T) {
		for _, op := range []string{"export", "import"} {
			status, m := s.op(s.full, map[string]any{"op": op, "path": "/tmp/x.wsar", "all": true})
			assert.Equal(t, http.StatusForbidden, status, "%v", m)
			assert.Equal(t, "auth.forbidden", m["error"].(map[string]any)["code"])
		}
	})
	t.Run("HostPathsRefused", func(t *testing.T) {
		// A run that reaches host directories would hand the server's
		// file system, the store's own file included, to any client
		// that may write.
		dir := t.TempDir()
		status, m := s.op(s.full, map[string]any{"op": "run.create", "runId": "rh", "chat": map[string]any{"kind": "chat", "stableChatId": "c-rh"},
			"profile": map[string]any{"allowPaths": []any{map[string]any{"path": dir, "name": "h", "writable": true}}}})
		assert.Equal(t, http.StatusForbidden, status, "%v", m)
		assert.Equal(t, "auth.forbidden", m["error"].(map[string]any)["code"])
		status, m = s.op(s.full, map[string]any{"op": "run.show", "runId": "rh"})
		assert.Equal(t, http.StatusNotFound, status, "no run was created: %v", m)
		s.mustOp(map[string]any{"op": "run.create", "runId": "rh", "chat": map[string]any{"kind": "chat", "stableChatId": "c-rh"},
			"profile": map[string]any{"allowPaths": []any{}}})
	})
	t.Run("Parity", func(t *testing.T) {
		res := s.mustOp(map[string]any{"op": "runs.list"})
		assert.NotEmpty(t, res)
		res = s.mustOp(map[string]any{"op": "checkpoints.list", "runId": "r1"})
		assert.NotEmpty(t, res)
		res = s.mustOp(map[string]any{"op": "stats"})
		assert.NotEmpty(t, res)
	})
	t.Run("TooLong", func(t *testing.T) {
		small := newServer(t, httpapi.Options{MaxRequestBytes: 100})
		body := `{"op":"actor.upload","actor":"a","path":"x","content":"` + strings.Repeat("x", 200) + `"}`
		resp, b := small.do(http.MethodPost, small.url("/v1/op"), small.full, strings.NewReader(body))
		assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "%s", b)
		assert.Contains(t, string(b), "batch.line_too_long")
	})
	t.Run("TooLongAnnounced", func(t *testing.T) {
		// A body whose Content-Length is past the limit is refused before
		// any of it is sent: the client here sends none.
		small := newServer(t, httpapi.Options{MaxRequestBytes: 100})
		conn, err := net.Dial("tcp", small.srv.Listener.Addr().String())
		require.NoError(t, err)
		defer conn.Close()
		require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
		_, err = fmt.Fprintf(conn, "POST /v1/op HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: 70000000\r\n\r\n", small.full)
		require.NoError(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err, "answered without the body")
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "%s", b)
		assert.Contains(t, string(b), "batch.line_too_long")
	})
	t.Run("ClaimedLengthCostsNothing", func(t *testing.T) {
		// A Content-Length within a (raised) limit with next to no body
		// behind it takes no memory for what never came: the body is
		// cut short (400), and the buffer grew only with what arrived.
		big := newServer(t, httpapi.Options{MaxRequestBytes: 1 << 40})
		var resp *http.Response
		grew := storetest.HeapGrowth(func() {
			conn, err := net.Dial("tcp", big.srv.Listener.Addr().String())
			require.NoError(t, err)
			defer conn.Close()
			require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
			_, err = fmt.Fprintf(conn, "POST /v1/op HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: 900000000\r\n\r\n{", big.full)
			require.NoError(t, err)
			require.NoError(t, conn.(*net.TCPConn).CloseWrite())
			resp, err = http.ReadResponse(bufio.NewReader(conn), nil)
			require.NoError(t, err)
			resp.Body.Close()
		})
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
		assert.Less(t, grew, uint64(16<<20), "the heap grew by %d bytes", grew)
	})
	t.Run("Help", func(t *testing.T) {
		resp, b := s.do(http.MethodGet, s.url("/v1/ops"), s.full, nil)
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Contains(t, string(b), "run.create")
		// The reference is batch's, which speaks of lines on stdin and a
		// current run; it must open with what differs over HTTP.
		first, _, _ := strings.Cut(string(b), "\n\n")
		assert.Contains(t, first, "POST /v1/op", "the help opens with /v1/op:\n%s", first)
		assert.Contains(t, first, "no current run", "the help opens with /v1/op:\n%s", first)
	})
}

func TestRunViews(t *testing.T) {
	s := newServer(t, httpapi.Options{})
	s.newRun("r1")
	s.mustOp(map[string]any{"op": "write", "runId": "r1", "path": "output/answer.md", "content": "v2\n"})

	t.Run("Run", func(t *testing.T) {
		m := s.okJSON(http.MethodGet, s.url("/v1/runs/r1"), nil)
		assert.Equal(t, "r1", m["runId"])
		resp, b := s.do(http.MethodGet, s.url("/v1/runs/zz"), s.full, nil)
		assert.Equal(t, http.StatusNotFound, resp.StatusCode)
		assert.Equal(t, "run.not_found", errCode(t, b))
	})
	t.Run("Checkpoints", func(t *testing.T) {
		m := s.okJSON(http.MethodGet, s.url("/v1/runs/r1/checkpoints"), nil)
		assert.Len(t, m["checkpoints"], 3)
		assert.Equal(t, false, m["more"])
		// a page: the first checkpoint, then the rest after it
		m = s.okJSON(http.MethodGet, s.url("/v1/runs/r1/checkpoints", "limit", "1"), nil)
		require.Len(t, m["checkpoints"], 1)
		assert.Equal(t, true, m["more"])
		first := m["checkpoints"].([]any)[0].(map[string]any)["seq"].(float64)
		m = s.okJSON(http.MethodGet, s.url("/v1/runs/r1/checkpoints", "afterSeq", fmt.Sprint(first)), nil)
		assert.Len(t, m["checkpoints"], 2)
		assert.Equal(t, false, m["more"])
		for _, kv := range [][]string{{"limit", "-1"}, {"limit", "10001"}, {"limit", "x"}, {"afterSeq", "-1"}, {"beforeSeq", "2"}} {
			resp, b := s.do(http.MethodGet, s.url("/v1/runs/r1/checkpoints", kv...), s.full, nil)
			assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "%v: %s", kv, b)
			assert.Equal(t, "workspace.invalid_argument", errCode(t, b), "%v", kv)
		}
	})
	t.Run("Files", func(t *testing.T) {
		m := s.okJSON(http.MethodGet, s.url("/v1/runs/r1/files", "path", "output"), nil)
		assert.Len(t, m["entries"], 1)
		assert.Equal(t, false, m["more"])
		resp, b := s.do(http.MethodGet, s.url("/v1/runs/r1/files", "depth", "-1"), s.full, nil)
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s", b)
		assert.Equal(t, "workspace.invalid_argument", errCode(t, b))
		// a page: the first entry, then the rest after it
		m = s.okJSON(http.MethodGet, s.url("/v1/runs/r1/files", "depth", "2", "limit", "1"), nil)
		require.Len(t, m["entries"], 1)
		assert.Equal(t, true, m["more"])
		first := m["entries"].([]any)[0].(map[string]any)["path"].(string)
		m = s.okJSON(http.MethodGet, s.url("/v1/runs/r1/files", "depth", "2", "after", first), nil)
		rest := m["entries"].([]any)
		require.NotEmpty(t, rest)
		assert.Equal(t, false, m["more"])
		whole := s.okJSON(http.MethodGet, s.url("/v1/runs/r1/files", "depth", "2"), nil)["entries"].([]any)
		assert.Equal(t, whole, append([]any{map[string]any(whole[0].(map[string]any))}, rest...))
		for _, root := range []string{".", "/", "./", "./."} {
			m = s.okJSON(http.MethodGet, s.url("/v1/runs/r1/files", "path", root, "depth", "2"), nil)
			assert.Equal(t, whole, m["entries"], "%q names the root", root)
		}
		for _, kv := range [][]string{{"limit", "-1"}, {"limit", "100001"}, {"limit", "x"}, {"after", "../x"}} {
			resp, b := s.do(http.MethodGet, s.url("/v1/runs/r1/files", kv...), s.full, nil)
			assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "%v: %s", kv, b)
		}
		// A visible root with no file is an empty directory, at a
		// checkpoint too; below it a missing path is not found.
		for _, at := range []string{"live", "cp_000001"} {
			m = s.okJSON(http.MethodGet, s.url("/v1/runs/r1/files", "path", "plan", "at", at), nil)
			assert.Equal(t, map[string]any{"entries": []any{}, "more": false}, m, at)
			m = s.okJSON(http.MethodGet, s.url("/v1/runs/r1/files", "at", at), nil)
			var roots []string
			for _, e := range m["entries"].([]any) {
				roots = append(roots, e.(map[string]any)["path"].(string))
			}
			assert.Subset(t, roots, []string{"output", "persist", "plan", "scratch", "summaries"}, at)
		}
		resp, b = s.do(http.MethodGet, s.url("/v1/runs/r1/files", "path", "plan/nope"), s.full, nil)
		assert.Equal(t, http.StatusNotFound, resp.StatusCode, "%s", b)
		assert.Equal(t, "workspace.file_not_found", errCode(t, b))
	})
	t.Run("FileAtCheckpoint", func(t *testing.T) {
		_, b := s.do(http.MethodGet, s.url("/v1/runs/r1/file", "path", "output/answer.md"), s.full, nil)
		assert.Equal(t, "v2\n", string(b))
		_, b = s.do(http.MethodGet, s.url("/v1/runs/r1/file", "path", "output/answer.md", "at", "cp_000002"), s.full, nil)
		assert.Equal(t, "v1\n", string(b))
		resp, b := s.do(http.MethodGet, s.url("/v1/runs/r1/file", "path", "output/answer.md", "at", "cp_000001"), s.full, nil)
		assert.Equal(t, http.StatusNotFound, resp.StatusCode)
		assert.Equal(t, "workspace.file_not_found", errCode(t, b))
		resp, b = s.do(http.MethodGet, s.url("/v1/runs/r1/file", "path", "output"), s.full, nil)
		assert.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
		assert.Equal(t, "workspace.path_is_directory", errCode(t, b))
	})
	t.Run("GeneratedFiles", func(t *testing.T) {
		// The run's manifest and a checkpoint's record are made when read,
		// not stored: they download as the read op returns them.
		for _, path := range []string{"manifest.json", "checkpoints/cp_000002/checkpoint.json"} {
			read := s.mustOp(map[string]any{"op": "host.read", "runId": "r1", "path": path})
			resp, b := s.do(http.MethodGet, s.url("/v1/runs/r1/file", "path", path), s.full, nil)
			require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", path, b)
			assert.Equal(t, read["content"], string(b), path)
			assert.Equal(t, `"`+cas.Sum(b).String()+`"`, resp.Header.Get("ETag"), path)
			ranged, rb := s.do(http.MethodGet, s.url("/v1/runs/r1/file", "path", path), s.full, nil, "Range", "bytes=0-9")
			assert.Equal(t, http.StatusPartialContent, ranged.StatusCode, path)
			assert.Equal(t, string(b[:10]), string(rb), path)
		}
	})
	t.Run("FileOfAHostDirectory", func(t *testing.T) {
		// A run the host created with a host directory: its files are
		// read from there, not from the store.
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "a.txt"), []byte("on the host\n"), 0o644))
		_, err := s.st.Runs.CreateRun(context.Background(), runs.CreateRequest{RunID: "rhost", Chat: runs.ChatKey{Kind: "chat", StableChatID: "c-rhost"},
			Profile: &runs.Profile{AllowPaths: []runs.HostPath{{Path: dir, Name: "h"}}}})
		require.NoError(t, err)
		resp, b := s.do(http.MethodGet, s.url("/v1/runs/rhost/file", "path", "host/h/a.txt"), s.full, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
		assert.Equal(t, "on the host\n", string(b))
		assert.Equal(t, `"`+cas.Sum(b).String()+`"`, resp.Header.Get("ETag"))
		resp, b = s.do(http.MethodGet, s.url("/v1/runs/rhost/file", "path", "host/h/absent.txt"), s.full, nil)
		assert.Equal(t, http.StatusNotFound, resp.StatusCode, "%s", b)
		assert.Empty(t, resp.Header.Get("ETag"), "an error has no file's headers")

		// A host file past what a read returns streams whole, and by
		// range, as a stored one does.
		big := bytes.Repeat([]byte("0123456789abcdef"), vfs.MaxReadBytes/16+1)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "big.bin"), big, 0o644))
		resp, b = s.do(http.MethodGet, s.url("/v1/runs/rhost/file", "path", "host/h/big.bin"), s.full, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%.300s", b)
		assert.True(t, bytes.Equal(big, b), "the whole file: %d bytes of %d", len(b), len(big))
		assert.Equal(t, `"`+cas.Sum(big).String()+`"`, resp.Header.Get("ETag"))
		ranged, rb := s.do(http.MethodGet, s.url("/v1/runs/rhost/file", "path", "host/h/big.bin"), s.full, nil, "Range", "bytes=-20")
		assert.Equal(t, http.StatusPartialContent, ranged.StatusCode)
		assert.Equal(t, string(big[len(big)-20:]), string(rb))
	})
	t.Run("Diff", func(t *testing.T) {
		m := s.okJSON(http.MethodGet, s.url("/v1/runs/r1/diff", "from", "2", "to", "3"), nil)
		ch := m["changes"].([]any)
		require.Len(t, ch, 1)
		assert.Contains(t, ch[0].(map[string]any)["unified"], "+v2")
		assert.Equal(t, false, m["more"])
		// a page of one file, then the page after it
		s.mustOp(map[string]any{"op": "write", "runId": "r1", "path": "output/later.md", "content": "x"})
		m = s.okJSON(http.MethodGet, s.url("/v1/runs/r1/diff", "from", "1", "to", "live", "limit", "1"), nil)
		require.Len(t, m["changes"], 1)
		assert.Equal(t, true, m["more"])
		first := m["changes"].([]any)[0].(map[string]any)["path"].(string)
		m = s.okJSON(http.MethodGet, s.url("/v1/runs/r1/diff", "from", "1", "to", "live", "after", first), nil)
		assert.NotEmpty(t, m["changes"])
		assert.Equal(t, false, m["more"])
		for _, c := range m["changes"].([]any) {
			assert.Greater(t, c.(map[string]any)["path"], first)
		}
		// maxBytes caps the text
		m = s.okJSON(http.MethodGet, s.url("/v1/runs/r1/diff", "from", "2", "to", "3", "maxBytes", "1"), nil)
		assert.Equal(t, true, m["changes"].([]any)[0].(map[string]any)["truncated"])
		for _, kv := range [][]string{{"limit", "-1"}, {"limit", "100001"}, {"limit", "x"}, {"after", "../x"}, {"maxBytes", "-1"}, {"maxBytes", "x"}} {
			resp, b := s.do(http.MethodGet, s.url("/v1/runs/r1/diff", append([]string{"from", "1"}, kv...)...), s.full, nil)
			assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "%v: %s", kv, b)
			assert.Equal(t, "workspace.invalid_argument", errCode(t, b), "%v", kv)
		}
	})
	t.Run("EventsPaged", func(t *testing.T) {
		m := s.okJSON(http.MethodGet, s.url("/v1/runs/r1/events", "limit", "2"), nil)
		require.Len(t, m["events"], 2)
		next := m["next"].(float64)
		assert.Equal(t, true, m["more"])
		m = s.okJSON(http.MethodGet, s.url("/v1/runs/r1/events", "afterSeq", "2", "limit", "2"), nil)
		assert.Equal(t, float64(3), m["events"].([]any)[0].(map[string]any)["seq"])
		assert.Equal(t, float64(2), next)
		all := s.okJSON(http.MethodGet, s.url("/v1/runs/r1/events"), nil)
		assert.Equal(t, false, all["more"])
		n := len(all["events"].([]any))
		// A full page that is the last: next, but no more.
		m = s.okJSON(http.MethodGet, s.url("/v1/runs/r1/events", "limit", fmt.Sprint(n)), nil)
		assert.Equal(t, false, m["more"])
		// Scrolled back from beforeSeq: nothing remains after the page below it.
		m = s.okJSON(http.MethodGet, s.url("/v1/runs/r1/events", "beforeSeq", "3", "limit", "1"), nil)
		assert.Equal(t, float64(2), m["events"].([]any)[0].(map[string]any)["seq"])
		assert.Equal(t, false, m["more"])
	})
	t.Run("FollowLongPoll", func(t *testing.T) {
		m := s.okJSON(http.MethodGet, s.url("/v1/runs/r1/events"), nil)
		last := m["events"].([]any)[len(m["events"].([]any))-1].(map[string]any)["seq"].(float64)
		got := make(chan map[string]any, 1)
		go func() {
			got <- s.okJSON(http.MethodGet, s.url("/v1/runs/r1/events/follow", "afterSeq", jsonNum(last), "wait", "20s"), nil)
		}()
		s.mustOp(map[string]any{"op": "write", "runId": "r1", "path": "output/more.md", "content": "x"})
		m = <-got
		evs := m["events"].([]any)
		require.NotEmpty(t, evs)
		assert.Equal(t, last+1, evs[0].(map[string]any)["seq"])
		m = s.okJSON(http.MethodGet, s.url("/v1/runs/r1/events/follow", "afterSeq", "1000", "wait", "1ms"), nil)
		assert.Empty(t, m["events"], "nothing new before the wait ends")
	})
	t.Run("FollowSSE", func(t *testing.T) {
		req, err := http.NewRequest(http.MethodGet, s.url("/v1/runs/r1/events/follow", "afterSeq", "1"), nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+s.full)
		req.Header.Set("Accept", "text/event-stream")
		resp, err := s.srv.Client().Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
		sc := bufio.NewScanner(resp.Body)
		nextID := func() string {
			for sc.Scan() {
				if id, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
					return id
				}
			}
			return ""
		}
		assert.Equal(t, "2", nextID(), "events after afterSeq, in order")
		assert.Equal(t, "3", nextID())
		s.mustOp(map[string]any{"op": "write", "runId": "r1", "path": "output/sse.md", "content": "x"})
		page := s.okJSON(http.MethodGet, s.url("/v1/runs/r1/events"), nil)["events"].([]any)
		last := jsonNum(page[len(page)-1].(map[string]any)["seq"].(float64))
		var ids []string
		for id := nextID(); id != ""; id = nextID() {
			ids = append(ids, id)
			if id == last {
				break
			}
		}
		assert.Equal(t, last, ids[len(ids)-1], "the new events arrive on the stream")
		// Close ends the stream, so a server can shut down.
		s.h.Close()
		done := make(chan struct{})
		go func() {
			for sc.Scan() {
			}
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("the stream did not end on Close")
		}
	})
}

func jsonNum(f float64) string {
	b, _ := json.Marshal(f)
	return string(bytes.TrimSpace(b))
}

// TestFollowSSEDeletedRun: a run deleted while its events stream ends the
// stream with an error event naming run.not_found, instead of heartbeats
// forever.
func TestFollowSSEDeletedRun(t *testing.T) {
	s := newServer(t, httpapi.Options{})
	s.mustOp(map[string]any{"op": "run.create", "runId": "r1", "chat": map[string]any{"kind": "chat", "stableChatId": "c-r1"}})
	req, err := http.NewRequest(http.MethodGet, s.url("/v1/runs/r1/events/follow", "afterSeq", "1"), nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+s.full)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := s.srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	sc := bufio.NewScanner(resp.Body)
	require.True(t, sc.Scan()) // ": following r1"
	_, err = s.st.Runs.CancelAndDeleteRun(context.Background(), "r1")
	require.NoError(t, err)
	var rest []string
	done := make(chan struct{})
	go func() {
		for sc.Scan() {
			rest = append(rest, sc.Text())
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the stream did not end when its run was deleted")
	}
	all := strings.Join(rest, "\n")
	assert.Contains(t, all, "event: error")
	assert.Contains(t, all, `"run.not_found"`)
}

// TestFollowLongPollDeletedRun: a long poll on a run deleted while it
// waits answers 404 run.not_found at once, not an empty page at the end
// of its wait.
func TestFollowLongPollDeletedRun(t *testing.T) {
	s := newServer(t, httpapi.Options{})
	s.mustOp(map[string]any{"op": "run.create", "runId": "r1", "chat": map[string]any{"kind": "chat", "stableChatId": "c-r1"}})
	type answer struct {
		status int
		body   []byte
	}
	got := make(chan answer, 1)
	go func() {
		resp, b := s.do(http.MethodGet, s.url("/v1/runs/r1/events/follow", "afterSeq", "1000", "wait", "60s"), s.full, nil)
		got <- answer{resp.StatusCode, b}
	}()
	time.Sleep(50 * time.Millisecond) // the poll is waiting (not a measure)
	_, err := s.st.Runs.CancelAndDeleteRun(context.Background(), "r1")
	require.NoError(t, err)
	select {
	case a := <-got:
		assert.Equal(t, http.StatusNotFound, a.status, "%s", a.body)
		assert.Equal(t, "run.not_found", errCode(t, a.body))
	case <-time.After(30 * time.Second):
		t.Fatal("the long poll did not end when its run was deleted")
	}
}

// TestOpRefusalsAreResponses: a /v1/op request its token may not make is
// answered in the shape of every op's answer, {op, id, ok:false, error},
// with 403, whether the token is read-only or limited to other actors.
func TestOpRefusalsAreResponses(t *testing.T) {
	s := newServer(t, httpapi.Options{})
	ro := s.token(tokens.Spec{ReadOnly: true})
	alice := s.token(tokens.Spec{Actors: []string{"alice"}})
	for _, tc := range []struct {
		name, token string
		req         map[string]any
	}{
		{"ReadOnly", ro, map[string]any{"op": "write", "id": "w1", "runId": "r", "path": "output/x", "content": "x"}},
		{"OtherActor", alice, map[string]any{"op": "actor.upload", "id": "w1", "actor": "bob", "path": "a", "content": "x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, m := s.op(tc.token, tc.req)
			assert.Equal(t, http.StatusForbidden, status)
			assert.Equal(t, tc.req["op"], m["op"])
			assert.Equal(t, "w1", m["id"])
			assert.Equal(t, false, m["ok"])
			assert.Equal(t, "auth.forbidden", m["error"].(map[string]any)["code"])
		})
	}
}

// TestOpUploadKeepsToMaxUploadBytes: an actor.upload through /v1/op is an
// upload too, held to --max-upload-bytes (422
// workspace.size_limit_exceeded, nothing stored) whether its content is
// text or base64; one that fits goes through.
func TestOpUploadKeepsToMaxUploadBytes(t *testing.T) {
	s := newServer(t, httpapi.Options{MaxUploadBytes: 1000})
	for _, req := range []map[string]any{
		{"op": "actor.upload", "actor": "lim", "path": "a", "content": strings.Repeat("x", 1001)},
		{"op": "actor.upload", "actor": "lim", "path": "b", "contentBase64": base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xff}, 1001))},
	} {
		status, m := s.op(s.full, req)
		assert.Equal(t, http.StatusUnprocessableEntity, status)
		assert.Equal(t, "workspace.size_limit_exceeded", m["error"].(map[string]any)["code"])
	}
	res := s.mustOp(map[string]any{"op": "actor.ls", "actor": "lim"})
	assert.Empty(t, res["entries"], "nothing was stored")
	s.mustOp(map[string]any{"op": "actor.upload", "actor": "lim", "path": "c", "contentBase64": base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xff}, 1000))})
}

// TestRunFileStreamsALargeCheckpointJSON: a checkpoint.json larger than a
// read returns (runs.MaxReadBytes) downloads whole, and by range, streamed
// from the checkpoint's tree as `wsctl cat` streams it, with the size and
// hash its stat names.
func TestRunFileStreamsALargeCheckpointJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 60,000 files")
	}
	ctx := context.Background()
	s := newServer(t, httpapi.Options{})
	s.mustOp(map[string]any{"op": "run.create", "runId": "r1", "chat": map[string]any{"kind": "chat", "stableChatId": "c-r1"}})
	ws := s.st.Runs.Workspace("r1", runs.HostScope)
	var edits []runs.Edit
	name := strings.Repeat("n", 200)
	for i := range 60000 {
		edits = append(edits, runs.Edit{Path: vfs.MustPath(fmt.Sprintf("output/d%02d/%s%06d.md", i/1000, name, i)), Content: []byte("x")})
	}
	fis, err := ws.Apply(ctx, edits)
	require.NoError(t, err)
	path := "checkpoints/" + fis[0].Checkpoint + "/checkpoint.json"
	fi, err := ws.Stat(ctx, vfs.MustPath(path))
	require.NoError(t, err)
	require.Greater(t, fi.Size, int64(runs.MaxReadBytes))

	req, err := http.NewRequest(http.MethodGet, s.url("/v1/runs/r1/file", "path", path), nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+s.full)
	resp, err := s.srv.Client().Do(req)
	require.NoError(t, err)
	h := cas.NewHasher()
	n, err := io.Copy(h, resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, fi.Size, n)
	assert.Equal(t, fi.Hash, h.Sum(), "the bytes its stat names")
	assert.Equal(t, `"`+fi.Hash.String()+`"`, resp.Header.Get("ETag"))

	resp, b := s.do(http.MethodGet, s.url("/v1/runs/r1/file", "path", path), s.full, nil, "Range", fmt.Sprintf("bytes=%d-", fi.Size-2))
	require.Equal(t, http.StatusPartialContent, resp.StatusCode, "%s", b)
	assert.Equal(t, "}\n", string(b), "the last bytes of the JSON")
	resp, b = s.do(http.MethodHead, s.url("/v1/runs/r1/file", "path", path), s.full, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	assert.Equal(t, fi.Size, resp.ContentLength)
}

// TestOpDownloadPastTheLimitNamesTheStreamingEndpoint: an actor.download
// of a file past what an op's answer carries is refused with
// workspace.size_limit_exceeded naming the way HTTP streams it, GET
// /workspace/file, not a command of the server's host; that way gives
// the file.
func TestOpDownloadPastTheLimitNamesTheStreamingEndpoint(t *testing.T) {
	s := newServer(t, httpapi.Options{})
	size := int64(protocol.MaxActorDownload + 1)
	_, err := s.st.Actors.Upload(context.Background(), "alice", "big.bin", storetest.Text(size))
	require.NoError(t, err)
	status, m := s.op(s.full, map[string]any{"op": "actor.download", "actor": "alice", "path": "big.bin"})
	assert.Equal(t, http.StatusUnprocessableEntity, status, "%v", m)
	e, _ := m["error"].(map[string]any)
	require.NotNil(t, e, "%v", m)
	assert.Equal(t, "workspace.size_limit_exceeded", e["code"])
	msg, _ := e["message"].(string)
	assert.Contains(t, msg, "GET /workspace/file")
	assert.NotContains(t, msg, "wsctl")

	resp, b := s.do(http.MethodGet, s.url("/workspace/file", "actor", "alice", "path", "big.bin"), s.full, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, size, int64(len(b)))
}
