package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/httpapi"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/protocol"
	"github.com/wsstore/wsstore/tokens"
	"github.com/wsstore/wsstore/wserr"
)

// opScript drives every op of the op table, in an order where each finds
// what it needs: a success where one is possible, otherwise a refusal
// with a code. "$WS" stands for r1's chat workspace id, "$HOST" for a
// host directory.
var opScript = []string{
	`{"op":"run.create","runId":"r1","chat":{"kind":"chat","stableChatId":"c1"},"inputs":{"prompt.md":"the prompt\n"}}`,
	`{"op":"run.create","runId":"r2","chat":{"kind":"chat","stableChatId":"c2"}}`,
	`{"op":"write","runId":"r1","path":"output/a.md","content":"hello\n"}`,
	`{"op":"append","runId":"r1","path":"output/a.md","content":"more\n"}`,
	`{"op":"patch","runId":"r1","path":"output/a.md","old":"more","new":"less"}`,
	`{"op":"patch","runId":"r1","path":"output/a.md","old":"absent","new":"x"}`,
	`{"op":"read","runId":"r1","path":"output/a.md"}`,
	`{"op":"read","runId":"r1","path":"output/a.md","at":2}`,
	`{"op":"list","runId":"r1","path":"output"}`,
	`{"op":"stat","runId":"r1","path":"output/a.md"}`,
	`{"op":"search","runId":"r1","query":"hello"}`,
	`{"op":"apply","runId":"r1","edits":[{"path":"output/b.md","content":"b\n"},{"path":"output/c.md","content":"c\n"}]}`,
	`{"op":"delete","runId":"r1","path":"output/c.md"}`,
	`{"op":"checkpoint","runId":"r1","reason":"manual"}`,
	`{"op":"diff","runId":"r1","from":1}`,
	`{"op":"rollback","runId":"r1","checkpointId":"cp_000004"}`,
	`{"op":"rollback","runId":"r1","checkpointId":"cp_000999"}`,
	`{"op":"events","runId":"r1","limit":5}`,
	`{"op":"host.read","runId":"r1","path":"input/prompt.md"}`,
	`{"op":"host.list","runId":"r1","depth":2}`,
	`{"op":"checkpoints.list","runId":"r1"}`,
	`{"op":"checkpoint.view","runId":"r1","checkpointId":2}`,
	`{"op":"manifest.set","runId":"r1","manifest":{"workspaceVersion":1,"artifacts":[{"id":"main","path":"output/a.md","target":"message_body"}]}}`,
	`{"op":"manifest.set","runId":"r1","manifest":{"workspaceVersion":7}}`,
	`{"op":"manifest.get","runId":"r1"}`,
	`{"op":"context.assembled","runId":"r1","sources":[{"name":"prompt","bytes":11}],"tokens":3}`,
	`{"op":"model.request","runId":"r1","round":1,"model":"m"}`,
	`{"op":"model.response","runId":"r1","round":1,"response":"ok","finishReason":"stop"}`,
	`{"op":"tool.call","runId":"r1","toolCallId":"t1","name":"write","args":{"path":"output/a.md"},"round":1}`,
	`{"op":"tool.result","runId":"r1","toolCallId":"t1","result":"done"}`,
	`{"op":"materialize","runId":"r1","paths":["chat/history.tail.md"]}`,
	`{"op":"run.hostpath","runId":"r1","hostPath":"/no/such/dir"}`,
	`{"op":"run.create","runId":"r3","chat":{"kind":"chat","stableChatId":"c3"},"profile":{"allowPaths":[{"path":"$HOST","name":"proj"}]}}`,
	`{"op":"run.hostpath","runId":"r3","hostPath":"$HOST/src/main.go"}`,
	`{"op":"commit","runId":"r1"}`,
	`{"op":"commits.list","runId":"r1"}`,
	`{"op":"commit.resolve","runId":"r1","commitId":"commit_r1_0001","status":"failed"}`,
	`{"op":"commit.resolve","runId":"r1","commitId":"commit_r1_0009","status":"failed"}`,
	`{"op":"commit.rollback","runId":"r1","checkpointId":1}`,
	`{"op":"run.status","runId":"r2","status":"failed","reason":"test"}`,
	`{"op":"runs.list"}`,
	`{"op":"run.show","runId":"r1"}`,
	`{"op":"runs.diff","fromRunId":"r1","from":1,"toRunId":"r2"}`,
	`{"op":"finish","runId":"r1"}`,
	`{"op":"finish","runId":"r1"}`,
	`{"op":"chats.list"}`,
	`{"op":"chat.show","workspaceId":"$WS"}`,
	`{"op":"policy.set","policy":{"keepCompletedRuns":5}}`,
	`{"op":"policy.get"}`,
	`{"op":"prune","dryRun":true}`,
	`{"op":"actor.upload","actor":"alice","path":"notes/a.md","content":"alice\n"}`,
	`{"op":"actor.upload","actor":"alice","path":"notes/b.md","content":"more\n"}`,
	`{"op":"actor.ls","actor":"alice","depth":2}`,
	`{"op":"actor.download","actor":"alice","path":"notes/a.md"}`,
	`{"op":"actor.download","actor":"alice","path":"notes"}`,
	`{"op":"actor.stats","actor":"alice"}`,
	`{"op":"actor.rm","actor":"alice","path":"notes/b.md"}`,
	`{"op":"actor.rm-prefix","actor":"alice","prefix":"zz/"}`,
	`{"op":"actor.changes","actor":"alice","limit":2}`,
	`{"op":"actor.diff","actor":"alice","from":1,"to":3}`,
	`{"op":"actor.diff","actor":"alice","from":1,"to":99}`,
	`{"op":"actors.list"}`,
	`{"op":"actor.gc","actor":"alice","keepVersions":1}`,
	`{"op":"run.delete","runId":"r2"}`,
	`{"op":"chat.delete","chats":[{"kind":"chat","stableChatId":"c2"}]}`,
	`{"op":"deletions"}`,
	`{"op":"stats"}`,
	`{"op":"du"}`,
	`{"op":"fsck"}`,
	`{"op":"gc","dryRun":true}`,
	`{"op":"reclaim"}`,
}

