package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/remote"
	"github.com/wsstore/wsstore/wserr"
)

func newSyncCmd(a *app) *cobra.Command {
	var g globals
	var opt wsstore.SyncOptions
	cmd := &cobra.Command{
		Use:   "sync [REMOTE] [--base]",
		Short: "Reconcile the store with the other devices that sync through the same object store",
		Long: `sync reconciles this store with every other store syncing through the
remote tier REMOTE (an s3:// URL as --blobs takes; default the tier the
store recorded). It pushes this store's blobs and pulls the others'; takes
in the sync segments of every other device it has not read, merging runs,
checkpoints and journals by id, persist/ layers by compare-and-swap and
actor spaces by version, and deleting what they say was deleted; then
publishes one segment of its own with what changed here since its last
sync. A run written on two devices, a persist/ layer promoted or an actor
space changed on both, or something deleted on one and changed on the
other, is left as it is on each side and named as a conflict (exit 5);
the rest is synced. While another device reclaims remote space it fails
with store.busy (exit 8). A store restored with "wsctl restore" syncs as
a device of its own (docs/remote.md). --base publishes a base segment
(the device's whole state) even when a delta would do: reclaim-remote can
then remove the device's older segments, and the packs only they named,
once they are older than its grace.`,
		Args: rangeArgs(0, 1),
		RunE: a.runWith(&g, func(ctx context.Context, args []string) error {
			if len(args) == 1 {
				g.blobs = args[0]
			}
			return runSync(ctx, g, opt)
		}),
	}
	cmd.Flags().BoolVar(&opt.Base, "base", false, "publish a base segment, so reclaim-remote can drop the older ones")
	return cmd
}

func runSync(ctx context.Context, g globals, opt wsstore.SyncOptions) error {
	st, failed, err := openRemote(ctx, g, "sync", true)
	if err != nil {
		return err
	}
	defer st.Close()
	rep, syncErr := st.SyncWith(ctx, opt)
	if syncErr != nil && rep.Published == "" {
		// A store this sync made and could not fill: none is better than
		// an empty one in its place.
		failed()
		return syncErr
	}
	// Published: the store is a device on the tier now, and its report
	// goes out even when the sync then failed (a device's segments held
	// back at a gap).
	if g.json {
		if err := writeJSON(g.out, rep); err != nil {
			return err
		}
	} else if _, err := fmt.Fprintf(g.out, "sync: device %s; pushed %d objects, pulled %d; took in %d segments: %d added, %d updated, %d unchanged, %d deleted, %d conflicts; sent %d changes and %d deletions (%d bytes%s)\n",
		rep.Device, rep.Pushed.Objects, rep.Pulled.Objects, len(rep.TookIn), rep.AddedCount, rep.UpdatedCount, rep.Unchanged, len(rep.Deleted), len(rep.Conflicts),
		rep.SentCount, len(rep.Tombstones), rep.SegmentBytes, map[bool]string{true: ", a base", false: ""}[rep.Base]); err != nil {
		return err
	}
	if r := rep.Repaired; len(r.Gone) > 0 && !g.json {
		fmt.Fprintf(g.errOut, "sync: gone from the object store, published again: %s; %d objects to push again, %d lost (held nowhere here)\n",
			strings.Join(r.Gone, ", "), r.Repush, r.Lost)
	}
	if !g.json {
		damagedIndexes(g, "sync", rep.Pulled)
	}
	if len(rep.Conflicts) > 0 && !g.json {
		for _, c := range rep.Conflicts {
			fmt.Fprintf(g.errOut, "conflict: %s %s: %s\n", c.Kind, c.ID, c.Reason)
		}
	}
	if syncErr != nil {
		return syncErr
	}
	if len(rep.Conflicts) > 0 {
		return wserr.New(wserr.Conflict, "sync", "", "%d chats, runs or actor spaces were changed on two devices, or deleted on one and changed on the other, and are left as they are on each", len(rep.Conflicts))
	}
	return nil
}

// damagedIndexes says, on stderr, which index objects a sync or pull
// skipped because they do not read, and what that means.
func damagedIndexes(g globals, op string, st remote.PullStats) {
	for _, k := range st.Damaged {
		fmt.Fprintf(g.errOut, "%s: index object %s does not read (damaged) and was skipped: an object only it lists is found in its pack when a segment needs one; reclaim-remote refuses to run until the object is removed from the object store\n", op, k)
	}
}
