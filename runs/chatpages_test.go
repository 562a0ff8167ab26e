package runs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/wserr"
)

// addChats adds n chats to the store beside its first (made by a run), as
// rows copied from it: kinds character and group in turn, stableChatIds
// "copy-<i>", created at the first's time plus step*i/3 (three chats a
// reading, ordered by id then).
func addChats(t *testing.T, st *wsstore.Store, n int, step time.Duration) {
	t.Helper()
	ctx := context.Background()
	_, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "first"}})
	require.NoError(t, err)
	require.NoError(t, st.DB.Update(ctx, func(tx *index.Tx) error {
		_, err := tx.ExecContext(ctx, `WITH RECURSIVE n (i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
			INSERT INTO chats (id, kind, stable_chat_id, chat_ref, persist_root, persist_version, created_at, updated_at)
			SELECT 'chat_' || printf('%016x', n.i * 7919 % 1000003), CASE n.i % 2 WHEN 0 THEN 'character' ELSE 'group' END,
				'copy-' || n.i, c.chat_ref, c.persist_root, 0, c.created_at + n.i / 3 * ?, c.updated_at
			FROM n, chats c WHERE c.stable_chat_id = 'first'`, n, int64(step))
		return err
	}))
}

func chatIDs(cs []runs.Chat) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.ID
	}
	return out
}

// TestChatsPageDoesNotReadEveryChat counts the pages of the database the
// statement of a page of five chats reads: the newest, five after a chat
// deep in the list, and a stableChatId's chats, about the same among 40
// chats as among 2,000 (3 and at most 7 here: b-trees a level deeper cost
// a page more a row). Without the chats' indexes each read and sorted
// every chat: 52 pages among 2,000.
func TestChatsPageDoesNotReadEveryChat(t *testing.T) {
	ctx := context.Background()
	pages := func(n int) map[string]int {
		var rec storetest.Statements
		st := storetest.OpenStoreWith(t, wsstore.Options{Now: storetest.NewClock().Now, Index: index.Options{Trace: rec.Trace}})
		addChats(t, st, n, time.Millisecond)
		whole := pageAll(t, st, runs.ChatQuery{Limit: runs.MaxChatPage})
		require.Len(t, whole, n+1)
		deep := whole[n-20]
		out := map[string]int{}
		for name, c := range map[string]struct {
			q    runs.ChatQuery
			want int
			args []any
		}{
			"newest":     {runs.ChatQuery{Limit: 5}, 5, []any{6}},
			"after deep": {runs.ChatQuery{Limit: 5, After: deep.ID}, 5, []any{deep.CreatedAt.UnixNano(), deep.CreatedAt.UnixNano(), deep.ID, 6}},
			"stable":     {runs.ChatQuery{Limit: 5, StableChatID: "copy-7"}, 1, []any{"copy-7", 6}},
		} {
			var got []runs.Chat
			stmts := rec.Record(func() {
				var more bool
				var err error
				got, more, err = st.Runs.ChatsPage(ctx, c.q)
				require.NoError(t, err)
				assert.Equal(t, c.want == 5, more, name)
			})
			require.Len(t, got, c.want, name)
			out[name] = storetest.PagesRead(t, st.DB.Path(), stmts[len(stmts)-1], c.args...)
		}
		return out
	}
	small, large := pages(40), pages(2000)
	t.Logf("pages read for a page of chats: %v among 40 chats, %v among 2,000", small, large)
	for name := range small {
		assert.LessOrEqual(t, large[name], small[name]+10, "pages of a page of %s chats among 2,000", name)
	}
}

// pageAll reads every chat q asks for, page after page.
func pageAll(t *testing.T, st *wsstore.Store, q runs.ChatQuery) []runs.Chat {
	t.Helper()
	var out []runs.Chat
	for {
		page, more, err := st.Runs.ChatsPage(context.Background(), q)
		require.NoError(t, err)
		out = append(out, page...)
		if !more {
			return out
		}
		require.NotEmpty(t, page)
		q.After = page[len(page)-1].ID
	}
}

