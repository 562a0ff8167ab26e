package wsstore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/runs"
)

// sum returns one integer a query computes.
func (e *env) sum(query string) int64 {
	e.t.Helper()
	var n int64
	require.NoError(e.t, e.s.DB.View(e.ctx, func(tx *index.Tx) error {
		return tx.GetContext(e.ctx, &n, query)
	}))
	return n
}

func TestStats(t *testing.T) {
	e := newEnv(t)
	e.create("chat-1", "run_a")
	e.write("run_a", "output/a.txt", []byte("hello"))
	e.write("run_a", "output/b.txt", []byte("hello"))
	e.write("run_a", "output/c.txt", []byte("world!"))
	e.collect()
	snap := e.stat("run_a", "input/persist_snapshot.json").Size

	st, err := e.s.Stats(e.ctx)

	require.NoError(t, err)
	assert.Equal(t, int64(1), st.Chats)
	assert.Equal(t, int64(1), st.Runs)
	// One checkpoint after init, one per write.
	assert.Equal(t, int64(4), st.Checkpoints)
	// run_created, status_changed and checkpoint_created at creation, then
	// workspace_file_written and checkpoint_created per write.
	assert.Equal(t, int64(3+3*2), st.Events)
	// The snapshot, "hello" (twice, stored once) and "world!".
	assert.Equal(t, int64(3), st.Blobs)
	assert.Zero(t, st.Chunks)
	// The empty tree (the chat's persist layer), input/, four roots and
	// three versions of output/.
	assert.Equal(t, int64(9), st.Trees)
	assert.Equal(t, snap+5+6, st.BlobLogicalBytes)
	// Checkpoints hold snap, +a, +b and +c; the live root equals the
	// last.
	assert.Equal(t, snap+(snap+5)+(snap+10)+2*(snap+16), st.ReferencedBytes)
	assert.InDelta(t, float64(st.ReferencedBytes)/float64(st.BlobLogicalBytes), st.DedupRatio, 1e-9)

	blobsStored := e.sum(`SELECT sum(stored) FROM blobs`)
	treesStored := e.sum(`SELECT sum(length(data)) FROM trees`)
	assert.Equal(t, blobsStored+treesStored, st.StoredBytes)
	assert.Equal(t, blobsStored, st.ContentStoredBytes)
	assert.Equal(t, treesStored, st.TreeStoredBytes)
	assert.InDelta(t, float64(st.BlobLogicalBytes)/float64(blobsStored), st.CompressionRatio, 1e-9)
	assert.Equal(t, map[string]int64{"raw": 2, "zstd": 1}, st.ByCodec, "the JSON snapshot compresses, five bytes do not")
	assert.Zero(t, st.DeltaSavedBytes)

	var files int64
	for _, p := range []string{e.s.DB.Path(), e.s.DB.Path() + "-wal"} {
		if fi, err := os.Stat(p); err == nil {
			files += fi.Size()
		}
	}
	assert.Equal(t, files, st.FileBytes)
	used, err := e.s.DB.UsedBytes(e.ctx)
	require.NoError(t, err)
	assert.Equal(t, used, st.UsedBytes, "what the store cap measures")
	assert.Greater(t, st.UsedBytes, st.StoredBytes)

	b, err := json.Marshal(st)
	require.NoError(t, err)
	var keys map[string]any
	require.NoError(t, json.Unmarshal(b, &keys))
	assert.ElementsMatch(t, []string{"chats", "runs", "checkpoints", "events", "blobs", "chunks", "trees",
		"blobLogicalBytes", "storedBytes", "contentStoredBytes", "treeStoredBytes", "referencedBytes", "dedupRatio", "compressionRatio", "fileBytes", "usedBytes", "byCodec", "deltaSavedBytes"},
		slices.Collect(maps.Keys(keys)))
}

func TestStatsEmptyStore(t *testing.T) {
	e := newEnv(t)
	st, err := e.s.Stats(e.ctx)
	require.NoError(t, err)
	assert.Zero(t, st.Blobs)
	assert.Zero(t, st.DedupRatio)
	assert.Zero(t, st.CompressionRatio)
	assert.Equal(t, map[string]int64{}, st.ByCodec)
	assert.Positive(t, st.FileBytes)
}

