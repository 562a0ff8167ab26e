package main

import (
	"cmp"
	"context"
	"slices"
	"strings"

	"github.com/spf13/cobra"

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
	q := runs.ListQuery{Status: runs.Status(o.status), Limit: o.limit, After: o.after}
	var list []runs.Run
	switch {
	case o.chat == "" || strings.HasPrefix(o.chat, "chat_"):
		q.ChatID = o.chat
		if list, err = st.Runs.Runs(ctx, q); err != nil {
			return err
		}
	default:
		// A stableChatId: the chats of every kind that share it, read
		// from their index, not from every chat.
		list = []runs.Run{}
		cq := runs.ChatQuery{StableChatID: o.chat}
		for {
			chats, more, err := st.Runs.ChatsPage(ctx, cq)
			if err != nil {
				return err
			}
			for _, c := range chats {
				q.ChatID = c.ID
				rs, err := st.Runs.Runs(ctx, q)
				if err != nil {
					return err
				}
				list = append(list, rs...)
			}
			if !more {
				break
			}
			cq.After = chats[len(chats)-1].ID
		}
		// Each chat's page is its newest; together they are newest
		// first, as the store orders runs, and cut to the limit.
		slices.SortStableFunc(list, func(a, b runs.Run) int {
			return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), strings.Compare(a.ID, b.ID))
		})
		if o.limit > 0 && len(list) > o.limit {
			list = list[:o.limit]
		}
	}
	if list == nil {
		list = []runs.Run{}
	}
	if o.json {
		return writeJSON(o.out, list)
	}
	t := newTable(o.out, "RUN", "STATUS", "CHAT", "STABLE CHAT", "PROFILE", "HEAD", "CREATED", "UPDATED")
	for _, r := range list {
		head := "-"
		if r.HeadCheckpoint > 0 {
			head = checkpoint.ID(r.HeadCheckpoint)
		}
		t.row(r.ID, string(r.Status), r.ChatID, r.Kind+"/"+r.StableChatID, r.Profile.ID, head, stamp(r.CreatedAt), stamp(r.UpdatedAt))
	}
	return t.flush()
}
