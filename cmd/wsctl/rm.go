package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/wsstore/wsstore/wserr"
)

type rmOptions struct {
	globals
	force bool
}

func newRmCmd(a *app) *cobra.Command {
	var o rmOptions
	cmd := &cobra.Command{
		Use:   "rm RUN",
		Short: "Delete a run with its journal and checkpoints",
		Long: `rm deletes a run, its journal, checkpoints and commit records. Its files
stay in the store until "wsctl gc" frees those no other run shares.

A run that is still active (created, running, awaiting_approval, paused)
is refused with status 5 unless --force, which cancels it first.`,
		Args:              exactArgs(1),
		ValidArgsFunction: a.runArgs(),
		RunE: a.runWith(&o.globals, func(ctx context.Context, args []string) error {
			return runRm(ctx, o, args)
		}),
	}
	cmd.Flags().BoolVar(&o.force, "force", false, "cancel an active run, then delete it")
	return cmd
}

// rmResult is rm's --json output.
type rmResult struct {
	RunID     string `json:"runId"`
	Cancelled bool   `json:"cancelled"`
	Deleted   bool   `json:"deleted"`
}

func runRm(ctx context.Context, o rmOptions, args []string) error {
	st, err := openStore(ctx, o.globals, readWrite)
	if err != nil {
		return err
	}
	defer st.Close()
	id, err := resolveRun(ctx, st, args[0])
	if err != nil {
		return err
	}
	run, err := st.Runs.Run(ctx, id)
	if err != nil {
		return err
	}
	res := rmResult{RunID: id}
	if !run.Status.Final() && !o.force {
		return wserr.New(wserr.InvalidState, "rm", "", "run %s is %s: cancel it first, or pass --force to cancel and delete it", id, run.Status)
	}
	if res.Cancelled, err = st.Runs.CancelAndDeleteRun(ctx, id); err != nil {
		return err
	}
	res.Deleted = true
	if o.json {
		return writeJSON(o.out, res)
	}
	if res.Cancelled {
		fmt.Fprintf(o.out, "cancelled run %s\n", id)
	}
	_, err = fmt.Fprintf(o.out, "deleted run %s; \"wsctl gc\" frees the files no other run shares\n", id)
	return err
}
