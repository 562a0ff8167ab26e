package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/wsstore/wsstore/runs"
)

type chatsOptions struct {
	globals
	stable string
	limit  int
	after  string
}

func newChatsCmd(a *app) *cobra.Command {
	var o chatsOptions
	cmd := &cobra.Command{
		Use:   "chats",
		Short: "List chat workspaces, newest first",
		Long: `chats lists the store's chat workspaces, newest first (then by id), read
and printed a page at a time. --after takes the id of the last chat of the
page before (its workspace id, chat_…, or its KIND:ID or KIND/ID),
--stable-chat a stableChatId (the chats of every kind with that id).`,
		Args: cobra.NoArgs,
		RunE: a.runWith(&o.globals, func(ctx context.Context, args []string) error {
			return runChats(ctx, o)
		}),
	}
	cmd.Flags().StringVar(&o.stable, "stable-chat", "", "only the chats of this `STABLE_CHAT_ID`")
	intVar(cmd.Flags(), &o.limit, "limit", 0, "at most `N` chats (0: all)")
	cmd.Flags().StringVar(&o.after, "after", "", "start after this `CHAT` (the last of the page before)")
	refuseEmpty(cmd, "stable-chat", "after")
	return cmd
}

func runChats(ctx context.Context, o chatsOptions) error {
	if o.limit < 0 {
		return argError("chats", "--limit must not be negative")
	}
	after, err := chatIDArg("chats", o.after)
	if err != nil {
		return err
	}
	st, err := openStore(ctx, o.globals, readOnly)
	if err != nil {
		return err
	}
	defer st.Close()
	out := &pages[runs.Chat]{w: o.out, json: o.json, header: []string{"WORKSPACE", "KIND", "STABLE CHAT", "PERSIST VERSION", "CREATED", "UPDATED"},
		row: func(c runs.Chat) []string {
			return []string{c.ID, c.Kind, c.StableChatID, fmt.Sprint(c.PersistVersion), stamp(c.CreatedAt), stamp(c.UpdatedAt)}
		}}
	defer out.abort()
	q, left := runs.ChatQuery{StableChatID: o.stable, After: after}, o.limit
	for {
		q.Limit = chatsPage
		if o.limit > 0 {
			q.Limit = min(q.Limit, left)
		}
		cs, more, err := st.Runs.ChatsPage(ctx, q)
		if err != nil {
			return err
		}
		if err := out.add(cs); err != nil {
			return err
		}
		left -= len(cs)
		if !more || (o.limit > 0 && left == 0) {
			return out.close()
		}
		q.After = cs[len(cs)-1].ID
	}
}

// chatsPage is how many chats chats reads at a time.
var chatsPage = runs.DefaultChatPage
