package main

import (
	"context"
	"fmt"
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
		Short: "Remove from the object store the packs no device uses, and superseded sync archives",
		Long: `reclaim-remote removes from the store's remote tier, at most --max objects
a call: packs (with their index objects) older than --grace that no object
of the newest object list of any syncing device names, nor this store
records; and each device's archives and object lists other than its
newest, once older than --grace. Run it when every device has synced
since it last pulled, and while none is syncing (docs/remote.md).`,
		Args: cobra.NoArgs,
		RunE: a.runWith(&o.globals, func(ctx context.Context, args []string) error {
			return runReclaimRemote(ctx, o)
		}),
	}
	cmd.Flags().DurationVar(&o.opts.Grace, "grace", 7*24*time.Hour, "keep what was written less than this long ago (negative: none)")
	cmd.Flags().IntVar(&o.opts.Max, "max", 1000, "remove at most this many objects")
	cmd.Flags().BoolVar(&o.opts.DryRun, "dry-run", false, "count what would be removed, remove nothing")
	return cmd
}

func runReclaimRemote(ctx context.Context, o reclaimRemoteOptions) error {
	st, err := openRemote(ctx, o.globals, "reclaim-remote")
	if err != nil {
		return err
	}
	defer st.Close()
	rep, err := st.ReclaimRemote(ctx, o.opts)
	if err != nil {
		return err
	}
	if o.json {
		return writeJSON(o.out, rep)
	}
	verb := "removed"
	if o.opts.DryRun {
		verb = "would remove"
	}
	_, err = fmt.Fprintf(o.out, "reclaim-remote: %s %d packs, %d index objects, %d archives; kept %d index objects%s\n",
		verb, rep.Packs, rep.Indexes, rep.Archives, rep.Kept, map[bool]string{true: "; more left (run again)", false: ""}[rep.More])
	return err
}
