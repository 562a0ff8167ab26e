package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/wsstore/wsstore"
)

func newDUCmd(a *app) *cobra.Command {
	var g globals
	return &cobra.Command{
		Use:   "du",
		Short: "Show space by chat workspace and run",
		Long: `du lists, for each chat workspace, its persist layer and then each of its
runs, with the live workspace's files and size, the checkpoint count, and
UNIQUE: the stored bytes only that run reaches, which "wsctl rm" followed
by "wsctl gc" would free.`,
		Args: cobra.NoArgs,
		RunE: a.runWith(&g, func(ctx context.Context, args []string) error {
			return runDU(ctx, g, args)
		}),
	}
}

func runDU(ctx context.Context, g globals, _ []string) error {
	st, err := openStore(ctx, g, readOnly)
	if err != nil {
		return err
	}
	defer st.Close()
	us, err := st.DU(ctx)
	if err != nil {
		return err
	}
	if us == nil {
		us = []wsstore.Usage{}
	}
	if g.json {
		return writeJSON(g.out, us)
	}
	t := newTable(g.out, "CHAT", "RUN", "FILES", "SIZE", "CHECKPOINTS", "UNIQUE")
	for _, u := range us {
		run := u.RunID
		if run == "" {
			run = "(persist)"
		}
		t.row(u.ChatID, run, fmt.Sprint(u.Files), humanBytes(u.LogicalBytes), fmt.Sprint(u.Checkpoints), humanBytes(u.UniqueStoredBytes))
	}
	return t.flush()
}
