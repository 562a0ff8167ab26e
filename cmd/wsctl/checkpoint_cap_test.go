package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/journal"
)

// TestBatchCheckpointCap: run.create takes profile.maxCheckpoints; a
// checkpoint past it prunes the oldest, which then read as
// checkpoint.not_found; the log records the pruning and show prints the cap.
func TestBatchCheckpointCap(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	rs := c.batch(strings.Join([]string{
		`{"op":"run.create","chat":{"kind":"character","stableChatId":"s1"},"runId":"b1","profile":{"maxCheckpoints":2}}`,
		`{"op":"write","path":"output/main.md","content":"one"}`,
		`{"op":"write","path":"output/main.md","content":"two"}`,
		`{"op":"read","path":"output/main.md","at":"cp_000001"}`,
		`{"op":"read","path":"output/main.md","at":"cp_000002"}`,
		`{"op":"run.create","chat":{"kind":"character","stableChatId":"s2"},"profile":{"maxCheckpoints":-1}}`,
	}, "\n") + "\n")
	require.Len(t, rs, 6)
	for _, r := range rs[:3] {
		require.True(t, r.OK, "%s: %+v", r.Op, r.Error)
	}
	assert.Equal(t, "cp_000003", rs[2].Result["checkpointId"])
	assert.Equal(t, "checkpoint.not_found", rs[3].code(), "cp_000001 was pruned")
	assert.True(t, rs[4].OK, "cp_000002 is kept")
	assert.Equal(t, "one", rs[4].Result["content"])
	assert.Equal(t, "workspace.invalid_argument", rs[5].code())

	assert.Contains(t, c.ok("log", "b1"), "checkpoints_pruned")
	assert.Contains(t, c.ok("log", "b1"), "cp_000001 (keeps at most 2)")
	assert.Contains(t, c.ok("show", "b1"), "keeps at most 2 checkpoints")
	assert.Contains(t, c.ok("show", "b1"), "checkpoints  2, head cp_000003")
	assert.Contains(t, c.ok("show", "b1", "--json"), `"maxCheckpoints": 2`)
}

// TestSummarizeByteCapPrune: a prune by the byte cap is told by its cap
// and what it freed, not as a count cap of 0.
func TestSummarizeByteCapPrune(t *testing.T) {
	e := journal.Event{Type: journal.CheckpointsPruned,
		Payload: []byte(`{"checkpointIds":["cp_000001","cp_000002"],"maxCheckpointBytes":8388608,"freedBytes":3145728}`)}
	assert.Equal(t, "cp_000001, cp_000002 (keeps at most 8.0 MiB, freed 3.0 MiB)", summarize(e))
	e.Payload = []byte(`{"checkpointIds":["cp_000001"],"maxCheckpoints":2}`)
	assert.Equal(t, "cp_000001 (keeps at most 2)", summarize(e))
}

// TestSummarizeLargePrune: a prune of more checkpoints than its event
// names is told by the ones named and how many more it deleted.
func TestSummarizeLargePrune(t *testing.T) {
	e := journal.Event{Type: journal.CheckpointsPruned,
		Payload: []byte(`{"checkpointIds":["cp_000001","cp_000002"],"checkpointCount":5000,"maxCheckpoints":2}`)}
	assert.Equal(t, "cp_000001, cp_000002 and 4998 more (keeps at most 2)", summarize(e))
	e.Payload = []byte(`{"checkpointIds":["cp_000001"],"checkpointCount":1,"maxCheckpoints":2}`)
	assert.Equal(t, "cp_000001 (keeps at most 2)", summarize(e))
}
