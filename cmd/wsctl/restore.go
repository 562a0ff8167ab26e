package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/mkdirs"
	"github.com/wsstore/wsstore/remote"
	"github.com/wsstore/wsstore/remote/replica"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/wserr"
)

type restoreOptions struct {
	globals
	from   string
	verify bool
}

func newRestoreCmd(a *app) *cobra.Command {
	var o restoreOptions
	cmd := &cobra.Command{
		Use:   "restore --from URL [--verify] DIR",
		Short: "Build a store in DIR from a replica that wsctl replicate wrote, or from a sync tier",
		Long: `restore builds a store in DIR, which must hold none (nor the log,
wsstore.db-wal, of a database removed from it), from the Litestream
replica at --from (the URL "wsctl replicate" wrote to, or the blob tier
whose default replica, its prefix + meta, it wrote), at the latest
transaction the replica holds. The restored store keeps the blob tier URL
its source recorded; --blobs names the same tier by another endpoint.
It then takes in the blob index of the tier (as "wsctl pull" does), so
blobs pushed after the replica's last transaction are known too.

When --from holds no replica but devices sync through it ("wsctl sync
REMOTE"), the store is built from what they published, as a new device's
first sync builds it (conflicts between other devices are printed, not
failed on); the sync runs once the store is in DIR, and one that fails
leaves it there for "wsctl sync". A URL with neither is store.not_found
(exit 3).

--verify then reads every file of every run and checkpoint back from the
object store and checks it (fsck); a problem exits 6.`,
		Args: exactArgs(1),
		RunE: a.runWith(&o.globals, func(ctx context.Context, args []string) error {
			return runRestore(ctx, o, args)
		}),
	}
	cmd.Flags().StringVar(&o.from, "from", "", "the replica's `URL` s3://bucket/prefix?endpoint=…")
	cmd.Flags().BoolVar(&o.verify, "verify", false, "read back and check every file after restoring")
	return cmd
}

// restoringPrefix names the directories restores build their stores in,
// inside the store's directory.
const restoringPrefix = ".wsstore-restoring"

// placeNew gives the file tmp the name path, failing with fs.ErrExist
// rather than replacing a file there: a link, then tmp's name removed. On
// a file system without hard links it renames after checking that path
// is free (a file made there between the two is then replaced).
func placeNew(tmp, path string) error {
	err := os.Link(tmp, path)
	switch {
	case err == nil:
		os.Remove(tmp) // one name again
		return nil
	case errors.Is(err, fs.ErrExist):
		return err
	}
	if _, serr := os.Lstat(path); serr == nil {
		return &fs.PathError{Op: "restore", Path: path, Err: fs.ErrExist}
	}
	return os.Rename(tmp, path)
}

// placedButStopped is err, a failure of the step (pull or sync) that
// follows placing the store in dir, unless an interrupt caused it: then a
// wsctl.interrupted that says the store is in dir and what to run there,
// which the interrupt would otherwise hide.
func placedButStopped(ctx context.Context, dir, step string, err error) error {
	if ctx.Err() == nil {
		return err
	}
	return wserr.New(codeStopped, "restore", "", "interrupted once the store was in %s, before its %s: run wsctl %s there", dir, step, step)
}

// keepFresh touches dir every ten minutes until stop is called, so that a
// restore running longer than clearOldRestores' hour keeps its directory.
func keepFresh(dir string) (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(10 * time.Minute)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				_ = os.Chtimes(dir, now, now)
			}
		}
	}()
	return func() { close(done) }
}

// clearOldRestores removes what restores killed part way left in dir: a
// directory untouched for over an hour (a running restore touches its
// own every ten minutes). Restores and every command that opens the store
// in dir for writing call it, since a restore into dir that succeeded
// after one was killed leaves no later restore to run there.
func clearOldRestores(dir string) {
	es, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range es {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), restoringPrefix) {
			continue
		}
		if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > time.Hour {
			os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
}

// restoreDirError codes a failure to make DIR, or a directory in it: a
// full disk or a read-only file system is the host's state; otherwise (a
// name no directory can have, a parent that cannot hold directories, one
// the user may not write) DIR cannot hold a store, as --store naming it
// could not.
func restoreDirError(dir string, err error) error {
	if fault := wserr.FSFault("restore", dir, err); fault != err {
		return fault
	}
	return wserr.Wrap(wserr.InvalidOptions, "restore", dir, fmt.Errorf("cannot make the store's directory, or one in it: %w", err))
}

