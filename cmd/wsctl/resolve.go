package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/wsstore/wsstore/protocol"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/wserr"
)

type resolveOptions struct {
	globals
	receipt string
	error   string
}

func newResolveCommitCmd(a *app) *cobra.Command {
	var o resolveOptions
	cmd := &cobra.Command{
		Use:   "resolve-commit RUN COMMIT completed|failed",
		Short: "Record what became of a commit left pending",
		Long: `resolve-commit records the outcome of a commit that is still pending: the
process that handed its message to the chat sink ended, or the store was
closed, before the sink's outcome was recorded ("wsctl show RUN" lists it as
pending). Check the chat: "completed" if the message was saved there,
"failed" if not (a failed commit may simply be made again). The outcome is
journaled as a delivery's would be, marked resolved, and retention, which
keeps a run while it has a pending commit ("wsctl prune" lists it), may
delete the run again (at its next pass). Resolve a commit on the store that
made it: resolved on two devices that sync, the run's journals part and
sync reports it as a conflict.

A commit that is not pending is refused with run.invalid_transition; one
the run does not have with store.not_found.`,
		Args:              exactArgs(3),
		ValidArgsFunction: a.runArgs(),
		RunE: a.runWith(&o.globals, func(ctx context.Context, args []string) error {
			return runResolveCommit(ctx, o, args)
		}),
	}
	cmd.Flags().StringVar(&o.receipt, "receipt", "", "the sink's receipt to keep with the commit: `JSON` (anything else is kept as a string)")
	cmd.Flags().StringVar(&o.error, "error", "", "why the commit failed (only with failed)")
	return cmd
}

func runResolveCommit(ctx context.Context, o resolveOptions, args []string) error {
	status := args[2]
	if status != runs.CommitCompleted && status != runs.CommitFailed {
		return usageError{wserr.New(protocol.CodeInvalidArgument, "resolve-commit", "", "the outcome must be completed or failed, not %q", status)}
	}
	if o.error != "" && status != runs.CommitFailed {
		return usageError{wserr.New(protocol.CodeInvalidArgument, "resolve-commit", "", "--error is given only with failed")}
	}
	st, err := openStore(ctx, o.globals, readWrite)
	if err != nil {
		return err
	}
	defer st.Close()
	id, err := resolveRun(ctx, st, args[0])
	if err != nil {
		return err
	}
	rec, err := st.Runs.ResolveCommit(ctx, id, args[1], runs.CommitOutcome{Status: status, Receipt: json.RawMessage(o.receipt), Error: o.error})
	if err != nil {
		return err
	}
	if o.json {
		return writeJSON(o.out, rec)
	}
	_, err = fmt.Fprintf(o.out, "commit %s of run %s: %s\n", rec.ID, rec.RunID, rec.Status)
	return err
}
