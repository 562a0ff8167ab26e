package main

import (
	"context"
	"io"
	"math"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/runs"
)

// TestDUPrintsPages: du prints its rows a page at a time as the store
// counts them (pages of 10 here), in text and in JSON, the same rows as
// one page would hold; it wrote every row at once.
func TestDUPrintsPages(t *testing.T) {
	ctx := context.Background()
	c := newCLI(t)
	st := c.open()
	_, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "first"}, RunID: "run_first"})
	require.NoError(t, err)
	require.NoError(t, st.Close())
	copyRuns(t, c, "run_first", 199)
	var whole []wsstore.Usage
	c.jsonOut(&whole, "du")
	require.Len(t, whole, 201, "the chat's row and its 200 runs'")

	defer func(n int) { duPage = n }(duPage)
	duPage = 10
	var paged []wsstore.Usage
	c.jsonOut(&paged, "du")
	assert.Equal(t, whole, paged, "pages print the rows one page does")
	text := c.ok("du")
	assert.Equal(t, 202, strings.Count(text, "\n"), "a header and 201 rows")
	assert.Equal(t, 1, strings.Count(text, "CHAT"), "one header")
	for _, json := range []bool{false, true} {
		var out largestWrite
		require.NoError(t, runDU(ctx, globals{storeDir: c.store, json: json, out: &out, errOut: io.Discard}, nil))
		t.Logf("largest write of du (json %v): %d bytes", json, int(out))
		assert.Less(t, int(out), 20*200, "a write holds a page of rows (json %v)", json)
	}
}

// TestDUHoldsAPage: du prints its rows a page at a time as the store
// counts them (pages of 10 here, the collector at 1 %), in text and in
// JSON: for 20,000 runs the heap grows by what the count holds of each
// run (its roots, about 600 bytes a run) and a page, not by the rows.
func TestDUHoldsAPage(t *testing.T) {
	defer func(n int) { duPage = n }(duPage)
	duPage = 10
	defer debug.SetGCPercent(debug.SetGCPercent(1))
	ctx := context.Background()
	growth := func(n int, json bool) uint64 {
		c := newCLI(t)
		st := c.open()
		_, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "first"}, RunID: "run_first"})
		require.NoError(t, err)
		require.NoError(t, st.Close())
		copyRuns(t, c, "run_first", n)
		least := uint64(math.MaxUint64)
		for range 3 {
			var out countingWriter
			g := storetest.HeapGrowth(func() {
				require.NoError(t, runDU(ctx, globals{storeDir: c.store, json: json, out: &out, errOut: io.Discard}, nil))
			})
			require.Greater(t, int(out), n*40, "the rows were printed")
			least = min(least, g)
		}
		return least
	}
	for _, json := range []bool{false, true} {
		small, large := growth(20, json), growth(20000, json)
		t.Logf("heap growth of du (json %v): %d bytes for 20 runs, %d for 20,000", json, small, large)
		assert.Less(t, large, small+12<<20, "heap growth for 20,000 runs (json %v)", json)
	}
}