func runRestore(ctx context.Context, o restoreOptions, args []string) (err error) {
	if o.from == "" {
		return usageError{wserr.New(wserr.InvalidOptions, "restore", "", "needs --from s3://bucket/prefix")}
	}
	dir := args[0]
	if dir == "" {
		return argError("restore", "DIR is empty: name the directory to restore the store into")
	}
	if err := checkStoreDir(dir); err != nil {
		return err
	}
	path := filepath.Join(dir, wsstore.DBName)
	if _, err := os.Stat(path); err == nil {
		clearOldRestores(dir)
		return wserr.New(wserr.InvalidOptions, "restore", path, "a database is there already: restore into a new directory")
	}
	if err := index.CheckNoLogLeft("restore", path); err != nil {
		return err
	}
	// What restore makes of DIR and its parents it removes again if it
	// fails, while they are empty.
	made := mkdirs.Missing(filepath.Clean(dir))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return restoreDirError(dir, err)
	}
	// The replica is restored in a directory of its own inside DIR and
	// made a device of its own there (ResetDevice); its database is then
	// linked in under the store's name, which refuses a store made in
	// DIR meanwhile rather than replacing it. A restore that fails or is
	// killed before leaves no store in DIR, only that directory, which a
	// restore an hour later clears (another may still be using it).
	clearOldRestores(dir)
	tmpDir, err := os.MkdirTemp(dir, restoringPrefix)
	if err != nil {
		mkdirs.RemoveEmpty(made)
		return restoreDirError(dir, err)
	}
	tmp := filepath.Join(tmpDir, wsstore.DBName)
	var st *wsstore.Store
	placed := false
	defer func() {
		if st != nil {
			st.Close()
		}
		os.RemoveAll(tmpDir)
		if err != nil && !placed {
			mkdirs.RemoveEmpty(made)
		}
	}()
	opts := wsstore.Options{Index: index.Options{Synchronous: o.sync}, Blobs: o.blobs}
	stopTouch := keepFresh(tmpDir)
	err = restoreReplica(ctx, o.from, tmp)
	fromSync := false
	if wserr.Is(err, wserr.NotFound) {
		// No replica: --from may be the tier the devices sync through
		// (wsctl sync REMOTE), which holds what a new device needs. The
		// store is made here on that tier and synced once it is in DIR.
		fromSync = true
		err = newSyncDevice(ctx, o.from, tmpDir, opts)
	}
	stopTouch()
	if err != nil {
		return err
	}
	if st, err = wsstore.Open(ctx, tmpDir, opts); err != nil {
		return err
	}
	// The replica carries its source's device id and the deletions it
	// made since its last sync: this store publishes them as a device of
	// its own. A store to be built by a sync is a new device already.
	if !fromSync {
		if err := st.ResetDevice(ctx); err != nil {
			return err
		}
	}
	restored, err := countRuns(ctx, st)
	if err != nil {
		return err
	}
	err = st.Close()
	st = nil
	if err != nil {
		return err
	}
	// Closed, the database is one file: its log was copied in and
	// removed. A log left would hold committed writes the rename would
	// leave behind.
	for _, f := range []string{tmp + "-wal", tmp + "-journal"} {
		if fi, serr := os.Stat(f); serr == nil && fi.Size() > 0 {
			return wserr.New(wserr.Internal, "restore", f, "the restored database's log was not emptied when it closed")
		}
	}
	if err := index.CheckNoLogLeft("restore", path); err != nil {
		return err
	}
	if err := placeNew(tmp, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return wserr.New(wserr.InvalidOptions, "restore", path, "a store was made in %s while restoring: it is left as it is; restore into a new directory", dir)
		}
		return wserr.FromFS("restore", path, err)
	}
	placed = true
	// The pull, and the sync, register the device on the tier and publish
	// a segment of its own, so they run once the store holding that
	// device exists: a restore failed or killed before leaves no device
	// on the tier that no store is. The store is whole without the pull
	// (what the source had not pushed is in its cache); one it failed
	// for takes the indexes in with wsctl pull or sync. A store the sync
	// failed for is a device of the tier still to take in what the others
	// published: wsctl sync there goes on.
	if st, err = wsstore.Open(ctx, dir, opts); err != nil {
		return placedButStopped(ctx, dir, "pull", fmt.Errorf("restore: the store is restored in %s, but opening it there to take in the tier's indexes failed (then run wsctl pull): %w", dir, err))
	}
	pulled := 0
	if fromSync {
		synced, err := st.Sync(ctx)
		if err != nil {
			return placedButStopped(ctx, dir, "sync", fmt.Errorf("restore: the store is made in %s on the tier, but its first sync failed (run wsctl sync there): %w", dir, err))
		}
		pulled = synced.Pulled.Objects
		for _, c := range synced.Conflicts {
			fmt.Fprintf(o.errOut, "restore: conflict between other devices: %s %s: %s\n", c.Kind, c.ID, c.Reason)
		}
		if restored, err = countRuns(ctx, st); err != nil {
			return err
		}
	} else if st.Remote != nil {
		rep, err := st.PullRemote(ctx)
		if err != nil {
			return placedButStopped(ctx, dir, "pull", fmt.Errorf("restore: the store is restored in %s, but taking in the tier's indexes failed (run wsctl pull): %w", dir, err))
		}
		pulled = rep.Objects
	}
	problems := 0
	if o.verify {
		if st.Remote != nil {
			// The cache holds every object its source held: the
			// files are read back from the object store itself.
			err := st.Close()
			st = nil
			if err != nil {
				return err
			}
			vopts := opts
			vopts.Remote.Uncached = true
			if st, err = wsstore.Open(ctx, dir, vopts); err != nil {
				return err
			}
		}
		fr, err := st.Fsck(ctx, nil)
		if err != nil {
			return err
		}
		problems = len(fr.Problems)
		for _, p := range fr.Problems {
			fmt.Fprintf(o.errOut, "restore: %v\n", p)
		}
	}
	if o.json {
		if err := writeJSON(o.out, map[string]any{"dir": dir, "runs": restored, "pulledObjects": pulled, "verified": o.verify, "problems": problems}); err != nil {
			return err
		}
	} else if _, err := fmt.Fprintf(o.out, "restore: %d runs into %s (%d objects pulled)\n", restored, dir, pulled); err != nil {
		return err
	}
	if problems > 0 {
		return wserr.New(wserr.Corrupt, "restore", dir, "%d problems found reading the restored store back", problems)
	}
	return nil
}

