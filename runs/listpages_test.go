package runs_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/wserr"
)

// TestRunsPageDoesNotReadEveryRun counts the pages the statement of a
// page of the newest runs reads (Runs with a limit, which wsctl's latest
// and runs --limit use): about the same among 20 runs as among 400,
// whether or not a status or a chat (of four runs at either size) is
// asked for (b-trees a level deeper cost a page more a row). Sorting every
// run (or every run of the status) to return five read 422 pages among
// 400 runs, 25 among 20; a chat's runs of one status read from the status
// index, every run of that status in the store, 207 among 400.
func TestRunsPageDoesNotReadEveryRun(t *testing.T) {
	ctx := context.Background()
	pages := func(n int) map[string]int {
		var rec storetest.Statements
		st := storetest.OpenStoreWith(t, wsstore.Options{Now: storetest.NewClock().Now, Index: index.Options{Trace: rec.Trace},
			// the background re-encoder stays out of the count
			CAS: cas.Options{ReencodeIdle: time.Hour}})
		// n/4 chats of four runs each, two of them failed.
		for i := range n {
			r, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: fmt.Sprint("chat-", i%(n/4))}})
			require.NoError(t, err)
			if i/(n/4)%2 == 0 {
				require.NoError(t, st.Runs.SetStatus(ctx, r.ID, runs.Failed, "model error"))
			}
		}
		chat := runs.ChatWorkspaceID(runs.ChatKey{Kind: "character", StableChatID: "chat-1"})
		out := map[string]int{}
		for name, c := range map[string]struct {
			q    runs.ListQuery
			want int
		}{
			"newest":               {runs.ListQuery{Limit: 5}, 5},
			"newest failed":        {runs.ListQuery{Status: runs.Failed, Limit: 5}, 5},
			"chat's newest":        {runs.ListQuery{ChatID: chat, Limit: 5}, 4},
			"chat's newest failed": {runs.ListQuery{ChatID: chat, Status: runs.Failed, Limit: 5}, 2},
		} {
			var got []runs.Run
			stmts := rec.Record(func() {
				var err error
				got, err = st.Runs.Runs(ctx, c.q)
				require.NoError(t, err)
			})
			require.Len(t, got, c.want, name)
			require.Len(t, stmts, 1)
			var args []any
			if c.q.ChatID != "" {
				args = append(args, c.q.ChatID)
			}
			if c.q.Status != "" {
				args = append(args, string(c.q.Status))
			}
			out[name] = storetest.PagesRead(t, st.DB.Path(), stmts[0], append(args, c.q.Limit)...)
		}
		return out
	}
	small, large := pages(20), pages(400)
	t.Logf("pages read for five runs: %v among 20 runs, %v among 400", small, large)
	for name := range small {
		assert.LessOrEqual(t, large[name], small[name]+10, "pages of a page of %s runs among 400", name)
	}
}

// TestRunsPagesFollowOneAnother: pages of runs, each after the last run
// of the one before, give every run once, in the list's order, with each
// filter, also among runs created at one clock reading (ordered by id
// then); a page deep in the list reads what it returns, not the runs
// before it; a run to list after that is gone is run.not_found.
func TestRunsPagesFollowOneAnother(t *testing.T) {
	ctx := context.Background()
	var rec storetest.Statements
	clock := storetest.NewClockAt(storetest.Epoch, 0)
	st := storetest.OpenStoreWith(t, wsstore.Options{Now: clock.Now, Index: index.Options{Trace: rec.Trace},
		// the background re-encoder stays out of the count
		CAS: cas.Options{ReencodeIdle: time.Hour}})
	const n = 400
	for i := range n {
		if i%3 == 0 {
			clock.Advance(time.Millisecond) // else three runs a reading
		}
		r, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: fmt.Sprint("chat-", i%8)}})
		require.NoError(t, err)
		if i%5 == 0 {
			require.NoError(t, st.Runs.SetStatus(ctx, r.ID, runs.Failed, "model error"))
		}
	}
	chat := runs.ChatWorkspaceID(runs.ChatKey{Kind: "character", StableChatID: "chat-3"})
	ids := func(rs []runs.Run) []string {
		out := make([]string, len(rs))
		for i, r := range rs {
			out[i] = r.ID
		}
		return out
	}
	for name, q := range map[string]runs.ListQuery{
		"all":         {},
		"failed":      {Status: runs.Failed},
		"chat":        {ChatID: chat},
		"chat failed": {ChatID: chat, Status: runs.Failed},
	} {
		whole, err := st.Runs.Runs(ctx, q)
		require.NoError(t, err)
		require.NotEmpty(t, whole, name)
		var paged []string
		q.Limit = 7
		for {
			page, err := st.Runs.Runs(ctx, q)
			require.NoError(t, err)
			paged = append(paged, ids(page)...)
			if len(page) < q.Limit {
				break
			}
			q.After = page[len(page)-1].ID
		}
		assert.Equal(t, ids(whole), paged, name)
	}

	all, err := st.Runs.Runs(ctx, runs.ListQuery{})
	require.NoError(t, err)
	pagesAfter := func(i int) int {
		q := runs.ListQuery{Limit: 5, After: all[i].ID}
		stmts := rec.Record(func() {
			_, err := st.Runs.Runs(ctx, q)
			require.NoError(t, err)
		})
		require.Len(t, stmts, 2, "the run to list after, then the page")
		var at int64
		require.NoError(t, st.DB.View(ctx, func(tx *index.Tx) error {
			return tx.GetContext(ctx, &at, `SELECT created_at FROM runs WHERE id = ?`, all[i].ID)
		}))
		return storetest.PagesRead(t, st.DB.Path(), stmts[1], at, at, all[i].ID, q.Limit)
	}
	stmts := rec.Record(func() {
		_, err := st.Runs.Runs(ctx, runs.ListQuery{Limit: 5})
		require.NoError(t, err)
	})
	require.Len(t, stmts, 1)
	newest := storetest.PagesRead(t, st.DB.Path(), stmts[0], 5)
	early, deep := pagesAfter(10), pagesAfter(n-20)
	t.Logf("pages read for the five newest runs: %d, five after the 10th: %d, after the %dth: %d", newest, early, n-20, deep)
	assert.LessOrEqual(t, early, newest+5, "a page reads from where it starts")
	assert.LessOrEqual(t, deep, newest+5, "a page deep in the list reads from where it starts")

	_, err = st.Runs.CancelAndDeleteRun(ctx, all[3].ID)
	require.NoError(t, err)
	_, err = st.Runs.Runs(ctx, runs.ListQuery{Limit: 5, After: all[3].ID})
	assert.True(t, wserr.Is(err, wserr.RunNotFound), "%v", err)
}
