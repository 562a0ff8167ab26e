package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/runs"
)

// copyRuns adds n runs copied from run src, with ids run_copy_000001 …,
// created one nanosecond apart after it, at no checkpoint.
func copyRuns(t *testing.T, c *cli, src string, n int) {
	t.Helper()
	db := rawDB(t, c)
	rows, err := db.Query(`SELECT name FROM pragma_table_info('runs') WHERE name NOT IN ('id', 'created_at', 'head_checkpoint')`)
	require.NoError(t, err)
	var cols []string
	for rows.Next() {
		var name string
		require.NoError(t, rows.Scan(&name))
		cols = append(cols, name)
	}
	require.NoError(t, rows.Err())
	list := strings.Join(cols, ", ")
	_, err = db.Exec(`WITH RECURSIVE n (i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
		INSERT INTO runs (id, created_at, head_checkpoint, `+list+`) SELECT 'run_copy_' || printf('%06d', n.i), r.created_at + n.i, 0, `+list+`
		FROM n, runs r WHERE r.id = ?`, n, src)
	require.NoError(t, err)
}

// TestRunsPages: runs reads the runs a page at a time (pages of two
// here) and prints them all, newest first, the same as one page would;
// --limit and --after still give a page.
func TestRunsPages(t *testing.T) {
	defer func(n int) { runsPage = n }(runsPage)
	runsPage = 2
	c := newCLI(t)
	st := c.open()
	_, err := st.Runs.CreateRun(context.Background(), runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "first"}, RunID: "run_first"})
	require.NoError(t, err)
	require.NoError(t, st.Close())
	copyRuns(t, c, "run_first", 6)

	var list []runs.Run
	c.jsonOut(&list, "runs")
	var ids []string
	for _, r := range list {
		ids = append(ids, r.ID)
	}
	assert.Equal(t, []string{"run_copy_000006", "run_copy_000005", "run_copy_000004", "run_copy_000003", "run_copy_000002", "run_copy_000001", "run_first"}, ids)
	text := c.ok("runs")
	assert.Equal(t, 8, strings.Count(text, "\n"), "a header and seven runs:\n%s", text)
	assert.Equal(t, 1, strings.Count(text, "RUN"), "one header:\n%s", text)

	c.jsonOut(&list, "runs", "--limit", "3", "--after", "run_copy_000005")
	ids = ids[:0]
	for _, r := range list {
		ids = append(ids, r.ID)
	}
	assert.Equal(t, []string{"run_copy_000004", "run_copy_000003", "run_copy_000002"}, ids)
	var empty []runs.Run
	c.jsonOut(&empty, "runs", "--after", "run_first")
	assert.Empty(t, empty)
}

// TestRunsHoldsAPage: runs reads and prints the runs a page at a time,
// so the live heap grows by a few pages for 10,000 runs (pages of 10
// here), in text and in JSON, where holding every run grows it by their
// rows (44 MB for 20,000 runs with 1 KB references, 106 MB in JSON). A
// page at a time grew it by 0.4–2.7 MB, other tests loading both cores
// or not (1.1–3.3 MB for 20,000 runs); one page of all 10,000 runs with
// 1 KB references grew it by 9.3 MB, 15.7 MB in JSON: the bound, 6 MiB,
// sits between.
func TestRunsHoldsAPage(t *testing.T) {
	defer func(n int) { runsPage = n }(runsPage)
	runsPage = 10
	ctx := context.Background()
	ref := json.RawMessage(`"` + strings.Repeat("r", 1000) + `"`)
	store := func(n int) *cli {
		c := newCLI(t)
		st := c.open()
		_, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "first"}, RunID: "run_first", ChatRef: ref})
		require.NoError(t, err)
		require.NoError(t, st.Close())
		copyRuns(t, c, "run_first", n)
		return c
	}
	growth := func(c *cli, n int, json bool) uint64 {
		least := uint64(math.MaxUint64)
		for range 3 {
			var out countingWriter
			g := storetest.HeapGrowth(func() {
				require.NoError(t, runRuns(ctx, runsOptions{globals: globals{storeDir: c.store, json: json, out: &out, errOut: io.Discard}}, nil))
			})
			require.Greater(t, int(out), n*40, "the runs were printed")
			least = min(least, g)
		}
		return least
	}
	const few, many = 20, 10000
	smallStore, largeStore := store(few), store(many)
	for _, json := range []bool{false, true} {
		small, large := growth(smallStore, few, json), growth(largeStore, many, json)
		t.Logf("heap growth of runs (json %v): %d bytes for %d runs, %d for %d", json, small, few, large, many)
		assert.Less(t, large, small+6<<20, "heap growth for %d runs (json %v)", many, json)
	}
}

