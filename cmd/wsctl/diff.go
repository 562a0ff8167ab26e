package main

import (
	"bufio"
	"context"

	"github.com/spf13/cobra"

	"github.com/wsstore/wsstore/checkpoint"
	"github.com/wsstore/wsstore/runs"
)

func newDiffCmd(a *app) *cobra.Command {
	var g globals
	var maxBytes int
	cmd := &cobra.Command{
		Use:   "diff RUN FROM [TO]",
		Short: "Show the changes between two checkpoints as unified diffs",
		Long: `diff prints the file changes from checkpoint FROM to checkpoint TO (default:
the live workspace; "live" names it too) as unified text diffs. A checkpoint
is cp_000003 or 3, HEAD (the one the run is at) or HEAD~N (N parents back);
RUN is a run id, a unique prefix of one, or "latest". Binary and very large
files get a one-line summary. With --json it prints the list of changes,
each with its unified diff. --max-bytes caps the diff text (default 8 MiB);
what it leaves out is named. A diff of any size is printed a file at a
time as it is read, so one that fails partway (a damaged store) leaves
what it printed before the error, and exits with the error's status.`,
		Args:              rangeArgs(2, 3),
		ValidArgsFunction: a.runArgs(1, 2),
		RunE: a.runWith(&g, func(ctx context.Context, args []string) error {
			return runDiff(ctx, g, args, maxBytes)
		}),
	}
	intVar(cmd.Flags(), &maxBytes, "max-bytes", 0, "cap on the diff text; hunks and files past it are left out and named (0: 8 MiB)")
	return cmd
}

func runDiff(ctx context.Context, g globals, args []string, maxBytes int) error {
	if maxBytes < 0 {
		return argError("diff", "--max-bytes %d is negative", maxBytes)
	}
	fromRef, err := parseCheckpointRef(args[1], false)
	if err != nil {
		return err
	}
	toRef := cpRef{live: true}
	if len(args) == 3 {
		if toRef, err = parseCheckpointRef(args[2], true); err != nil {
			return err
		}
	}
	st, err := openStore(ctx, g, readOnly)
	if err != nil {
		return err
	}
	defer st.Close()
	runID, err := resolveRun(ctx, st, args[0])
	if err != nil {
		return err
	}
	from, err := fromRef.resolve(ctx, st, runID)
	if err != nil {
		return err
	}
	to, err := toRef.resolve(ctx, st, runID)
	if err != nil {
		return err
	}
	// One file at a time: the output of a diff of any size holds one
	// file's text, and --max-bytes caps the text of them all.
	opts := runs.DiffOptions{MaxBytes: maxBytes}
	if g.json {
		p := &pages[checkpoint.FileDiff]{w: g.out, json: true}
		defer p.abort()
		if err := st.Runs.DiffFunc(ctx, runID, from, to, opts, func(d checkpoint.FileDiff) error {
			return p.add([]checkpoint.FileDiff{d})
		}); err != nil {
			return err
		}
		return p.close()
	}
	bw := bufio.NewWriter(g.out)
	err = st.Runs.DiffFunc(ctx, runID, from, to, opts, func(d checkpoint.FileDiff) error {
		return writeUnified(bw, []checkpoint.FileDiff{d})
	})
	// The files printed before a failure stay printed.
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	return err
}
