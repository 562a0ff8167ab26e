package main

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
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
