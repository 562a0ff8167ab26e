package protocol_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/runs"
)

// TestRunsListPages: runs.list with a limit says whether more runs follow
// the page, and after the last run id of a page gives the next one, so a
// host pages through every run once, newest first; after a run that is
// gone is run.not_found.
func TestRunsListPages(t *testing.T) {
	e := newHostSession(t)
	for i := range 7 {
		e.ok(fmt.Sprintf(`{"op":"run.create","chat":{"kind":"character","stableChatId":"a"},"runId":"r%d"}`, i))
	}
	ids := func(res map[string]any) []string {
		var out []string
		for _, r := range res["runs"].([]any) {
			out = append(out, r.(map[string]any)["runId"].(string))
		}
		return out
	}
	whole := e.ok(`{"op":"runs.list"}`)
	assert.Equal(t, false, whole["more"], "no limit: every run, nothing more")
	var paged []string
	after := ""
	for range 4 {
		res := e.ok(fmt.Sprintf(`{"op":"runs.list","limit":3,"after":%q}`, after))
		page := ids(res)
		paged = append(paged, page...)
		if res["more"] == false {
			break
		}
		require.Len(t, page, 3)
		after = page[len(page)-1]
	}
	assert.Equal(t, []string{"r6", "r5", "r4", "r3", "r2", "r1", "r0"}, ids(whole))
	assert.Equal(t, ids(whole), paged, "the pages, each after the one before")
	last := e.ok(`{"op":"runs.list","limit":1,"after":"r1"}`)
	assert.Equal(t, []string{"r0"}, ids(last))
	assert.Equal(t, false, last["more"], "a page that ends the list")

	e.ok(`{"op":"run.delete","runId":"r3","cancel":true}`)
	_, code := e.ask(`{"op":"runs.list","limit":3,"after":"r3"}`)
	assert.Equal(t, "run.not_found", code)
}

// TestEventsPageOfLargeEvents: a page of events ends once their payloads
// reach journal.MaxPageBytes, short of its limit, and says more follow;
// pages each after the one before give every event once.
func TestEventsPageOfLargeEvents(t *testing.T) {
	ctx := context.Background()
	e := newHostSession(t)
	st := e.st
	e.ok(`{"op":"run.create","chat":{"kind":"character","stableChatId":"a"},"runId":"r"}`)
	big := strings.Repeat("x", 1<<20)
	for i := range 12 {
		require.NoError(t, st.DB.Update(ctx, func(tx *index.Tx) error {
			_, err := st.Journal.Append(ctx, tx, "r", journal.ToolCallCompleted, journal.Info, map[string]any{"i": i, "output": big})
			return err
		}))
	}
	last, err := st.Journal.Last(ctx, nil, "r")
	require.NoError(t, err)
	first := e.ok(`{"op":"events","runId":"r","limit":500}`)
	assert.Less(t, len(first["events"].([]any)), 12, "the page ends at the bytes its payloads reach")
	assert.Equal(t, true, first["more"], "a page cut short has more after it")
	var got int64
	for after := int64(0); ; {
		res := e.ok(fmt.Sprintf(`{"op":"events","runId":"r","limit":500,"afterSeq":%d}`, after))
		evs := res["events"].([]any)
		for _, ev := range evs {
			got++
			seq := int64(ev.(map[string]any)["seq"].(float64))
			require.Equal(t, got, seq, "every event once, in order")
			after = seq
		}
		if res["more"] == false {
			break
		}
		require.NotEmpty(t, evs)
	}
	assert.Equal(t, last, got)
}

// TestRunsListPageBoundsProfiles: a runs.list page ends before the run
// whose profile, like its chatRef, would take the page's past about
// 4 MiB, so a page of runs with large profiles is not held whole; the
// pages together still list every run once.
func TestRunsListPageBoundsProfiles(t *testing.T) {
	e := newHostSession(t)
	id := strings.Repeat("p", runs.MaxProfileBytes-1024)
	for i := range 6 {
		e.ok(fmt.Sprintf(`{"op":"run.create","chat":{"kind":"character","stableChatId":"a"},"runId":"r%d","profile":{"id":%q}}`, i, id))
	}
	var sizes []int
	var seen []string
	after := ""
	for range 6 {
		req := `{"op":"runs.list"}`
		if after != "" {
			req = fmt.Sprintf(`{"op":"runs.list","after":%q}`, after)
		}
		res := e.ok(req)
		page := res["runs"].([]any)
		sizes = append(sizes, len(page))
		for _, r := range page {
			seen = append(seen, r.(map[string]any)["runId"].(string))
		}
		if res["more"] == false {
			break
		}
		after = seen[len(seen)-1]
	}
	assert.Equal(t, []int{4, 2}, sizes, "about 4 MiB of profiles a page")
	assert.Equal(t, []string{"r5", "r4", "r3", "r2", "r1", "r0"}, seen)
}
