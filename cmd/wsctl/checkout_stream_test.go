package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/internal/heappeak"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

// TestCheckoutRecords: a checkout of the live run writes its records
// (tool-args/, tool-results/) beside its files, as the host's view shows
// them; a checkout of a checkpoint, which holds none, writes none.
func TestCheckoutRecords(t *testing.T) {
	c := newCLI(t)
	rs := c.batch(strings.Join([]string{
		`{"op":"run.create","chat":{"kind":"character","stableChatId":"s1"},"runId":"r1"}`,
		`{"op":"write","runId":"r1","path":"output/a.md","content":"a\n"}`,
		`{"op":"tool.call","runId":"r1","toolCallId":"call_1","name":"search","args":{"q":"x"}}`,
		`{"op":"tool.result","runId":"r1","toolCallId":"call_1","result":{"hits":1}}`,
	}, "\n") + "\n")
	for _, r := range rs {
		require.True(t, r.OK, "%+v", r)
	}
	live := filepath.Join(t.TempDir(), "live")
	c.ok("checkout", "r1", live)
	assert.FileExists(t, filepath.Join(live, "output", "a.md"))
	assert.FileExists(t, filepath.Join(live, "tool-args", "call_1.json"))
	assert.FileExists(t, filepath.Join(live, "tool-results", "call_1.json"))

	at := filepath.Join(t.TempDir(), "at")
	c.ok("checkout", "r1", at, "--at", "cp_000002")
	assert.FileExists(t, filepath.Join(at, "output", "a.md"))
	assert.NoDirExists(t, filepath.Join(at, "tool-args"))
}

// TestCheckoutStreamsItsListing: checkout walks the trees as it writes
// the files, holding no listing of them: checking out 30,000 files with
// long names keeps the heap below what their listing alone would take
// (each listed file's path, hash and sizes: about 550 bytes each here; a
// checkout that listed them first peaked 24 MiB above its start, one
// that streams 9 MiB, most of it the tree cache and the store's own).
func TestCheckoutStreamsItsListing(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 30,000 files")
	}
	c := newCLI(t)
	st := c.open()
	ctx := context.Background()
	_, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "big"}, RunID: "big"})
	require.NoError(t, err)
	const n = 30_000
	name := strings.Repeat("n", 200)
	edits := make([]runs.Edit, 0, n)
	for i := range n {
		edits = append(edits, runs.Edit{Path: vfs.MustPath(fmt.Sprintf("output/d%03d/%s%05d.md", i/100, name, i)), Content: []byte("x")})
	}
	_, err = st.Runs.Workspace("big", runs.HostScope).Apply(ctx, edits)
	require.NoError(t, err)
	require.NoError(t, st.Close())
	edits = nil

	dir := filepath.Join(t.TempDir(), "co")
	runtime.GC()
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	stop := heappeak.Start()
	out := c.ok("checkout", "big", dir)
	peak := stop()
	assert.Contains(t, out, fmt.Sprintf("checked out %d files", n+1), "and the run's input/persist_snapshot.json")
	entries, err := os.ReadDir(filepath.Join(dir, "output"))
	require.NoError(t, err)
	assert.Len(t, entries, n/100)
	listing := int64(n) * 450
	t.Logf("heap peak %.1f MiB above %.1f MiB; a listing of the files takes over %.1f MiB", float64(int64(peak)-int64(base))/(1<<20), float64(base)/(1<<20), float64(listing)/(1<<20))
	assert.Less(t, int64(peak)-int64(base), listing)
}