// streamedOps are served by their own endpoints over HTTP, as streams:
// /v1/op refuses them (they name files on the server's host).
var streamedOps = []string{"export", "import"}

// volatile are the result fields that differ between two stores given the
// same requests: times, durations, and file sizes (SQLite pages, which the
// token table and its writes change).
var volatile = regexp.MustCompile(`^(created|createdAt|updatedAt|finishedAt|deletedAt|time|at|seconds|durationMs|elapsed.*|.*[Ff]ileBytes.*|.*[Pp]ages|dbBytes|walBytes|freeBytes|sqlite.*|.*Bytes(Before|After)|lastUsed)$`)

var rfc3339 = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d`)

// normalize drops volatile fields and time values from a decoded response.
func normalize(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			if volatile.MatchString(k) {
				continue
			}
			out[k] = normalize(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalize(e)
		}
		return out
	case string:
		if rfc3339.MatchString(x) {
			return "<time>"
		}
	}
	return v
}

// shapeOnly are the ops whose numbers describe the database file: only
// their shape (the keys, recursively) is compared.
var shapeOnly = map[string]bool{"stats": true, "du": true, "reclaim": true, "gc": true, "fsck": true}

func shape(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			out[k] = shape(e)
		}
		return out
	case []any:
		if len(x) > 0 {
			return []any{shape(x[0])}
		}
		return []any{}
	}
	return "value"
}

// batchStore is a second store that an in-process batch session (the one
// wsctl batch runs) answers the same requests on, without host paths as
// /v1/op's sessions: r3's run.create is refused on both, with the same code.
func batchSession(t *testing.T) (*wsstore.Store, *protocol.Session) {
	st := storetest.OpenStore(t)
	// The same token rows as the served store, so its tables match.
	_, _, err := st.Tokens.Create(context.Background(), tokens.Spec{Name: "full"})
	require.NoError(t, err)
	return st, protocol.NewSession(protocol.Backend{Runs: st.Runs, Journal: st.Journal, Actors: st.Actors, Retention: st.Runs,
		Records: st.Runs, Host: st.Runs, Checkpoints: st.Checkpoints, Store: st, Archives: st, NoHostPaths: true})
}

// decodeResponse decodes a protocol response into generic JSON.
func decodeResponse(t *testing.T, resp protocol.Response) map[string]any {
	var b bytes.Buffer
	require.NoError(t, protocol.WriteResponse(&b, resp))
	var m map[string]any
	require.NoError(t, json.Unmarshal(b.Bytes(), &m))
	return m
}

func codeOf(m map[string]any) string {
	if e, ok := m["error"].(map[string]any); ok {
		c, _ := e["code"].(string)
		return c
	}
	return ""
}

// TestEveryOpOverHTTP sends every op of the op table through POST /v1/op
// on a real listener and the same requests to a batch session on a second
// store: the responses match (ok, code, result, bar times and file sizes),
// and each HTTP status is its code's. The cases come from the op table
// itself: an op with no case here fails the test. Every op also gets a
// request with an unknown field, refused alike. Export and import, which
// /v1/op refuses, are compared through GET /v1/export and POST /v1/import.
func TestEveryOpOverHTTP(t *testing.T) {
	s := newServer(t, httpapi.Options{})
	_, sess := batchSession(t)
	ctx := context.Background()

	covered := map[string]int{}
	ws, host := "", t.TempDir()
	for _, line := range opScript {
		line = strings.ReplaceAll(strings.ReplaceAll(line, "$WS", ws), "$HOST", host)
		var req map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &req), line)
		op := req["op"].(string)
		covered[op]++
		status, got := s.op(s.full, req)
		want := decodeResponse(t, sess.Handle(ctx, []byte(line)))
		if op == "run.create" && ws == "" {
			ws, _ = want["result"].(map[string]any)["workspaceId"].(string)
		}
		t.Logf("%-18s %d %s", op, status, codeOf(got))
		assert.Equal(t, protocol.HTTPStatus(wserrCode(codeOf(want))), status, "%s: %v", line, got)
		assert.Equal(t, codeOf(want), codeOf(got), "%s: the code", line)
		assert.Equal(t, want["ok"], got["ok"], "%s", line)
		if shapeOnly[op] {
			assert.Equal(t, shape(want["result"]), shape(got["result"]), "%s: the result's shape", line)
		} else {
			assert.Equal(t, normalize(want["result"]), normalize(got["result"]), "%s: the result", line)
		}
	}
	for _, op := range streamedOps {
		covered[op]++
	}
	for _, o := range protocol.Ops() {
		assert.NotZero(t, covered[o.Name], "op %s has no HTTP case: add one to opScript", o.Name)
		line := `{"op":"` + o.Name + `","runId":"r1","noSuchField":1}`
		status, got := s.op(s.full, map[string]any{"op": o.Name, "runId": "r1", "noSuchField": 1})
		if slices.Contains(streamedOps, o.Name) {
			assert.Equal(t, http.StatusForbidden, status, "%s over /v1/op", o.Name)
			assert.Contains(t, got["error"].(map[string]any)["message"], "/v1/export")
			continue
		}
		want := decodeResponse(t, sess.Handle(ctx, []byte(line)))
		assert.Equal(t, "batch.invalid_request", codeOf(want), line)
		assert.Equal(t, codeOf(want), codeOf(got), "%s", line)
		assert.Equal(t, http.StatusBadRequest, status, "%s", line)
	}

	t.Run("ExportImport", func(t *testing.T) {
		// The batch store, made to match the served one for what is
		// exported.
		_, bsess := batchSession(t)
		for _, line := range opScript[:3] {
			require.Equal(t, true, decodeResponse(t, bsess.Handle(ctx, []byte(line)))["ok"], line)
		}
		fresh := newServer(t, httpapi.Options{})
		s2 := newServer(t, httpapi.Options{})
		for _, line := range opScript[:3] {
			var req map[string]any
			require.NoError(t, json.Unmarshal([]byte(line), &req))
			s2.mustOp(req)
		}
		dir := t.TempDir()
		file := filepath.Join(dir, "r1.wsar")
		want := decodeResponse(t, bsess.Handle(ctx, []byte(`{"op":"export","path":"`+file+`","runs":["r1"]}`)))
		require.Equal(t, true, want["ok"], "%v", want)
		status, arc, sum := s2.export(s2.full, "run", "r1")
		require.Equal(t, http.StatusOK, status, "%s", arc)
		assert.Equal(t, normalize(want["result"]), normalize(sum), "the export's summary")

		// Import: the batch op from the file into a fresh store, the
		// endpoint from the body into another.
		_, isess := batchSession(t)
		want = decodeResponse(t, isess.Handle(ctx, []byte(`{"op":"import","path":"`+file+`"}`)))
		got := fresh.okJSON(http.MethodPost, fresh.url("/v1/import"), bytes.NewReader(arc))
		assert.Equal(t, normalize(want["result"]), normalize(any(got)), "the import's summary")

		// The same refusals.
		require.NoError(t, os.WriteFile(file, arc[:len(arc)/3], 0o600))
		want = decodeResponse(t, isess.Handle(ctx, []byte(`{"op":"import","path":"`+file+`"}`)))
		resp, body := fresh.do(http.MethodPost, fresh.url("/v1/import"), fresh.full, bytes.NewReader(arc[:len(arc)/3]))
		assert.Equal(t, codeOf(want), errCode(t, body), "a truncated archive")
		assert.Equal(t, protocol.HTTPStatus(wserrCode(codeOf(want))), resp.StatusCode)
		want = decodeResponse(t, bsess.Handle(ctx, []byte(`{"op":"export","path":"`+file+`","runs":["zz"]}`)))
		status, body, _ = s2.export(s2.full, "run", "zz")
		assert.Equal(t, codeOf(want), errCode(t, body), "an unknown run")
		assert.Equal(t, protocol.HTTPStatus(wserrCode(codeOf(want))), status)
	})
}

func wserrCode(s string) wserr.Code { return wserr.Code(s) }