// TestChatsPagesFollowOneAnother: pages of chats, each after the last chat
// of the one before, give every chat once, newest first (by id among
// chats created at one clock reading), whatever the page size; chats
// created while a host pages (newer, or, as an import brings them, older)
// leave every chat that was there listed exactly once and none twice.
func TestChatsPagesFollowOneAnother(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClockAt(storetest.Epoch, 0)
	st := storetest.OpenStoreWith(t, wsstore.Options{Now: clock.Now})
	addChats(t, st, 300, time.Millisecond)
	clock.Advance(time.Hour) // the runs made below, after every chat

	first, more, err := st.Runs.ChatsPage(ctx, runs.ChatQuery{})
	require.NoError(t, err)
	require.False(t, more)
	require.Len(t, first, 301)
	for i := 1; i < len(first); i++ {
		a, b := first[i-1], first[i]
		require.True(t, a.CreatedAt.After(b.CreatedAt) || a.CreatedAt.Equal(b.CreatedAt) && a.ID < b.ID, "newest first, then by id: %s, %s", a.ID, b.ID)
	}
	for _, limit := range []int{1, 7, 100, 301, runs.MaxChatPage} {
		assert.Equal(t, chatIDs(first), chatIDs(pageAll(t, st, runs.ChatQuery{Limit: limit})), "limit %d", limit)
	}

	seen := map[string]int{}
	q := runs.ChatQuery{Limit: 7}
	for i := 0; ; i++ {
		page, more, err := st.Runs.ChatsPage(ctx, q)
		require.NoError(t, err)
		for _, c := range page {
			seen[c.ID]++
		}
		if !more {
			break
		}
		q.After = page[len(page)-1].ID
		// A new chat, and a chat with an old creation time, as an import
		// or a sync brings one.
		_, err = st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: fmt.Sprint("new-", i)}})
		require.NoError(t, err)
		require.NoError(t, st.DB.Update(ctx, func(tx *index.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO chats (id, kind, stable_chat_id, chat_ref, persist_root, persist_version, created_at, updated_at)
				SELECT ?, kind, ?, chat_ref, persist_root, 0, created_at - ?, updated_at FROM chats WHERE stable_chat_id = 'first'`,
				fmt.Sprintf("chat_old%011d", i), fmt.Sprint("old-", i), int64(i)*int64(time.Millisecond))
			return err
		}))
	}
	for _, c := range first {
		assert.Equal(t, 1, seen[c.ID], "chat %s", c.ID)
	}
	for id, n := range seen {
		assert.Equal(t, 1, n, "chat %s", id)
	}
}

// TestChatsPageRefusals: a limit out of range is
// workspace.invalid_argument, an after that names no chat (deleted since)
// store.not_found; a page ends before the chat that would take its
// chatRefs past 4 MiB, holding one chat at least.
func TestChatsPageRefusals(t *testing.T) {
	ctx := context.Background()
	st := storetest.OpenStoreWith(t, wsstore.Options{Now: storetest.NewClock().Now})
	for _, limit := range []int{-1, runs.MaxChatPage + 1} {
		_, _, err := st.Runs.ChatsPage(ctx, runs.ChatQuery{Limit: limit})
		assert.True(t, wserr.Is(err, wserr.InvalidArgument), "limit %d: %v", limit, err)
	}
	_, _, err := st.Runs.ChatsPage(ctx, runs.ChatQuery{After: "chat_0000000000000000"})
	assert.True(t, wserr.Is(err, wserr.NotFound), "%v", err)

	big := json.RawMessage(`"` + strings.Repeat("x", runs.MaxChatRefBytes-2) + `"`)
	for i := range 6 {
		_, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: fmt.Sprint("big-", i)}, ChatRef: big})
		require.NoError(t, err)
	}
	var sizes []int
	q := runs.ChatQuery{Limit: 10}
	for {
		page, more, err := st.Runs.ChatsPage(ctx, q)
		require.NoError(t, err)
		sizes = append(sizes, len(page))
		if !more {
			break
		}
		q.After = page[len(page)-1].ID
	}
	assert.Equal(t, []int{4, 2}, sizes, "4 MiB of chatRefs a page")
}

// TestDeletionsComeInPages: the deletion log is read a page at a time:
// without a limit a page holds DefaultDeletionPage entries and says more
// follow; pages after the last id of the one before give every entry
// once; a limit past MaxDeletionPage is workspace.invalid_argument.
func TestDeletionsComeInPages(t *testing.T) {
	ctx := context.Background()
	st := storetest.OpenStoreWith(t, wsstore.Options{Now: storetest.NewClock().Now})
	const n = runs.DefaultDeletionPage + 500
	require.NoError(t, st.DB.Update(ctx, func(tx *index.Tx) error {
		_, err := tx.ExecContext(ctx, `WITH RECURSIVE n (i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
			INSERT INTO deletions (at, kind, run_id, reason) SELECT n.i, 'run', 'run_' || n.i, 'requested' FROM n`, n)
		return err
	}))
	first, more, err := st.Runs.Deletions(ctx, 0, 0)
	require.NoError(t, err)
	assert.Len(t, first, runs.DefaultDeletionPage)
	assert.True(t, more)
	var ids []int64
	for after, more := int64(0), true; more; {
		var page []runs.Deletion
		page, more, err = st.Runs.Deletions(ctx, after, 300)
		require.NoError(t, err)
		for _, d := range page {
			ids = append(ids, d.ID)
			after = d.ID
		}
	}
	require.Len(t, ids, n)
	for i, id := range ids {
		require.Equal(t, int64(i+1), id)
	}
	_, _, err = st.Runs.Deletions(ctx, 0, runs.MaxDeletionPage+1)
	assert.True(t, wserr.Is(err, wserr.InvalidArgument), "%v", err)
}

// TestStoreWidePassesReadChatIDsInPages: a prune of the whole store and
// an export's walk of every chat read the chats' ids a page at a time
// (three here), each page after the last id of the one before, and still
// reach every chat once.
func TestStoreWidePassesReadChatIDsInPages(t *testing.T) {
	defer runs.SetChatIDPage(3)()
	ctx := context.Background()
	var rec storetest.Statements
	st := storetest.OpenStoreWith(t, wsstore.Options{Now: storetest.NewClock().Now, Index: index.Options{Trace: rec.Trace}})
	const n = 7
	var chats []string
	for i := range n {
		k := runs.ChatKey{Kind: "character", StableChatID: fmt.Sprint("c", i)}
		chats = append(chats, runs.ChatWorkspaceID(k))
		for range 2 {
			r, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: k})
			require.NoError(t, err)
			require.NoError(t, st.Runs.SetStatus(ctx, r.ID, runs.Failed, "model error"))
		}
	}
	slices.Sort(chats)
	one := 1
	require.NoError(t, st.Runs.SetPolicy(ctx, runs.StoreScope, runs.Policy{KeepFailedRuns: &one}))

	idPages := func(stmts []string) (n int) {
		for _, q := range stmts {
			if strings.HasPrefix(q, "SELECT id FROM chats") {
				assert.Contains(t, q, "LIMIT", "a page of ids, not all of them")
				n++
			}
		}
		return n
	}
	var rep runs.PruneReport
	stmts := rec.Record(func() {
		var err error
		rep, err = st.Runs.Prune(ctx, runs.PruneOptions{})
		require.NoError(t, err)
	})
	var pruned []string
	for _, r := range rep.Runs {
		pruned = append(pruned, r.ChatID)
	}
	slices.Sort(pruned)
	assert.Equal(t, chats, pruned, "one run of each chat")
	assert.Equal(t, 3, idPages(stmts), "ids 3, 3 and 1 at a time")

	var exported []string
	stmts = rec.Record(func() {
		require.NoError(t, st.DB.View(ctx, func(tx *index.Tx) error {
			return st.Runs.EachChatRecord(ctx, tx, func(c runs.ChatRecord) error {
				exported = append(exported, c.ID)
				return nil
			})
		}))
	})
	assert.Equal(t, chats, exported)
	assert.Equal(t, 3, idPages(stmts))
}

// TestRunsPages: runs come in pages as chats do: without a limit a page
// holds DefaultRunPage runs and says more follow; a page ends before the
// run whose chatRef and profile would take the page's past
// MaxRunPageRefBytes; a
// limit past MaxRunPage is workspace.invalid_argument, an after that
// names no run run.not_found. The pages together are Runs' list.
func TestRunsPages(t *testing.T) {
	ctx := context.Background()
	st := storetest.OpenStoreWith(t, wsstore.Options{Now: storetest.NewClock().Now})
	for _, limit := range []int{-1, runs.MaxRunPage + 1} {
		_, _, err := st.Runs.RunsPage(ctx, runs.ListQuery{Limit: limit})
		assert.True(t, wserr.Is(err, wserr.InvalidArgument), "limit %d: %v", limit, err)
	}
	_, _, err := st.Runs.RunsPage(ctx, runs.ListQuery{After: "run_gone"})
	assert.True(t, wserr.Is(err, wserr.RunNotFound), "%v", err)

	for i := range runs.DefaultRunPage + 1 {
		_, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: fmt.Sprint("small-", i)}})
		require.NoError(t, err)
	}
	// The newest six runs, cancelled, each with a chatRef of almost
	// 1 MiB: four of them and their profiles fit in a page.
	big := json.RawMessage(`"` + strings.Repeat("x", runs.MaxChatRefBytes-4096) + `"`)
	for i := range 6 {
		id := fmt.Sprint("run_big_", i)
		_, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "big"}, ChatRef: big, RunID: id})
		require.NoError(t, err)
		require.NoError(t, st.Runs.SetStatus(ctx, id, runs.Cancelled, "done"))
	}

	var sizes []int
	var seen []string
	q := runs.ListQuery{Limit: 10}
	for {
		page, more, err := st.Runs.RunsPage(ctx, q)
		require.NoError(t, err)
		sizes = append(sizes, len(page))
		for _, r := range page {
			seen = append(seen, r.ID)
		}
		if !more {
			break
		}
		q.After = page[len(page)-1].ID
	}
	assert.Equal(t, []int{4, 10}, sizes[:2], "4 MiB of chatRefs and profiles a page")
	all, err := st.Runs.Runs(ctx, runs.ListQuery{})
	require.NoError(t, err)
	require.Len(t, all, runs.DefaultRunPage+7)
	want := make([]string, len(all))
	for i, r := range all {
		want[i] = r.ID
	}
	assert.True(t, slices.Equal(want, seen), "the pages together are the list, each run once")

	page, more, err := st.Runs.RunsPage(ctx, runs.ListQuery{Status: runs.Running})
	require.NoError(t, err)
	assert.Equal(t, runs.DefaultRunPage, len(page), "a page without a limit")
	assert.True(t, more)
	page, more, err = st.Runs.RunsPage(ctx, runs.ListQuery{Status: runs.Running, After: page[len(page)-1].ID})
	require.NoError(t, err)
	assert.Equal(t, 1, len(page))
	assert.False(t, more)
}

// TestEachRunRecordReadsRunIDsInPages: a walk of every run (export, sync)
// and of one chat's runs reads the runs' ids a page at a time (three
// here), each page after the last id of the one before, so it holds one
// page of ids however many runs there are, and still reaches every run
// once, in id order. A chat's page reads a page of that chat's entries of
// runs_chat_id, never the store's runs nor every run of the chat.
func TestEachRunRecordReadsRunIDsInPages(t *testing.T) {
	defer runs.SetRunIDPage(3)()
	ctx := context.Background()
	var rec storetest.Statements
	st := storetest.OpenStoreWith(t, wsstore.Options{Now: storetest.NewClock().Now, Index: index.Options{Trace: rec.Trace}})
	key := func(i int) runs.ChatKey { return runs.ChatKey{Kind: "character", StableChatID: fmt.Sprint("c", i)} }
	var all, first []string
	for i := range 11 {
		c := 0 // seven runs of c0, then of c2, c1, c2, c1
		if i >= 7 {
			c = 1 + i%2
		}
		r, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: key(c)})
		require.NoError(t, err)
		all = append(all, r.ID)
		if c == 0 {
			first = append(first, r.ID)
		}
	}
	slices.Sort(all)
	slices.Sort(first)

	walk := func(chatID string) (ids []string, pages int) {
		stmts := rec.Record(func() {
			require.NoError(t, st.DB.View(ctx, func(tx *index.Tx) error {
				return st.Runs.EachRunRecord(ctx, tx, chatID, func(r runs.RunRecord) error {
					ids = append(ids, r.ID)
					return nil
				})
			}))
		})
		for _, q := range stmts {
			if strings.HasPrefix(q, "SELECT id FROM runs") {
				assert.Contains(t, q, "LIMIT", "a page of ids, not all of them")
				pages++
			}
		}
		return ids, pages
	}
	ids, pages := walk("")
	assert.Equal(t, all, ids)
	assert.Equal(t, 4, pages, "ids 3, 3, 3 and 2 at a time")
	ids, pages = walk(runs.ChatWorkspaceID(key(0)))
	assert.Equal(t, first, ids)
	assert.Equal(t, 3, pages, "ids 3, 3 and 1 at a time")

	plan := strings.Join(storetest.QueryPlan(t, st.DB, `SELECT id FROM runs WHERE chat_id = ? AND id > ? ORDER BY id LIMIT ?`,
		runs.ChatWorkspaceID(key(0)), "", 3), "; ")
	t.Logf("plan of a chat's page: %s", plan)
	assert.Contains(t, plan, "USING COVERING INDEX runs_chat_id (chat_id=? AND id>?)", "a page of the chat's runs, not the store's")
	assert.NotContains(t, plan, "TEMP B-TREE", "no sort of every run of the chat")
}

// TestEachCommitRowReadsSeqsInPages: a walk of a run's commits (an
// export, a sync) reads their seqs a page at a time (two here), each page
// after the last seq of the one before, so it holds one page of seqs
// however many commits the run has, and still reaches every commit once,
// in seq order.
func TestEachCommitRowReadsSeqsInPages(t *testing.T) {
	defer runs.SetCommitSeqPage(2)()
	ctx := context.Background()
	var rec storetest.Statements
	st := storetest.OpenStoreWith(t, wsstore.Options{Now: storetest.NewClock().Now, Index: index.Options{Trace: rec.Trace}})
	r, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "c"}})
	require.NoError(t, err)
	require.NoError(t, st.DB.Update(ctx, func(tx *index.Tx) error {
		for _, seq := range []int64{3, 1, 5, 2, 4} {
			if err := st.Runs.ImportCommit(ctx, tx, runs.CommitRow{ID: fmt.Sprintf("commit_%d", seq), RunID: r.ID, Seq: seq,
				Mode: "new", Kind: "commit", Status: runs.CommitCompleted, Message: "{}", Receipt: "{}"}); err != nil {
				return err
			}
		}
		return nil
	}))

	var got []int64
	pages := 0
	for _, q := range rec.Record(func() {
		require.NoError(t, st.DB.View(ctx, func(tx *index.Tx) error {
			return st.Runs.EachCommitRow(ctx, tx, r.ID, func(c runs.CommitRow) error {
				assert.Equal(t, fmt.Sprintf("commit_%d", c.Seq), c.ID)
				got = append(got, c.Seq)
				return nil
			})
		}))
	}) {
		if strings.HasPrefix(q, "SELECT seq FROM commits") {
			assert.Contains(t, q, "LIMIT", "a page of seqs, not all of them")
			pages++
		}
	}
	assert.Equal(t, []int64{1, 2, 3, 4, 5}, got)
	assert.Equal(t, 3, pages, "seqs 2, 2 and 1 at a time")
}
