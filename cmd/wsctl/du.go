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
	// A store may hold any number of runs: their rows are printed a page
	// at a time as DU counts them, as runs prints a listing.
	out := &pages[wsstore.Usage]{w: g.out, json: g.json, header: []string{"CHAT", "RUN", "FILES", "SIZE", "CHECKPOINTS", "UNIQUE"},
		row: func(u wsstore.Usage) []string {
			run := u.RunID
			if run == "" {
				run = "(persist)"
			}
			return []string{u.ChatID, run, fmt.Sprint(u.Files), humanBytes(u.LogicalBytes), fmt.Sprint(u.Checkpoints), humanBytes(u.UniqueStoredBytes)}
		}}
	defer out.abort()
	page := make([]wsstore.Usage, 0, duPage)
	err = st.DU(ctx, func(u wsstore.Usage) error {
		if page = append(page, u); len(page) < duPage {
			return nil
		}
		err := out.add(page)
		page = page[:0]
		return err
	})
	if err != nil {
		return err
	}
	if err := out.add(page); err != nil {
		return err
	}
	return out.close()
}

// duPage is how many rows du prints at a time.
var duPage = 1000
