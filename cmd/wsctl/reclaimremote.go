package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/wsstore/wsstore/remote"
)

type reclaimRemoteOptions struct {
	globals
	opts remote.ReclaimOptions
}

func newReclaimRemoteCmd(a *app) *cobra.Command {
	var o reclaimRemoteOptions
	cmd := &cobra.Command{
		Use:   "reclaim-remote [--grace D] [--max N] [--dry-run]",
		Short: "Remove from the object store the packs no device uses, and superseded sync segments",
		Long: `reclaim-remote removes from the store's remote tier, at most --max objects
a call: packs (with their index objects) older than --grace that no
device's object set (as its sync segments publish it) names, nor this
store records; each device's segments before its newest base, once older
than --grace; and expired sync locks. It holds the tier's exclusive
reclaim lease meanwhile, and refuses (store.busy, exit 8) while another
device reclaims or any device syncs (docs/remote.md, "Reclaiming space").
The lease lasts five minutes and is renewed as it goes; one that cannot
be renewed in time stops it (store.busy), with what it removed removed.
Killed, it holds back every device's sync until its lease ends.`,
		Args: cobra.NoArgs,
		RunE: a.runWith(&o.globals, func(ctx context.Context, args []string) error {
			return runReclaimRemote(ctx, o)
		}),
	}
	cmd.Flags().DurationVar(&o.opts.Grace, "grace", 7*24*time.Hour, "keep what was written less than this long ago (0: none, as gc's)")
	intVar(cmd.Flags(), &o.opts.Max, "max", 1000, "remove at most this many objects")
	cmd.Flags().BoolVar(&o.opts.DryRun, "dry-run", false, "count what would be removed, remove nothing")
	return cmd
}

func runReclaimRemote(ctx context.Context, o reclaimRemoteOptions) error {
	if o.opts.Grace < 0 {
		return argError("reclaim-remote", "--grace %v is negative: give a duration such as 168h, or 0 for none", o.opts.Grace)
	}
	if o.opts.Max < 1 {
		return argError("reclaim-remote", "--max %d: give how many objects a call may remove, at least 1", o.opts.Max)
	}
	if o.opts.Grace == 0 {
		// Typed: the flag's default is 7 days. Zero is the library's
		// "default", so it is passed on as "none".
		o.opts.Grace = -1
	}
	st, failed, err := openRemote(ctx, o.globals, "reclaim-remote", false)
	if err != nil {
		return err
	}
	defer st.Close()
	rep, err := st.ReclaimRemote(ctx, o.opts)
	if err != nil {
		failed()
		return err
	}
	if o.json {
		if rep.Waiting == nil {
			rep.Waiting = []string{}
		}
		return writeJSON(o.out, rep)
	}
	verb := "removed"
	if o.opts.DryRun {
		verb = "would remove"
	}
	_, err = fmt.Fprintf(o.out, "reclaim-remote: %s %d packs, %d index objects, %d segments, %d expired sync locks; kept %d index objects%s\n",
		verb, rep.Packs, rep.Indexes, rep.Segments, rep.Locks, rep.Kept, map[bool]string{true: "; more left (run again)", false: ""}[rep.More])
	if err == nil && len(rep.Waiting) > 0 {
		_, err = fmt.Fprintf(o.out, "reclaim-remote: no pack removed until these devices sync again (their last sync was cut off before it published): %s; "+
			"for a device that never will, delete its locks/sync/DEVICE-… object\n", strings.Join(rep.Waiting, ", "))
	}
	return err
}