// TestRunsOfAStableChatHoldAPage: runs --chat STABLE_CHAT_ID, which
// merges the runs of the chats of every kind with that id, reads them a
// page at a time too: the heap grows by a few pages' garbage for 10,000
// runs (pages of 10 here), where it held every run of those chats.
func TestRunsOfAStableChatHoldAPage(t *testing.T) {
	defer func(n int) { runsPage = n }(runsPage)
	runsPage = 10
	ctx := context.Background()
	ref := json.RawMessage(`"` + strings.Repeat("r", 1000) + `"`)
	growth := func(n int) uint64 {
		c := newCLI(t)
		st := c.open()
		_, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "first"}, RunID: "run_first", ChatRef: ref})
		require.NoError(t, err)
		_, err = st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "group", StableChatID: "first"}, RunID: "run_group"})
		require.NoError(t, err)
		require.NoError(t, st.Close())
		copyRuns(t, c, "run_first", n)
		least := uint64(math.MaxUint64)
		for range 3 {
			var out countingWriter
			g := storetest.HeapGrowth(func() {
				require.NoError(t, runRuns(ctx, runsOptions{globals: globals{storeDir: c.store, json: true, out: &out, errOut: io.Discard}, chat: "first"}, nil))
			})
			require.Greater(t, int(out), n*1000, "the runs were printed")
			least = min(least, g)
		}
		return least
	}
	small, large := growth(20), growth(10000)
	t.Logf("heap growth of runs --chat: %d bytes for 20 runs, %d for 10,000", small, large)
	// Reading every run before printing one grew the heap by 115 MB for
	// 20,000 runs with 1 KB references, one page of these 10,000 by 23.5
	// MB; a page at a time grows the live heap by 0.6–2.2 MB, other tests
	// loading both cores or not (1.3–2.8 MB for 20,000).
	assert.Less(t, large, small+6<<20, "heap growth for 10,000 runs")
}

// TestRunsOfAStableChatMerge: runs --chat STABLE_CHAT_ID lists the runs
// of the chats of every kind with that id newest first, read a page at a
// time from each chat (pages of two here), with --status, --limit and
// --after as for one chat.
func TestRunsOfAStableChatMerge(t *testing.T) {
	defer func(n int) { runsPage = n }(runsPage)
	runsPage = 2
	c := newCLI(t)
	st := c.open()
	ctx := context.Background()
	for i, kind := range []string{"character", "group", "character", "group", "group", "character", "other"} {
		_, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: kind, StableChatID: "s"}, RunID: fmt.Sprintf("r%d_%s", i, kind)})
		require.NoError(t, err)
	}
	_, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "another"}, RunID: "r_another"})
	require.NoError(t, err)
	_, err = st.Runs.Finish(ctx, "r3_group")
	require.NoError(t, err)
	require.NoError(t, st.Close())
	ids := func(args ...string) []string {
		var list []runs.Run
		c.jsonOut(&list, append([]string{"runs", "--chat", "s"}, args...)...)
		out := []string{}
		for _, r := range list {
			out = append(out, r.ID)
		}
		return out
	}
	all := []string{"r6_other", "r5_character", "r4_group", "r3_group", "r2_character", "r1_group", "r0_character"}
	assert.Equal(t, all, ids())
	assert.Equal(t, all[:3], ids("--limit", "3"))
	assert.Equal(t, all[4:6], ids("--after", "r3_group", "--limit", "2"))
	assert.Equal(t, []string{"r3_group"}, ids("--status", "completed"))
	text := c.ok("runs", "--chat", "s")
	assert.Equal(t, 1, strings.Count(text, "RUN"), "one header:\n%s", text)
	assert.Equal(t, 8, strings.Count(text, "\n"), "a header and seven runs:\n%s", text)
}

// largestWrite records the largest single write: a page of runs is
// written at once.
type largestWrite int

func (w *largestWrite) Write(b []byte) (int, error) {
	*w = max(*w, largestWrite(len(b)))
	return len(b), nil
}

// TestRunsOfAStableChatPageBytes: runs --chat STABLE_CHAT_ID prints the
// runs it merges in pages that end at about runs.MaxRunPageRefBytes of
// chatRefs and profiles, as a page read from the store does, not in pages
// of runsPage runs whatever their size: twelve runs with profiles of
// 600 KiB never come as one page of 7 MB.
func TestRunsOfAStableChatPageBytes(t *testing.T) {
	ctx := context.Background()
	c := newCLI(t)
	st := c.open()
	for _, kind := range []string{"character", "group"} {
		_, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: kind, StableChatID: "big"}, RunID: "run_" + kind})
		require.NoError(t, err)
	}
	require.NoError(t, st.Close())
	db := rawDB(t, c)
	prof, err := json.Marshal(runs.Profile{ID: strings.Repeat("p", 600<<10)})
	require.NoError(t, err)
	_, err = db.Exec(`UPDATE runs SET profile = ?`, string(prof))
	require.NoError(t, err)
	copyRuns(t, c, "run_character", 5)
	_, err = db.Exec(`UPDATE runs SET id = 'run_g' || substr(id, 9) WHERE id LIKE 'run_copy_%'`)
	require.NoError(t, err)
	copyRuns(t, c, "run_group", 5)

	var out largestWrite
	require.NoError(t, runRuns(ctx, runsOptions{globals: globals{storeDir: c.store, json: true, out: &out, errOut: io.Discard}, chat: "big"}, nil))
	t.Logf("largest page written: %d bytes", int(out))
	assert.Greater(t, int(out), 600<<10, "the runs were printed")
	assert.LessOrEqual(t, int(out), runs.MaxRunPageRefBytes+runs.MaxProfileBytes, "a page of runs --chat ends at about MaxRunPageRefBytes")
}
