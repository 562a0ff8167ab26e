package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBatchAgentLoop drives a whole agent run through wsctl batch alone,
// over pipes, as a host in another language would: context, two model
// rounds, three tool calls (one fails), writes and patches, a search, an
// apply of 50 files, a commit, a commit rollback and finish. The journal
// reads as seed 002's timeline, the recorded files hold the bytes sent at
// seed 000's paths, and fsck finds the store sound (newCLI checks it too).
func TestBatchAgentLoop(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b := startBatch(t, ctx, c.app(), c.store, io.Discard)
	ok := func(line string) resp {
		t.Helper()
		r := b.ask(line)
		require.True(t, r.OK, "%s: %+v", line, r.Error)
		return r
	}

	ok(`{"op":"run.create","runId":"loop","chat":{"kind":"character","stableChatId":"keeper"},"inputs":{"prompt_snapshot.json":"{\"messages\":[]}"}}`)
	ok(`{"op":"context.assembled","sources":[{"name":"prompt_snapshot","bytes":14},{"name":"world_info"}],"messages":3}`)

	// Round 1: the model asks for two tool calls.
	ok(`{"op":"model.request","round":1,"model":"m-1","messages":3,"tools":4}`)
	resp1 := `{"choices": [{"message": {"tool_calls": [{"id": "call_1"}, {"id": "call_2"}]}}],  "usage": {"total": 9}}`
	r := ok(`{"op":"model.response","round":1,"response":` + resp1 + `,"finishReason":"tool_calls","toolCallIds":["call_1","call_2"]}`)
	assert.Equal(t, "model-responses/round-001.json", r.Result["path"])

	args1 := `{"path": "output/main.md",   "content": "# Draft\n"}`
	ok(`{"op":"tool.call","toolCallId":"call_1","name":"workspace.write","round":1,"args":` + args1 + `}`)
	ok(`{"op":"write","path":"output/main.md","content":"# Draft\n"}`)
	result1 := `{"path":"output/main.md","checkpointId":"cp_000002"}`
	ok(`{"op":"tool.result","toolCallId":"call_1","name":"workspace.write","result":` + result1 + `}`)

	args2 := `{"path":"output/main.md","old":"no such text","new":"x"}`
	ok(`{"op":"tool.call","toolCallId":"call_2","name":"workspace.apply_patch","round":1,"args":` + args2 + `}`)
	r = b.ask(`{"op":"patch","path":"output/main.md","old":"no such text","new":"x"}`)
	require.False(t, r.OK)
	failed := fmt.Sprintf(`{"is_error":true,"code":%q}`, r.code())
	ok(`{"op":"tool.result","toolCallId":"call_2","name":"workspace.apply_patch","result":` + failed + `,"error":{"code":` + quote(r.code()) + `,"message":"old text not found"}}`)

	// Round 2: one more tool call (a search), then the model writes.
	ok(`{"op":"model.request","round":2,"model":"m-1","messages":7}`)
	resp2 := `{"choices":[{"message":{"tool_calls":[{"id":"call_3"}]}}]}`
	ok(`{"op":"model.response","round":2,"response":` + resp2 + `,"toolCallIds":["call_3"]}`)
	args3 := `{"query":"draft"}`
	ok(`{"op":"tool.call","toolCallId":"call_3","name":"workspace.search","round":2,"args":` + args3 + `}`)
	r = ok(`{"op":"search","query":"draft","path":"output","limit":5}`)
	hits := r.Result["hits"].([]any)
	require.Len(t, hits, 1)
	assert.Equal(t, "output/main.md", hits[0].(map[string]any)["path"])
	result3, err := json.Marshal(r.Result)
	require.NoError(t, err)
	ok(`{"op":"tool.result","toolCallId":"call_3","name":"workspace.search","result":` + string(result3) + `}`)

	ok(`{"op":"patch","path":"output/main.md","old":"# Draft","new":"# Final"}`)
	ok(`{"op":"write","path":"persist/facts.md","content":"the keeper likes tea\n"}`)
	var edits []string
	for i := range 50 {
		edits = append(edits, fmt.Sprintf(`{"path":"scratch/notes/%02d.md","content":"note %d\n"}`, i, i))
	}
	r = ok(`{"op":"apply","edits":[` + strings.Join(edits, ",") + `]}`)
	assert.Len(t, r.Result["files"], 50)
	applyCP := r.Result["checkpointId"].(string)
	require.NotEmpty(t, applyCP)

	r = ok(`{"op":"commit"}`)
	assert.Equal(t, "# Final\n", r.Result["message"].(map[string]any)["mes"])
	r = ok(`{"op":"commit.rollback","checkpointId":"cp_000002"}`)
	assert.Equal(t, "# Draft\n", r.Result["message"].(map[string]any)["mes"])
	ok(`{"op":"finish"}`)

	t.Run("Timeline", func(t *testing.T) {
		r := ok(`{"op":"events","limit":500}`)
		var types []string
		for _, e := range r.Result["events"].([]any) {
			types = append(types, e.(map[string]any)["type"].(string))
		}
		want := []string{
			"run_created", "status_changed", "checkpoint_created",
			"context_assembled",
			"model_request_created", "model_completed", "model_response_stored",
			"tool_call_requested", "workspace_file_written", "checkpoint_created", "tool_call_completed",
			"tool_call_requested", "tool_call_failed",
			"model_request_created", "model_completed", "model_response_stored",
			"tool_call_requested", "tool_call_completed",
			"workspace_patch_applied", "checkpoint_created",
			"workspace_file_written", "checkpoint_created",
		}
		for range 50 {
			want = append(want, "workspace_file_written")
		}
		want = append(want, "checkpoint_created")
		assert.Equal(t, want, types[:len(want)])
		rest := types[len(want):]
		for _, seed := range []string{"chat_commit_requested", "chat_commit_completed", "commit_rolled_back", "persistent_changes_committed", "run_completed"} {
			assert.Contains(t, rest, seed)
		}
		assert.Equal(t, []string{"run_completed", "scratch_collected"}, rest[len(rest)-2:], "finishing collects scratch/ last")
	})

	t.Run("HiddenFilesHoldTheBytesSent", func(t *testing.T) {
		for path, want := range map[string]string{
			"tool-args/call_1.json":          args1,
			"tool-args/call_2.json":          args2,
			"tool-args/call_3.json":          args3,
			"tool-results/call_1.json":       result1,
			"tool-results/call_2.json":       failed,
			"tool-results/call_3.json":       string(result3),
			"model-responses/round-001.json": resp1,
			"model-responses/round-002.json": resp2,
		} {
			r := ok(`{"op":"host.read","path":` + quote(path) + `}`)
			assert.Equal(t, want, r.Result["content"], path)
			r = b.ask(`{"op":"read","path":` + quote(path) + `}`)
			assert.Equal(t, "workspace.path_not_visible", r.code(), path)
		}
		r := ok(`{"op":"host.read","path":"manifest.json"}`)
		assert.Contains(t, r.Result["content"], `"workspaceVersion": 1`)
		r = ok(`{"op":"host.read","path":"checkpoints/` + applyCP + `/checkpoint.json"}`)
		var view struct {
			ID    string `json:"id"`
			Files []struct {
				Path string `json:"path"`
			} `json:"files"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.Result["content"].(string)), &view))
		assert.Equal(t, applyCP, view.ID)
		assert.Len(t, view.Files, 4, "input/ (2 files), output/main.md, persist/facts.md: the 50 scratch notes were collected when the run finished")
		r = ok(`{"op":"checkpoint.view","checkpointId":` + quote(applyCP) + `}`)
		assert.Len(t, r.Result["files"], 4)
		r = ok(`{"op":"fsck"}`)
		assert.Equal(t, true, r.Result["ok"])
	})

	t.Run("ErrReservedNames", func(t *testing.T) {
		before := len(ok(`{"op":"runs.list"}`).Result["runs"].([]any))
		for _, root := range []string{"input", "tool-args", "tool-results", "model-responses", "checkpoints", "events.jsonl", "manifest.json"} {
			for _, prof := range []string{
				`{"visibleRoots":["output",` + quote(root) + `],"writableRoots":["output"]}`,
				`{"visibleRoots":["output",` + quote(root) + `],"writableRoots":["output",` + quote(root) + `]}`,
			} {
				r := b.ask(`{"op":"run.create","runId":"reserved","chat":{"kind":"character","stableChatId":"keeper"},"profile":` + prof + `}`)
				assert.Equal(t, "workspace.invalid_argument", r.code(), prof)
				if r.Error != nil {
					assert.Contains(t, r.Error.Message, quote(root))
				}
			}
		}
		assert.Len(t, ok(`{"op":"runs.list"}`).Result["runs"], before, "no run was created")
		r := ok(`{"op":"run.create","runId":"second","chat":{"kind":"character","stableChatId":"keeper"}}`)
		require.True(t, r.OK)
		events := len(ok(`{"op":"events","limit":500}`).Result["events"].([]any))
		for _, path := range []string{"tool-args/x.json", "tool-results/x.json", "model-responses/round-001.json", "checkpoints/cp_000001/x", "events.jsonl", "manifest.json", "input/x"} {
			r := b.ask(`{"op":"write","path":` + quote(path) + `,"content":"x"}`)
			assert.Equal(t, "workspace.path_not_visible", r.code(), path)
			r = b.ask(`{"op":"apply","edits":[{"path":"output/ok.md","content":"x"},{"path":` + quote(path) + `,"content":"x"}]}`)
			assert.Equal(t, "workspace.path_not_visible", r.code(), path)
		}
		assert.Len(t, ok(`{"op":"events","limit":500}`).Result["events"], events, "nothing was written")
		r = b.ask(`{"op":"host.read","path":"output/ok.md"}`)
		assert.Equal(t, "workspace.file_not_found", r.code())
		ok(`{"op":"run.delete","cancel":true}`)
	})

	t.Run("ErrRecordsForMissingOrFinishedRun", func(t *testing.T) {
		events := len(ok(`{"op":"events","runId":"loop","limit":500}`).Result["events"].([]any))
		for _, line := range []string{
			`{"op":"tool.call","runId":"%s","toolCallId":"call_9","name":"workspace.read","args":{}}`,
			`{"op":"tool.result","runId":"%s","toolCallId":"call_1","result":{}}`,
			`{"op":"model.request","runId":"%s","round":3}`,
			`{"op":"model.response","runId":"%s","round":3,"response":{}}`,
			`{"op":"context.assembled","runId":"%s"}`,
		} {
			r := b.ask(fmt.Sprintf(line, "nope"))
			assert.Equal(t, "run.not_found", r.code(), line)
			r = b.ask(fmt.Sprintf(line, "loop"))
			assert.Equal(t, "run.invalid_transition", r.code(), line)
		}
		assert.Len(t, ok(`{"op":"events","runId":"loop","limit":500}`).Result["events"], events, "nothing was written")
		r := b.ask(`{"op":"host.read","runId":"loop","path":"tool-args/call_9.json"}`)
		assert.Equal(t, "workspace.file_not_found", r.code())
	})

	require.NoError(t, b.in.Close())
	assert.Equal(t, 0, <-b.done)
	out := c.ok("fsck")
	assert.Contains(t, out, "ok")

	// The timeline names each record on its line; show names the last.
	log := c.ok("log", "loop")
	for _, want := range []string{
		`context_assembled\s+2 sources: prompt_snapshot, world_info, 3 messages`,
		`model_request_created\s+round 1, m-1, 3 messages`,
		`model_completed\s+round 1, tool_calls, 2 tool calls`,
		`model_response_stored\s+round 2 -> model-responses/round-002.json`,
		`tool_call_requested\s+call_1 workspace.write \(round 1\)`,
		`tool_call_completed\s+call_1 workspace.write -> tool-results/call_1.json`,
		`tool_call_failed\s+call_2 workspace.apply_patch: workspace.patch_old_string_not_found`,
	} {
		assert.Regexp(t, want, log)
	}
	show := c.ok("show", "loop")
	assert.Regexp(t, `last tool call\s+tool_call_completed \(seq \d+\): call_3 workspace.search`, show)
	assert.Regexp(t, `last model round\s+model_response_stored \(seq \d+\): round 2`, show)
	var views []struct {
		ID    string `json:"id"`
		Files []struct {
			Path  string `json:"path"`
			Hash  string `json:"hash"`
			Bytes int64  `json:"bytes"`
		} `json:"files"`
	}
	c.jsonOut(&views, "checkpoints", "loop")
	require.NotEmpty(t, views)
	assert.Len(t, views[0].Files, 2, "cp_000001: input/ only")
	assert.Equal(t, "input/persist_snapshot.json", views[0].Files[0].Path)
}
