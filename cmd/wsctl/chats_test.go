package main

import (
	"context"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/runs"
)

// TestChats: chats lists the chat workspaces newest first, reading them a
// page at a time (pages of two here), as a table or JSON; --limit,
// --after and --stable-chat give a page of them, and the batch op
// chats.list the same pages; a bad --limit is a usage error, an --after
// that names no chat store.not_found.
func TestChats(t *testing.T) {
	defer func(n int) { chatsPage = n }(chatsPage)
	chatsPage = 2
	c := newCLI(t)
	st := c.open()
	ctx := context.Background()
	var want []string // newest first
	for _, k := range []runs.ChatKey{{Kind: "character", StableChatID: "a"}, {Kind: "group", StableChatID: "a"},
		{Kind: "character", StableChatID: "b"}, {Kind: "character", StableChatID: "c"}, {Kind: "group", StableChatID: "d"}} {
		_, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: k})
		require.NoError(t, err)
		want = append([]string{runs.ChatWorkspaceID(k)}, want...)
	}
	require.NoError(t, st.Close())
	ids := func(args ...string) []string {
		var list []runs.Chat
		c.jsonOut(&list, append([]string{"chats"}, args...)...)
		out := []string{}
		for _, ch := range list {
			out = append(out, ch.ID)
		}
		return out
	}

	out := c.ok("chats")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 6, out)
	assert.Regexp(t, `^WORKSPACE\s+KIND\s+STABLE CHAT\s+PERSIST VERSION\s+CREATED\s+UPDATED$`, lines[0])
	for i, id := range want {
		assert.True(t, strings.HasPrefix(lines[i+1], id+" "), "line %d: %s", i+1, lines[i+1])
	}
	assert.Equal(t, want, ids())
	assert.Equal(t, want[:3], ids("--limit", "3"))
	assert.Equal(t, want[2:4], ids("--limit", "2", "--after", want[1]))
	assert.Equal(t, want[3:], ids("--after", want[2]))
	assert.Equal(t, []string{}, ids("--after", want[4]))
	assert.Equal(t, []string{want[3], want[4]}, ids("--stable-chat", "a"))
	assert.Equal(t, []string{}, ids("--stable-chat", "nobody"))
	assert.Equal(t, "[]\n", c.ok("chats", "--stable-chat", "nobody", "--json"))

	rs := c.batch(`{"op":"chats.list","limit":2}` + "\n" + `{"op":"chats.list","limit":2,"after":"` + want[1] + `"}` + "\n")
	require.Len(t, rs, 2)
	page := func(r resp) ([]string, any) {
		require.True(t, r.OK, "%+v", r)
		out := []string{}
		for _, ch := range r.Result["chats"].([]any) {
			out = append(out, ch.(map[string]any)["id"].(string))
		}
		return out, r.Result["more"]
	}
	got, more := page(rs[0])
	assert.Equal(t, want[:2], got)
	assert.Equal(t, true, more)
	got, more = page(rs[1])
	assert.Equal(t, want[2:4], got)
	assert.Equal(t, true, more)

	assert.Contains(t, c.fails(2, "chats", "--limit", "-1"), "wsctl.invalid_argument")
	assert.Contains(t, c.fails(3, "chats", "--after", "chat_0000000000000000"), "store.not_found")
}

// TestChatsHoldsAPage: chats reads and prints the chats a page at a time,
// so the live heap grows by a few pages for 20,000 chats (pages of 10
// here), in text and in JSON: 0.5–1.4 MB, other tests loading both cores
// or not, where holding every chat grows it by their rows (15 MB in text,
// 11 MB in JSON). The bound, 5 MiB, sits between, with room for a machine loaded past that.
func TestChatsHoldsAPage(t *testing.T) {
	defer func(n int) { chatsPage = n }(chatsPage)
	chatsPage = 10
	ctx := context.Background()
	growth := func(n int, json bool) uint64 {
		c := newCLI(t)
		st := c.open()
		_, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "first"}})
		require.NoError(t, err)
		require.NoError(t, st.Close())
		// Many chats, copied from the first.
		_, err = rawDB(t, c).Exec(`WITH RECURSIVE n (i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
			INSERT INTO chats (id, kind, stable_chat_id, chat_ref, persist_root, persist_version, created_at, updated_at)
			SELECT 'chat_' || printf('%016x', n.i), c.kind, 'copy-' || n.i, c.chat_ref, c.persist_root, 0, c.created_at + n.i, c.updated_at
			FROM n, chats c WHERE c.stable_chat_id = 'first'`, n)
		require.NoError(t, err)
		least := uint64(math.MaxUint64)
		for range 3 {
			var out countingWriter
			g := storetest.HeapGrowth(func() {
				require.NoError(t, runChats(ctx, chatsOptions{globals: globals{storeDir: c.store, json: json, out: &out, errOut: io.Discard}}))
			})
			require.Greater(t, int(out), n*40, "the chats were printed")
			least = min(least, g)
		}
		return least
	}
	for _, json := range []bool{false, true} {
		small, large := growth(20, json), growth(20000, json)
		t.Logf("heap growth of chats (json %v): %d bytes for 20 chats, %d for 20,000", json, small, large)
		assert.Less(t, large, small+5<<20, "heap growth for 20,000 chats (json %v)", json)
	}
}
