package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/remote"
	"github.com/wsstore/wsstore/wserr"
)

func newPushCmd(a *app) *cobra.Command {
	var g globals
	return &cobra.Command{
		Use:   "push",
		Short: "Upload the blobs not yet on the object store --blobs names",
		Long: `push uploads every blob and chunk the store recorded but has not uploaded
yet, gathered into packs, to the object store --blobs names. A push that
fails (the store unreachable: exit status 8) keeps what landed; the next
one uploads only the rest. Blobs stay cached locally. While it uploads it
holds a push lock on the object store, so no reclaim-remote removes a pack
it counts on; while another device's reclaim-remote runs it uploads
nothing and fails with store.busy (exit 8): run it again later.`,
		Args: cobra.NoArgs,
		RunE: a.runWith(&g, func(ctx context.Context, args []string) error {
			return runPush(ctx, g, args)
		}),
	}
}

func newPullCmd(a *app) *cobra.Command {
	var g globals
	return &cobra.Command{
		Use:   "pull",
		Short: "Take in the blobs other devices pushed to the object store --blobs names",
		Long: `pull reads the object store's index objects this store has not read yet, so
that every blob another device pushed there can be read here (its bytes are
fetched, and verified, on first read). It holds a sync lock meanwhile and
publishes what the store now records, so reclaim-remote on another device
keeps it (docs/remote.md).`,
		Args: cobra.NoArgs,
		RunE: a.runWith(&g, func(ctx context.Context, args []string) error {
			return runPull(ctx, g, args)
		}),
	}
}

// openRemote opens the store for writing and fails with
// store.invalid_options unless it has a remote tier (--blobs, or the one
// it recorded). A command that creates (sync, pull: a new device) makes
// the store where there is none, given --blobs; failed removes it again.
func openRemote(ctx context.Context, g globals, op string, creates bool) (st *wsstore.Store, failed func(), err error) {
	if g.blobs == "" || !creates {
		// Without a URL only a store that recorded one will do.
		if st, err = openStore(ctx, g, readWrite); err != nil {
			return nil, nil, err
		}
		failed = func() {}
	} else {
		made := storeExists(g.storeDir) != nil
		if st, failed, err = openCreating(ctx, g); err != nil {
			return nil, nil, err
		}
		remove := failed
		failed = func() {
			if !made {
				return // a store that was there stays in any case
			}
			if registered(ctx, st) {
				// The store is a device on the tier now, and the sync
				// may have left its lock there, which tells
				// reclaim-remote to keep every pack until this device
				// syncs again: removed, it never would.
				fmt.Fprintf(g.errOut, "%s: the store made in %s is a device on the object store now and stays: run wsctl %s there again\n", op, g.storeDir, op)
				return
			}
			remove()
		}
	}
	if st.Remote == nil {
		failed()
		st.Close()
		how := "--blobs s3://bucket/prefix"
		if op == "sync" {
			how = "a tier: wsctl sync s3://bucket/prefix (or --blobs)"
		}
		return nil, nil, usageError{wserr.New(wserr.InvalidOptions, op, "", "needs %s (the store has recorded no remote tier)", how)}
	}
	return st, failed, nil
}

// registered reports whether st's device is registered on its remote
// tier: a sync or pull that got that far has written under the device's
// name (its sync lock, maybe left to expire), which only its store's next
// sync settles.
func registered(ctx context.Context, st *wsstore.Store) bool {
	if st.Remote == nil {
		return false
	}
	dev, err := remote.Device(ctx, st.DB)
	if err != nil {
		return false
	}
	ok, err := remote.Registered(ctx, st.DB, dev)
	return err == nil && ok
}

func runPush(ctx context.Context, g globals, _ []string) error {
	st, failed, err := openRemote(ctx, g, "push", false)
	if err != nil {
		return err
	}
	defer st.Close()
	rep, err := st.Remote.Push(ctx, st.DB)
	if err != nil {
		failed()
		return err
	}
	if g.json {
		return writeJSON(g.out, rep)
	}
	_, err = fmt.Fprintf(g.out, "push: %d packs (%d objects, %s), %d chunk lists\n",
		rep.Packs, rep.Objects, humanBytes(rep.Bytes), rep.Chunked)
	return err
}

func runPull(ctx context.Context, g globals, _ []string) error {
	st, failed, err := openRemote(ctx, g, "pull", true)
	if err != nil {
		return err
	}
	defer st.Close()
	rep, err := st.PullRemote(ctx)
	if err != nil {
		failed()
		return err
	}
	if g.json {
		return writeJSON(g.out, rep)
	}
	_, err = fmt.Fprintf(g.out, "pull: %d index objects, %d new objects\n", rep.Indexes, rep.Objects)
	damagedIndexes(g, "pull", rep)
	return err
}
