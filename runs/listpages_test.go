package runs_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/runs"
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
		st := storetest.OpenStoreWith(t, wsstore.Options{Now: storetest.NewClock().Now, Index: index.Options{Trace: rec.Trace}})
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
