package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/wsstore/wsstore"
)

type vacuumOptions struct {
	globals
	full bool
}

func newVacuumCmd(a *app) *cobra.Command {
	var o vacuumOptions
	cmd := &cobra.Command{
		Use:   "vacuum",
		Short: "Give free space in the database file back to the file system",
		Long: `vacuum gives the free pages of the database file (those gc and deleted rows
leave) back to the file system and prints its size, write-ahead log
included, before and after.

On a store made with incremental auto-vacuum (every store this build
creates) it goes in steps of 256 pages, each one short write, pausing
between steps, so writers in other processes wait for a step at a time.

--full rebuilds the file instead (SQLite VACUUM), which also packs
half-empty pages together: writers wait for the whole rebuild, and it
needs about the store's size again in free disk space while it runs. A
store made before incremental auto-vacuum is always rebuilt; the rebuild
switches it on, so its later vacuums go in steps.`,
		Args: cobra.NoArgs,
		RunE: a.runWith(&o.globals, func(ctx context.Context, args []string) error {
			return runVacuum(ctx, o, args)
		}),
	}
	cmd.Flags().BoolVar(&o.full, "full", false, "rebuild the whole file; writers wait until it is done")
	return cmd
}

func runVacuum(ctx context.Context, o vacuumOptions, _ []string) error {
	st, err := openStore(ctx, o.globals, readWrite)
	if err != nil {
		return err
	}
	defer st.Close()
	// Neither mode knows its total in advance: the bar says that it is
	// working.
	bar := newProgress(o.globals)
	bar.update("vacuum", 0, 0)
	rep, err := st.VacuumWith(ctx, wsstore.VacuumOptions{Full: o.full, Progress: func(steps int, _ int64) {
		bar.update("vacuum", steps, 0)
	}})
	bar.done()
	if err != nil {
		return err
	}
	if o.json {
		return writeJSON(o.out, rep)
	}
	if rep.LogBytes > 0 {
		// A read open elsewhere keeps the log from the file: what the
		// vacuum gave back is still on disk, in the log.
		_, err = fmt.Fprintf(o.out, "vacuum: %s before, %s after, %s of it the write-ahead log, which a read still open in another process keeps from the file: run vacuum again once it ends\n",
			humanBytes(rep.BeforeBytes), humanBytes(rep.AfterBytes), humanBytes(rep.LogBytes))
		return err
	}
	_, err = fmt.Fprintf(o.out, "vacuum: %s before, %s after (%s freed)\n",
		humanBytes(rep.BeforeBytes), humanBytes(rep.AfterBytes), humanBytes(max(rep.BeforeBytes-rep.AfterBytes, 0)))
	return err
}
