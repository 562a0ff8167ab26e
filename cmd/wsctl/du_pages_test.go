package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/runs"
)

// duStore makes a store of one chat of 200 runs and returns it with
// what du --json prints for it.
func duStore(t *testing.T) (*cli, []wsstore.Usage) {
	c := newCLI(t)
	st := c.open()
	_, err := st.Runs.CreateRun(context.Background(), runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "first"}, RunID: "run_first"})
	require.NoError(t, err)
	require.NoError(t, st.Close())
	copyRuns(t, c, "run_first", 199)
	var whole []wsstore.Usage
	c.jsonOut(&whole, "du")
	return c, whole
}

// TestDUPrintsPages: du prints its rows a page at a time as the store
// counts them (pages of 10 here), in text and in JSON, the same rows as
// one page would hold; it wrote every row at once.
func TestDUPrintsPages(t *testing.T) {
	ctx := context.Background()
	c, whole := duStore(t)
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

// TestBatchDUPages: the du op answers a page of rows (limit, after: the
// page's last row, more), in the order wsctl du prints them; the pages
// together are du's rows. A page's line holds its rows, not the store's.
func TestBatchDUPages(t *testing.T) {
	c, whole := duStore(t)
	require.Len(t, whole, 201)

	var paged []wsstore.Usage
	req := `{"op":"du","limit":50}`
	for {
		out, errOut, code := c.run(req+"\n", "batch")
		require.Equal(t, 0, code, errOut)
		assert.Less(t, len(out), 50*200, "the line holds a page of rows")
		var r struct {
			OK     bool `json:"ok"`
			Result struct {
				Usage []wsstore.Usage `json:"usage"`
				More  bool            `json:"more"`
			} `json:"result"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &r), out)
		require.True(t, r.OK, out)
		require.LessOrEqual(t, len(r.Result.Usage), 50)
		paged = append(paged, r.Result.Usage...)
		if !r.Result.More {
			break
		}
		last := r.Result.Usage[len(r.Result.Usage)-1]
		req = fmt.Sprintf(`{"op":"du","limit":50,"after":{"workspaceId":%q,"runId":%q}}`, last.ChatID, last.RunID)
	}
	assert.Equal(t, whole, paged, "the pages are du's rows")
	assert.Len(t, c.batch(`{"op":"du"}`)[0].Result["usage"], 201, "limit: 1000 by default")

	for _, l := range []string{`{"op":"du","limit":10001}`, `{"op":"du","limit":-1}`, `{"op":"du","after":{"workspaceId":""}}`, `{"op":"du","after":{"runId":"x"}}`} {
		assert.Equal(t, "batch.invalid_request", c.batch(l)[0].code(), l)
	}
}