func TestDU(t *testing.T) {
	e := newEnv(t)
	e.create("chat-1", "run_a")
	e.write("run_a", "persist/notes.md", []byte("keep me"))
	e.write("run_a", "output/a.md", []byte("answer a"))
	_, err := e.s.Runs.Finish(e.ctx, "run_a")
	require.NoError(t, err)
	e.create("chat-1", "run_b") // sees persist/notes.md
	e.write("run_b", "output/b.md", []byte("answer b"))
	e.write("run_b", "output/b.bin", random(30, 10000))
	e.create("chat-2", "run_c")
	e.write("run_c", "output/c.md", []byte("answer c"))
	e.collect()
	snap := func(run string) int64 { return e.stat(run, "input/persist_snapshot.json").Size }
	checkpoints := func(run string) int64 {
		cps, err := e.s.Checkpoints.List(e.ctx, run)
		require.NoError(t, err)
		return int64(len(cps))
	}
	chat1 := runs.ChatWorkspaceID(runs.ChatKey{Kind: "character", StableChatID: "chat-1"})
	chat2 := runs.ChatWorkspaceID(runs.ChatKey{Kind: "character", StableChatID: "chat-2"})

	du, err := collectDU(e.ctx, e.s)

	require.NoError(t, err)
	// Unique bytes are checked below; blank them to compare the rest.
	unique := map[string]int64{}
	for i, u := range du {
		unique[u.ChatID+"/"+u.RunID] = u.UniqueStoredBytes
		du[i].UniqueStoredBytes = 0
	}
	want := []wsstore.Usage{
		{ChatID: chat1, Files: 1, LogicalBytes: 7},
		{ChatID: chat1, RunID: "run_a", Files: 3, LogicalBytes: snap("run_a") + 7 + 8, Checkpoints: checkpoints("run_a")},
		{ChatID: chat1, RunID: "run_b", Files: 4, LogicalBytes: snap("run_b") + 7 + 8 + 10000, Checkpoints: checkpoints("run_b")},
		{ChatID: chat2},
		{ChatID: chat2, RunID: "run_c", Files: 2, LogicalBytes: snap("run_c") + 8, Checkpoints: checkpoints("run_c")},
	}
	if chat2 < chat1 {
		want = append(want[3:], want[:3]...)
	}
	assert.Equal(t, want, du)
	assert.Zero(t, unique[chat1+"/"], "run_a and run_b share the persist layer")
	assert.Zero(t, unique[chat2+"/"], "the empty tree is everyone's")
	for _, run := range []string{"run_a", "run_b"} {
		assert.Positive(t, unique[chat1+"/"+run], run)
	}

	// Deleting a run frees exactly its unique bytes.
	e.drop("run_b")
	rep := e.gc(wsstore.GCOptions{Grace: -1, Now: e.later})
	assert.Equal(t, unique[chat1+"/run_b"], rep.FreedBytes)
	assert.Greater(t, rep.FreedBytes, int64(10000), "the random file is run_b's alone")

	b, err := json.Marshal(wsstore.Usage{ChatID: "chat_x", Files: 1})
	require.NoError(t, err)
	assert.JSONEq(t, `{"workspaceId":"chat_x","files":1,"logicalBytes":0,"checkpoints":0,"uniqueStoredBytes":0}`, string(b))
}

func TestDUEmptyStore(t *testing.T) {
	e := newEnv(t)
	du, err := collectDU(e.ctx, e.s)
	require.NoError(t, err)
	assert.Empty(t, du, "no rows")
}

func TestStatsDeltaSavings(t *testing.T) {
	e := newEnv(t)
	e.create("chat-1", "run_a")
	var doc []byte
	for i := range 5 {
		doc = append(doc, []byte(strings.Repeat(fmt.Sprintf("round %d: the keeper lit the lamp and wrote in the log. ", i), 40))...)
		e.write("run_a", "output/main.md", doc)
	}
	e.settle()
	st, err := e.s.Stats(e.ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(4), st.ByCodec["delta"], "every older version of output/main.md is a delta against the next")
	deltas := e.sum(`SELECT sum(stored) FROM blobs WHERE codec = 3`)
	assert.Positive(t, st.DeltaSavedBytes)
	assert.Less(t, deltas, st.DeltaSavedBytes, "the deltas hold less than they saved")
}

// TestStatsCountsEveryView: content that only an actor space holds is
// referenced too, so the dedup ratio counts it (a store of one actor file
// read "dedup 0.6x", referenced counting only runs' roots); the live space
// and each held version of it count it again.
func TestStatsCountsEveryView(t *testing.T) {
	e := newEnv(t)
	e.create("chat-1", "run_a")
	e.write("run_a", "output/a.txt", []byte("hello"))
	before, err := e.s.Stats(e.ctx)
	require.NoError(t, err)
	report := bytes.Repeat([]byte("r"), 300_000)
	_, err = e.s.Actors.Upload(e.ctx, "alice", "reports/r.md", bytes.NewReader(report))
	require.NoError(t, err)
	_, err = e.s.Actors.Upload(e.ctx, "alice", "notes.md", strings.NewReader("note"))
	require.NoError(t, err)

	st, err := e.s.Stats(e.ctx)
	require.NoError(t, err)
	assert.Equal(t, before.BlobLogicalBytes+300_000+4, st.BlobLogicalBytes)
	// Two versions of alice's space (the report, then the report and the
	// note) and the live space, as a run's live root beside its last
	// checkpoint.
	assert.Equal(t, before.ReferencedBytes+300_000+2*(300_000+4), st.ReferencedBytes)
	assert.GreaterOrEqual(t, st.DedupRatio, 1.0)
}

// collectDU returns every row s.DU hands on.
func collectDU(ctx context.Context, s *wsstore.Store) ([]wsstore.Usage, error) {
	var out []wsstore.Usage
	err := s.DU(ctx, func(u wsstore.Usage) error { out = append(out, u); return nil })
	return out, err
}