// countRuns counts the store's runs a page at a time, holding one page.
func countRuns(ctx context.Context, st *wsstore.Store) (int, error) {
	n := 0
	q := runs.ListQuery{}
	for {
		page, more, err := st.Runs.RunsPage(ctx, q)
		if err != nil {
			return n, err
		}
		n += len(page)
		if !more || len(page) == 0 {
			return n, nil
		}
		q.After = page[len(page)-1].ID
	}
}

// restoreReplica restores the Litestream replica at from into path, else
// the one at from's default replica URL (the prefix + "meta", where wsctl
// replicate writes for a store on that tier); store.not_found when
// neither holds one.
func restoreReplica(ctx context.Context, from, path string) error {
	err := replica.Restore(ctx, from, path, replica.Options{})
	if !wserr.Is(err, wserr.NotFound) {
		return err
	}
	loc, perr := remote.ParseURL(from)
	if perr != nil {
		return err
	}
	loc.Prefix = strings.TrimPrefix(strings.TrimSuffix(loc.Prefix, "/")+"/meta/", "/")
	if merr := replica.Restore(ctx, loc.String(), path, replica.Options{}); !wserr.Is(merr, wserr.NotFound) {
		return merr
	}
	return err
}

// newSyncDevice makes an empty store in dir on the sync tier at from, for
// a first wsctl sync to build as a new device's (it writes nothing to the
// tier: the sync registers the device). A tier no device syncs through
// is store.not_found.
func newSyncDevice(ctx context.Context, from, dir string, opts wsstore.Options) error {
	if opts.Blobs == "" {
		opts.Blobs = from
	}
	st, err := wsstore.Open(ctx, dir, opts)
	if err != nil {
		return err
	}
	defer st.Close()
	devices, err := st.Remote.Devices(ctx)
	if err != nil {
		return err
	}
	if len(devices) == 0 {
		return wserr.New(wserr.NotFound, "restore", from, "no replica here and no device syncs through this tier: run wsctl replicate or wsctl sync on the source store first")
	}
	return st.Close()
}
