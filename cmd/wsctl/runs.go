package main

import (
	"cmp"
	"context"
	"encoding/json"
	"strings"

	"github.com/spf13/cobra"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/checkpoint"
	"github.com/wsstore/wsstore/runs"
)

type runsOptions struct {
	globals
	chat   string
	status string
	limit  int
	after  string
}

func newRunsCmd(a *app) *cobra.Command {
	var o runsOptions
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "List runs, newest first",
		Long: `runs lists the store's runs, newest first.

--chat takes a chat as every command names one: its workspace id
(chat_ and 16 hex digits, as chats prints it), KIND:STABLE_CHAT_ID (as
rm-chat prints it) or KIND/STABLE_CHAT_ID (as runs and show print it);
or a bare stableChatId, matching the chats of every kind with that id.
They are tried in that order: a workspace id, then KIND:ID (split at the
first ':'), then KIND/ID (at the first '/'), then a stableChatId.
--status takes one of created, running, awaiting_approval, paused,
completed, failed, cancelled.`,
		Args: cobra.NoArgs,
		RunE: a.runWith(&o.globals, func(ctx context.Context, args []string) error {
			return runRuns(ctx, o, args)
		}),
	}
	cmd.Flags().StringVar(&o.chat, "chat", "", "only runs of this `CHAT` (chat_…, KIND:ID, KIND/ID or a stableChatId)")
	cmd.Flags().StringVar(&o.status, "status", "", "only runs in this status")
	_ = cmd.RegisterFlagCompletionFunc("status", func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		out := make([]cobra.Completion, len(runStatuses))
		for i, s := range runStatuses {
			out[i] = string(s)
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	})
	intVar(cmd.Flags(), &o.limit, "limit", 0, "at most this many runs (0: all)")
	cmd.Flags().StringVar(&o.after, "after", "", "start after this run id (the last of the page before)")
	refuseEmpty(cmd, "chat", "status", "after")
	return cmd
}

func runRuns(ctx context.Context, o runsOptions, _ []string) error {
	if o.limit < 0 {
		return argError("runs", "--limit must not be negative")
	}
	var chat chatRef
	if o.chat != "" {
		var err error
		if chat, err = parseChatRef("runs", o.chat, true); err != nil {
			return err
		}
	}
	if o.status != "" && !runs.Status(o.status).Valid() {
		return argError("runs", "--status %q is not a status: use one of %s", o.status, statusList())
	}
	st, err := openStore(ctx, o.globals, readOnly)
	if err != nil {
		return err
	}
	defer st.Close()
	// A page at a time: the columns are aligned within a page, and what is
	// held does not grow with the store's runs.
	out := &pages[runs.Run]{w: o.out, json: o.json, header: []string{"RUN", "STATUS", "CHAT", "STABLE CHAT", "PROFILE", "HEAD", "CREATED", "UPDATED"},
		row: func(r runs.Run) []string {
			head := "-"
			if r.HeadCheckpoint > 0 {
				head = checkpoint.ID(r.HeadCheckpoint)
			}
			return []string{r.ID, string(r.Status), r.ChatID, r.Kind + "/" + r.StableChatID, r.Profile.ID, head, stamp(r.CreatedAt), stamp(r.UpdatedAt)}
		}}
	defer out.abort()
	q := runs.ListQuery{Status: runs.Status(o.status), After: o.after}
	if chat.stable != "" {
		if err := stableChatRuns(ctx, st, chat.stable, q, o.limit, out); err != nil {
			return err
		}
		return out.close()
	}
	q.ChatID = chat.id
	for left := o.limit; ; {
		q.Limit = runsPage
		if o.limit > 0 {
			q.Limit = min(q.Limit, left)
		}
		rs, more, err := st.Runs.RunsPage(ctx, q)
		if err != nil {
			return err
		}
		if err := out.add(rs); err != nil {
			return err
		}
		left -= len(rs)
		if !more || (o.limit > 0 && left == 0) {
			return out.close()
		}
		q.After = rs[len(rs)-1].ID
	}
}

// runsPage is how many runs runs reads at a time.
var runsPage = runs.DefaultRunPage

// stableChatRuns prints into out the runs of the chats of every kind that
// share stableChatID, newest first (the store's order: created_at
// descending, then id), at most limit (0: all), those after q.After and in
// q.Status only: it reads each chat's runs a page at a time and merges
// them, holding a page of each chat's runs and a page to print, which
// ends as a page read from the store does (runs.MaxRunPageRefBytes). The
// chats are read from their index, not from every chat.
func stableChatRuns(ctx context.Context, st *wsstore.Store, stableChatID string, q runs.ListQuery, limit int, out *pages[runs.Run]) error {
	type cursor struct {
		q    runs.ListQuery
		next []runs.Run // read, not yet printed
		more bool       // runs follow next in the store
	}
	var cs []*cursor
	cq := runs.ChatQuery{StableChatID: stableChatID}
	for {
		chats, more, err := st.Runs.ChatsPage(ctx, cq)
		if err != nil {
			return err
		}
		for _, c := range chats {
			cq := q
			cq.ChatID, cq.Limit = c.ID, runsPage
			cs = append(cs, &cursor{q: cq, more: true})
		}
		if !more {
			break
		}
		cq.After = chats[len(chats)-1].ID
	}
	newer := func(a, b runs.Run) bool {
		return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), strings.Compare(a.ID, b.ID)) < 0
	}
	// The page printed ends, as one the store reads does, at runsPage
	// runs or before the run whose chatRef and profile would take it past
	// runs.MaxRunPageRefBytes.
	page := make([]runs.Run, 0, runsPage)
	pageBytes := 0
	for n := 0; limit == 0 || n < limit; n++ {
		var best *cursor
		for _, c := range cs {
			if len(c.next) == 0 && c.more {
				rs, more, err := st.Runs.RunsPage(ctx, c.q)
				if err != nil {
					return err
				}
				c.next, c.more = rs, more && len(rs) > 0
				if len(rs) > 0 {
					c.q.After = rs[len(rs)-1].ID
				}
			}
			if len(c.next) > 0 && (best == nil || newer(c.next[0], best.next[0])) {
				best = c
			}
		}
		if best == nil {
			break
		}
		r := best.next[0]
		best.next = best.next[1:]
		size, err := runBytes(r)
		if err != nil {
			return err
		}
		if len(page) > 0 && pageBytes+size > runs.MaxRunPageRefBytes {
			if err := out.add(page); err != nil {
				return err
			}
			page, pageBytes = page[:0], 0
		}
		page, pageBytes = append(page, r), pageBytes+size
		if len(page) == cap(page) {
			if err := out.add(page); err != nil {
				return err
			}
			page, pageBytes = page[:0], 0
		}
	}
	return out.add(page)
}

// runBytes is what a run's chatRef and profile take, as a page of runs
// counts them (runs.MaxRunPageRefBytes).
func runBytes(r runs.Run) (int, error) {
	prof, err := json.Marshal(r.Profile)
	if err != nil {
		return 0, err
	}
	return len(r.ChatRef) + len(prof), nil
}
