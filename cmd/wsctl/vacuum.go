package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
)

func newVacuumCmd(a *app) *cobra.Command {
	var g globals
	return &cobra.Command{
		Use:   "vacuum",
		Short: "Give free space in the database file back to the file system",
		Long: `vacuum rebuilds the database file without its free pages (those gc and
deleted rows leave) and prints its size, write-ahead log included, before
and after. Writers wait while it runs; readers go on.`,
		Args: cobra.NoArgs,
		RunE: a.runWith(&g, func(ctx context.Context, args []string) error {
			return runVacuum(ctx, g, args)
		}),
	}
}

func runVacuum(ctx context.Context, g globals, _ []string) error {
	st, err := openStore(ctx, g, readWrite)
	if err != nil {
		return err
	}
	defer st.Close()
	// Vacuum is one SQLite statement with no progress to report: the bar
	// says that it is working.
	bar := newProgress(g)
	bar.update("vacuum", 0, 0)
	rep, err := st.Vacuum(ctx)
	bar.done()
	if err != nil {
		return err
	}
	if g.json {
		return writeJSON(g.out, rep)
	}
	_, err = fmt.Fprintf(g.out, "vacuum: %s before, %s after (%s freed)\n",
		humanBytes(rep.BeforeBytes), humanBytes(rep.AfterBytes), humanBytes(rep.BeforeBytes-rep.AfterBytes))
	return err
}
