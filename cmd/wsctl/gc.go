package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/wsstore/wsstore"
)

type gcOptions struct {
	globals
	dryRun   bool
	grace    string
	graceSet bool // --grace was given: an empty one is refused, not the default
}

func newGCCmd(a *app) *cobra.Command {
	var o gcOptions
	var cmd *cobra.Command
	cmd = &cobra.Command{
		Use:   "gc",
		Short: "Delete the stored files and trees no run, checkpoint or chat reaches",
		Long: `gc deletes the blobs, chunks and trees that no root reaches (run roots,
checkpoints, chat persist layers): what deleted runs ("wsctl rm") leave
behind. It prints what it frees; --dry-run prints what it would free and
deletes nothing.

Unreachable rows younger than --grace (default 15m) are kept, so a writer
that has stored a file but not yet committed the change that uses it never
loses it. --grace 0 collects everything unreachable now: only safe when
nothing else writes to the store.

It sweeps in steps of at most 256 rows, each one short write, so writers
in other processes wait for a step at a time, never for the whole sweep.
A gc that fails after some steps (a busy store, a full disk) keeps them,
prints what they freed and exits with the error's status: run it again
to go on.
gc frees pages inside the database file; closing the store gives them back
to the file system in short steps on a store made with incremental
auto-vacuum (every store this build creates), and "wsctl vacuum" rebuilds
older stores whole.`,
		Args: cobra.NoArgs,
		RunE: a.runWith(&o.globals, func(ctx context.Context, args []string) error {
			o.graceSet = cmd.Flags().Changed("grace")
			return runGC(ctx, o, args)
		}),
	}
	cmd.Flags().BoolVar(&o.dryRun, "dry-run", false, "report what would be freed, delete nothing")
	cmd.Flags().StringVar(&o.grace, "grace", "", "keep unreachable rows younger than this (default 15m; 0: none)")
	return cmd
}

func runGC(ctx context.Context, o gcOptions, _ []string) error {
	opts := wsstore.GCOptions{DryRun: o.dryRun, Now: o.now}
	if o.graceSet {
		d, err := time.ParseDuration(o.grace)
		if err != nil || d < 0 {
			return argError("gc", "--grace %q is not a duration such as 15m or 0", o.grace)
		}
		opts.Grace = d
		if d == 0 {
			opts.Grace = -1 // the API's "no grace"; its zero means the default
		}
	}
	// A dry run only reads: it opens the store as queries do, so it
	// changes nothing (not even the free pages a writing open gives back
	// as it closes) and answers on a store it may not write.
	mode := readWrite
	if o.dryRun {
		mode = readOnly
	}
	st, err := openStore(ctx, o.globals, mode)
	if err != nil {
		return err
	}
	defer st.Close()
	bar := newProgress(o.globals)
	opts.Progress = bar.update
	var rep wsstore.GCReport
	if opts.DryRun {
		rep, err = st.GC(ctx, opts)
	} else {
		// In steps, so writers of other processes wait for one short
		// step at a time, never for the whole sweep.
		rep, err = st.CollectSteps(ctx, wsstore.GCStepOptions{GCOptions: opts})
	}
	bar.done()
	if err != nil && rep.Freed == (wsstore.ObjectCounts{}) {
		return err
	}
	// A collection that failed after some of its steps committed prints
	// what they freed, then fails with its error.
	if werr := printGC(o, rep, err != nil); werr != nil || err == nil {
		return werr
	}
	return err
}

// printGC prints gc's report; stopped says a failure ended the collection
// after the steps reported.
func printGC(o gcOptions, rep wsstore.GCReport, stopped bool) error {
	if o.json {
		return writeJSON(o.out, rep)
	}
	t := newTable(o.out, "", "BLOBS", "CHUNKS", "TREES", "STORED")
	freed := "freed"
	if rep.DryRun {
		freed = "would free"
	}
	row := func(label string, c wsstore.ObjectCounts, bytes string) {
		t.row(label, fmt.Sprint(c.Blobs), fmt.Sprint(c.Chunks), fmt.Sprint(c.Trees), bytes)
	}
	row("reachable", rep.Reachable, "")
	row(freed, rep.Freed, humanBytes(rep.FreedBytes))
	row("kept (young)", rep.Kept, "")
	if err := t.flush(); err != nil {
		return err
	}
	var err error
	switch {
	case stopped:
		_, err = fmt.Fprintln(o.out, "stopped by an error after freeing the above: run gc again to go on")
	case rep.DryRun:
		_, err = fmt.Fprintln(o.out, "dry run: nothing deleted")
	case rep.FreedBytes > 0:
		_, err = fmt.Fprintln(o.out, "freed pages go back to the file system as the store closes (\"wsctl vacuum\" for a store made before incremental auto-vacuum)")
	}
	return err
}
