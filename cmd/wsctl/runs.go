package main

import (
	"cmp"
	"context"
	"slices"
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

--chat takes a chat workspace id (chat_…) or a stableChatId (matching the
chats of every kind with that id). --status takes one of created, running,
awaiting_approval, paused, completed, failed, cancelled.`,
		Args: cobra.NoArgs,
		RunE: a.runWith(&o.globals, func(ctx context.Context, args []string) error {
			return runRuns(ctx, o, args)
		}),
	}
	cmd.Flags().StringVar(&o.chat, "chat", "", "only runs of this chat (workspace id or stableChatId)")
	cmd.Flags().StringVar(&o.status, "status", "", "only runs in this status")
	_ = cmd.RegisterFlagCompletionFunc("status", func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		out := make([]cobra.Completion, len(runStatuses))
		for i, s := range runStatuses {
			out[i] = string(s)
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	})
	cmd.Flags().IntVar(&o.limit, "limit", 0, "at most this many runs (0: all)")
	cmd.Flags().StringVar(&o.after, "after", "", "start after this run id (the last of the page before)")
	refuseEmpty(cmd, "chat", "status", "after")
	return cmd
}

func runRuns(ctx context.Context, o runsOptions, _ []string) error {
	if o.limit < 0 {
		return argError("runs", "--limit must not be negative")
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
	q := runs.ListQuery{Status: runs.Status(o.status), After: o.after}
	if o.chat != "" && !strings.HasPrefix(o.chat, "chat_") {
		list, err := stableChatRuns(ctx, st, o.chat, q, o.limit)
		if err != nil {
			return err
		}
		if err := out.add(list); err != nil {
			return err
		}
		return out.close()
	}
	q.ChatID = o.chat
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

// stableChatRuns lists the runs of the chats of every kind that share
// stableChatID, newest first, at most limit (0: all): the chats are read
// from their index, not from every chat, and each chat's runs at most
// limit.
func stableChatRuns(ctx context.Context, st *wsstore.Store, stableChatID string, q runs.ListQuery, limit int) ([]runs.Run, error) {
	q.Limit = limit
	list := []runs.Run{}
	cq := runs.ChatQuery{StableChatID: stableChatID}
	for {
		chats, more, err := st.Runs.ChatsPage(ctx, cq)
		if err != nil {
			return nil, err
		}
		for _, c := range chats {
			q.ChatID = c.ID
			rs, err := st.Runs.Runs(ctx, q)
			if err != nil {
				return nil, err
			}
			list = append(list, rs...)
		}
		if !more {
			break
		}
		cq.After = chats[len(chats)-1].ID
	}
	// Each chat's list is its newest; together they are newest first,
	// as the store orders runs, and cut to the limit.
	slices.SortStableFunc(list, func(a, b runs.Run) int {
		return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), strings.Compare(a.ID, b.ID))
	})
	if limit > 0 && len(list) > limit {
		list = list[:limit]
	}
	return list, nil
}
