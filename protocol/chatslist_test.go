package protocol_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/runs"
)

// TestChatsListPages: chats.list answers a page of chats, newest first,
// and says whether more follow it; after the last chat id of a page gives
// the next one, so a host pages through every chat once; stableChatId
// keeps the chats of that id, of every kind; a limit out of range is
// batch.invalid_request, after a chat that is gone store.not_found.
func TestChatsListPages(t *testing.T) {
	e := newHostSession(t)
	var want []string // newest first
	for i := range 7 {
		res := e.ok(fmt.Sprintf(`{"op":"run.create","chat":{"kind":"character","stableChatId":"c%d"},"runId":"r%d"}`, i, i))
		want = append([]string{res["workspaceId"].(string)}, want...)
	}
	group := e.ok(`{"op":"run.create","chat":{"kind":"group","stableChatId":"c3"},"runId":"g3"}`)["workspaceId"].(string)
	want = append([]string{group}, want...)
	ids := func(res map[string]any) []string {
		var out []string
		for _, c := range res["chats"].([]any) {
			out = append(out, c.(map[string]any)["id"].(string))
		}
		return out
	}
	whole := e.ok(`{"op":"chats.list"}`)
	assert.Equal(t, want, ids(whole))
	assert.Equal(t, false, whole["more"], "every chat fits the default page")

	var paged []string
	after := ""
	for range 4 {
		res := e.ok(fmt.Sprintf(`{"op":"chats.list","limit":3,"after":%q}`, after))
		page := ids(res)
		paged = append(paged, page...)
		if res["more"] == false {
			break
		}
		require.Len(t, page, 3)
		after = page[len(page)-1]
	}
	assert.Equal(t, want, paged, "the pages, each after the one before")

	c3 := e.ok(`{"op":"chats.list","stableChatId":"c3"}`)
	assert.Equal(t, []string{group, runs.ChatWorkspaceID(runs.ChatKey{Kind: "character", StableChatID: "c3"})}, ids(c3))
	one := e.ok(`{"op":"chats.list","stableChatId":"c3","limit":1}`)
	assert.Equal(t, []string{group}, ids(one))
	assert.Equal(t, true, one["more"])

	for _, bad := range []string{`{"op":"chats.list","limit":-1}`, `{"op":"chats.list","limit":10001}`, `{"op":"chats.list","after":7}`} {
		_, code := e.ask(bad)
		assert.Equal(t, "batch.invalid_request", code, bad)
	}
	e.ok(`{"op":"chat.delete","force":true,"chats":[{"kind":"character","stableChatId":"c5"}]}`)
	_, code := e.ask(fmt.Sprintf(`{"op":"chats.list","limit":3,"after":%q}`, want[2]))
	assert.Equal(t, "store.not_found", code)
}

// TestDeletionsPages: deletions answers a page of the log and says
// whether more entries follow it, so a host pages through the log with
// afterId; a limit past 10,000 is batch.invalid_request.
func TestDeletionsPages(t *testing.T) {
	e := newHostSession(t)
	for i := range 5 {
		e.ok(fmt.Sprintf(`{"op":"run.create","chat":{"kind":"character","stableChatId":"c"},"runId":"r%d"}`, i))
		e.ok(fmt.Sprintf(`{"op":"run.delete","runId":"r%d","cancel":true}`, i))
	}
	all := e.ok(`{"op":"deletions"}`)
	n := len(all["deletions"].([]any))
	require.GreaterOrEqual(t, n, 5)
	assert.Equal(t, false, all["more"])
	var got int
	after := 0.0
	for {
		res := e.ok(fmt.Sprintf(`{"op":"deletions","afterId":%d,"limit":2}`, int64(after)))
		ds := res["deletions"].([]any)
		got += len(ds)
		if res["more"] == false {
			break
		}
		require.Len(t, ds, 2)
		after = ds[len(ds)-1].(map[string]any)["id"].(float64)
	}
	assert.Equal(t, n, got)
	_, code := e.ask(`{"op":"deletions","limit":10001}`)
	assert.Equal(t, "batch.invalid_request", code)
}
