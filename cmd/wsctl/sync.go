package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/wsstore/wsstore/wserr"
)

func newSyncCmd(a *app) *cobra.Command {
	var g globals
	return &cobra.Command{
		Use:   "sync [REMOTE]",
		Short: "Reconcile the store with the other devices that sync through the same object store",
		Long: `sync reconciles this store with every other store syncing through the
remote tier REMOTE (an s3:// URL as --blobs takes; default the tier the
store recorded). It pushes this store's blobs and pulls the others'; takes
in the newest metadata archive every other device published, merging runs,
checkpoints and journals by id and persist/ layers by compare-and-swap;
then publishes its own. A run written on two devices, or a persist/ layer
promoted on both, is left as it is on each side and named as a conflict
(exit 5); the rest is synced. A store restored with "wsctl restore" syncs
as a device of its own (docs/remote.md).`,
		Args: rangeArgs(0, 1),
		RunE: a.runWith(&g, func(ctx context.Context, args []string) error {
			if len(args) == 1 {
				g.blobs = args[0]
			}
			return runSync(ctx, g)
		}),
	}
}

func runSync(ctx context.Context, g globals) error {
	st, err := openRemote(ctx, g, "sync")
	if err != nil {
		return err
	}
	defer st.Close()
	rep, err := st.Sync(ctx)
	if err != nil {
		return err
	}
	if g.json {
		if err := writeJSON(g.out, rep); err != nil {
			return err
		}
	} else if _, err := fmt.Fprintf(g.out, "sync: device %s; pushed %d objects, pulled %d; took in %d archives: %d added, %d updated, %d unchanged, %d conflicts\n",
		rep.Device, rep.Pushed.Objects, rep.Pulled.Objects, len(rep.TookIn), len(rep.Added), len(rep.Updated), rep.Unchanged, len(rep.Conflicts)); err != nil {
		return err
	}
	if len(rep.Conflicts) > 0 {
		if !g.json {
			for _, c := range rep.Conflicts {
				fmt.Fprintf(g.errOut, "conflict: %s %s: %s\n", c.Kind, c.ID, c.Reason)
			}
		}
		return wserr.New(wserr.Conflict, "sync", "", "%d objects were written on two devices and left as they are on each", len(rep.Conflicts))
	}
	return nil
}
