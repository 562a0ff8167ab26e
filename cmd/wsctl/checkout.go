package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/checkpoint"
	"github.com/wsstore/wsstore/runs"
)

type checkoutOptions struct {
	globals
	at   string
	sync bool
}

func newCheckoutCmd(a *app) *cobra.Command {
	var o checkoutOptions
	cmd := &cobra.Command{
		Use:   "checkout RUN DIR",
		Short: "Write a run's workspace files into a new directory",
		Long: `checkout writes every file of a run's live workspace, or of a checkpoint
with --at, into DIR, which must not exist or be empty: checkout never
overwrites anything. Files are written through an os.Root of DIR, so no
stored name can reach outside it. The scratch domain (scratch/) is never
checked out, nor are virtual resources or allowed host paths (host/). The
profile's other visible roots are directories even when they hold no
file, as ls lists them. Every file and directory is made exclusively: on
a file system that does not tell case apart (macOS's and Windows's
default), two stored names that differ only in case are store.conflict,
never merged, and DIR is left empty.

The files are written into a hidden directory (beside a new DIR, named
.DIR.wsstore-checkout-NNN, or inside an empty one, .wsstore-checkout-NNN)
that is put in place once complete, so a checkout killed midway leaves
no half workspace under DIR's name. A checkout touches its hidden
directory at least every minute as it writes; the next checkout to DIR
removes the hidden directories untouched for an hour. A checkout that
fails removes its hidden directory and leaves what another program saved
in DIR meanwhile; a name another program made where the files go is
store.conflict.

--sync syncs every file and directory to the disk before they are put in
place, and the directory that takes them after: once checkout has
answered, a power loss leaves the whole workspace in DIR. Without it, a
power loss in the minute or so after checkout answers can leave DIR
missing, or holding files that are empty or cut short.`,
		Args: exactArgs(2),
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			if len(args) == 1 {
				return nil, cobra.ShellCompDirectiveFilterDirs // DIR: a directory on the host
			}
			return a.runArgs()(cmd, args, toComplete)
		},
		RunE: a.runWith(&o.globals, func(ctx context.Context, args []string) error {
			return runCheckout(ctx, o, args)
		}),
	}
	a.atFlag(cmd, &o.at, "check out this checkpoint instead of the live workspace")
	cmd.Flags().BoolVar(&o.sync, "sync", false, "sync the files and directories to the disk before putting them in place")
	return cmd
}

// checkoutResult is checkout's --json output.
type checkoutResult struct {
	RunID      string `json:"runId"`
	Checkpoint string `json:"checkpointId,omitempty"`
	Dir        string `json:"dir"`
	Files      int    `json:"files"`
	Dirs       int    `json:"dirs"`
	Bytes      int64  `json:"bytes"`
}

func runCheckout(ctx context.Context, o checkoutOptions, args []string) error {
	dir := args[1]
	at, err := parseAt(o.at)
	if err != nil {
		return err
	}
	st, err := openStore(ctx, o.globals, readOnly)
	if err != nil {
		return err
	}
	defer st.Close()
	runID, err := resolveRun(ctx, st, args[0])
	if err != nil {
		return err
	}
	seq, err := at.resolve(ctx, st, runID)
	if err != nil {
		return err
	}
	opt := wsstore.CheckoutOptions{Sync: o.sync}
	bar := newProgress(o.globals)
	defer bar.done()
	if bar.on {
		opt.Progress = func(done, total int) { bar.update("checkout", done, total) }
	}
	n, err := st.Checkout(ctx, runID, seq, dir, opt)
	if err != nil {
		// DIR came from the command line, not from a model.
		return asArgError("checkout", err)
	}
	bar.done()
	res := checkoutResult{RunID: runID, Dir: dir, Files: n.Files, Dirs: n.Dirs, Bytes: n.Bytes}
	if seq != runs.Live {
		res.Checkpoint = checkpoint.ID(seq)
	}
	if o.json {
		return writeJSON(o.out, res)
	}
	from := "live workspace"
	if res.Checkpoint != "" {
		from = res.Checkpoint
	}
	_, err = fmt.Fprintf(o.out, "checked out %d files (%s) of %s at %s into %s\n", res.Files, humanBytes(res.Bytes), runID, from, dir)
	return err
}
