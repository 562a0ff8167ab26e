package protocol_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/protocol"
)

// TestRunsListPages: runs.list with a limit says whether more runs follow
// the page, and after the last run id of a page gives the next one, so a
// host pages through every run once, newest first; after a run that is
// gone is run.not_found.
func TestRunsListPages(t *testing.T) {
	st := storetest.OpenStoreWith(t, wsstore.Options{Now: storetest.NewClock().Now})
	e := &retentionSession{t: t, st: st, s: protocol.NewSession(protocol.Backend{Runs: st.Runs, Journal: st.Journal,
		Retention: st.Runs, Host: st.Runs})}
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
