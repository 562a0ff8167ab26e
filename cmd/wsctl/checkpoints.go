package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/wsstore/wsstore/checkpoint"
)

func newCheckpointsCmd(a *app) *cobra.Command {
	var g globals
	return &cobra.Command{
		Use:   "checkpoints RUN",
		Short: "List a run's checkpoints",
		Long: `checkpoints lists a run's checkpoints in order. HEAD marks the checkpoint
the live workspace descends from; PARENT shows where history forked after a
rollback. With --json each checkpoint is its checkpoint.json: the same
fields and the files of its tree, each with hash and bytes.`,
		Args: exactArgs(1),
		RunE: a.runWith(&g, func(ctx context.Context, args []string) error {
			return runCheckpoints(ctx, g, args)
		}),
	}
}

func runCheckpoints(ctx context.Context, g globals, args []string) error {
	st, err := openStore(ctx, g, readOnly)
	if err != nil {
		return err
	}
	defer st.Close()
	run, err := st.Runs.Run(ctx, args[0])
	if err != nil {
		return err
	}
	cps, err := st.Checkpoints.List(ctx, run.ID)
	if err != nil {
		return err
	}
	if cps == nil {
		cps = []checkpoint.Checkpoint{}
	}
	if g.json {
		// Each checkpoint's checkpoint.json (seed 000 §13): the row's
		// fields and the files of its tree.
		views := make([]checkpoint.View, 0, len(cps))
		for _, c := range cps {
			v, err := st.Checkpoints.View(ctx, run.ID, c.Seq)
			if err != nil {
				return err
			}
			views = append(views, v)
		}
		return writeJSON(g.out, views)
	}
	t := newTable(g.out, "ID", "HEAD", "PARENT", "REASON", "EVENT", "ROOT", "CREATED")
	for _, c := range cps {
		head, parent := "", c.Parent
		if c.Seq == run.HeadCheckpoint {
			head = "*"
		}
		if parent == "" {
			parent = "-"
		}
		t.row(c.ID, head, parent, c.Reason, fmt.Sprint(c.EventSeq), c.Root.Short(), stamp(c.CreatedAt))
	}
	return t.flush()
}
