package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/checkpoint"
	"github.com/wsstore/wsstore/protocol"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

type checkoutOptions struct {
	globals
	at string
	// wrapBlobs, if not nil, wraps the content store the files are read
	// from (app.wrapBlobs).
	wrapBlobs func(blobGetter) blobGetter
	// wrapTarget, if not nil, wraps DIR as checkout makes its
	// directories and files (app.wrapTarget).
	wrapTarget func(checkoutTarget) checkoutTarget
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
never merged, and DIR is left empty.`,
		Args: exactArgs(2),
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			if len(args) == 1 {
				return nil, cobra.ShellCompDirectiveFilterDirs // DIR: a directory on the host
			}
			return a.runArgs()(cmd, args, toComplete)
		},
		RunE: a.runWith(&o.globals, func(ctx context.Context, args []string) error {
			o.wrapBlobs, o.wrapTarget = a.wrapBlobs, a.wrapTarget
			return runCheckout(ctx, o, args)
		}),
	}
	a.atFlag(cmd, &o.at, "check out this checkpoint instead of the live workspace")
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
	// The trees of one moment: immutable, so walked page by page after
	// the read that found them, never listed whole.
	roots, err := checkoutRoots(ctx, st.Runs, st.Checkpoints, runID, seq)
	if err != nil {
		return err
	}
	ws := workspaceFor(st.Runs, runID, seq)
	// each calls fn for every entry checked out: stored files and
	// directories, not scratch/ (never exported, whether the run is still
	// active or kept it after failing).
	each := func(fn func(vfs.FileInfo) error) error {
		for _, root := range roots {
			var fnErr error // fn's own, judged by fn (ContentMissing)
			err := st.Trees.ListFunc(ctx, nil, root, vfs.Root(), allDepth, vfs.Path{}, func(l vfs.Listed) error {
				if l.Path.Top() == runs.ScratchRoot {
					if l.Kind == vfs.KindDir {
						return fs.SkipDir
					}
					return nil
				}
				fnErr = fn(vfs.FileInfo{Path: l.Path, Kind: l.Kind, Size: l.Size, Hash: l.Hash, Resource: vfs.ResourceMaterialized})
				return fnErr
			})
			if fnErr == nil && wserr.Is(err, wserr.Corrupt) {
				err = checkoutTreeMissing(ctx, st.Runs, st.Checkpoints, runID, seq, roots, err)
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	total := 0
	if err := each(func(fi vfs.FileInfo) error {
		if fi.Kind != vfs.KindDir {
			total++
		}
		return nil
	}); err != nil {
		return err
	}
	created, err := newEmptyDir(dir)
	if err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		if created {
			_ = os.Remove(dir)
		}
		return dirError(dir, err)
	}
	defer root.Close()
	// made lists the entries this checkout made directly in dir: a
	// checkout that fails removes them, for half a workspace is worse than
	// none, and leaves what another program put in dir meanwhile.
	var made []string
	done := false
	defer func() {
		if !done {
			for _, name := range made {
				_ = root.RemoveAll(name)
			}
			if created {
				_ = os.Remove(dir) // only once empty
			}
		}
	}()
	var target checkoutTarget = root
	if o.wrapTarget != nil {
		target = o.wrapTarget(target)
	}

	res := checkoutResult{RunID: runID, Dir: dir}
	if seq != runs.Live {
		res.Checkpoint = checkpoint.ID(seq)
	}
	var blobs blobGetter = st.Blobs
	if o.wrapBlobs != nil {
		blobs = o.wrapBlobs(blobs)
	}
	bar := newProgress(o.globals)
	defer bar.done()
	err = each(func(fi vfs.FileInfo) error {
		if fi.Kind == vfs.KindDir {
			// Each directory is made once, after its parent (the walk is
			// in pre-order), so one already there is another stored name
			// the file system takes for this one: never merged into it.
			if err := target.Mkdir(filepath.FromSlash(fi.Path.String()), 0o755); err != nil {
				return checkoutFault(dir, fi.Path, err)
			}
			if fi.Path.Dir().IsRoot() {
				made = append(made, fi.Path.String())
			}
			res.Dirs++
			return nil
		}
		bar.update("checkout", res.Files, total)
		n, err := checkoutFile(ctx, blobs, dir, target, fi, &made)
		// Contents gone since the trees were read: the run or checkpoint
		// deleted, the file changed and collected, or lost.
		if err = ws.ContentMissing(ctx, "checkout", "checked out", fi.Path, fi.Hash, err); err != nil {
			return err
		}
		res.Files++
		res.Bytes += n
		return nil
	})
	if err != nil {
		return err
	}
	if err := checkoutEmptyRoots(ctx, ws, target, &res, &made); err != nil {
		return err
	}
	bar.update("checkout", total, total)
	bar.done()
	done = true
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

// checkoutEmptyRoots makes the profile's visible roots that hold no file
// (plan/, summaries/, … of a fresh run) as empty directories: every view
// of the run lists them, though no tree stores them. scratch/, virtual
// mounts and host/ are left out, as their files are.
func checkoutEmptyRoots(ctx context.Context, ws *runs.Workspace, root checkoutTarget, res *checkoutResult, made *[]string) error {
	page := vfs.ListPage{Limit: vfs.DefaultListLimit}
	for {
		ls, more, err := ws.ListPage(ctx, vfs.Root(), 1, page)
		if err != nil {
			return err
		}
		for _, fi := range ls {
			stored := fi.Resource == vfs.ResourceGenerated || fi.Resource == vfs.ResourceMaterialized
			if fi.Kind != vfs.KindDir || fi.Hash != vfs.EmptyTree || !stored || fi.Path.Top() == runs.ScratchRoot {
				continue
			}
			if err := root.Mkdir(filepath.FromSlash(fi.Path.String()), 0o755); err != nil {
				if errors.Is(err, fs.ErrExist) {
					continue // it holds files now: written above, or after the listing began
				}
				return fmt.Errorf("checkout: %w", wserr.FSFault("checkout", fi.Path.String(), err))
			}
			*made = append(*made, fi.Path.String())
			res.Dirs++
		}
		if !more || len(ls) == 0 {
			return nil
		}
		page.After = ls[len(ls)-1].Path
	}
}

// checkoutRoots returns the trees a checkout of run at seq writes: the
// checkpoint's, or the live run's root and its records (tool-args/,
// tool-results/, model-responses/), read in one transaction.
func checkoutRoots(ctx context.Context, svc *runs.Service, cps *checkpoint.Store, runID string, seq int64) ([]cas.Hash, error) {
	if seq != runs.Live {
		cp, err := cps.Get(ctx, nil, runID, seq)
		if err != nil {
			return nil, err
		}
		return []cas.Hash{cp.Root}, nil
	}
	run, err := svc.Run(ctx, runID)
	if err != nil {
		return nil, err
	}
	roots := []cas.Hash{run.Root}
	if !run.Records.IsZero() {
		roots = append(roots, run.Records)
	}
	return roots, nil
}

// checkoutTreeMissing judges err, a tree of roots found missing while
// checkout walked them: the run or checkpoint deleted meanwhile is its
// own not-found error, and the live run moved on from roots (a gc then
// collected a tree only they named) store.conflict, as a file changed
// meanwhile is; with the same roots the store lost the tree, err.
func checkoutTreeMissing(ctx context.Context, svc *runs.Service, cps *checkpoint.Store, runID string, seq int64, roots []cas.Hash, err error) error {
	now, gone := checkoutRoots(context.WithoutCancel(ctx), svc, cps, runID, seq)
	switch {
	case gone != nil:
		return gone
	case !slices.Equal(now, roots):
		return wserr.New(wserr.Conflict, "checkout", "", "the run changed while it was being checked out, and a gc collected the trees it had: try again")
	}
	return err
}

// blobGetter is what checkout needs of the content store.
type blobGetter interface {
	Get(ctx context.Context, h cas.Hash) (io.ReadCloser, error)
}

// checkoutTarget is what checkout needs of DIR: an *os.Root of it.
type checkoutTarget interface {
	Mkdir(name string, perm fs.FileMode) error
	OpenFile(name string, flag int, perm fs.FileMode) (*os.File, error)
}

// checkoutFault codes a failure to make p in checkout's DIR. DIR was new
// or empty and each stored name is made once, so a name already there
// (or a file where p needs a directory) is another stored name that the
// file system takes for p: names that differ only in case are one name
// on a case-insensitive file system, as macOS's and Windows's are by
// default. That is store.conflict, never a merge of the two. A DIR the
// process may not write into is the command line's mistake, as one it may
// not create is (dirError); a full disk or a read-only file system keeps
// its own code, and any other failure is store.internal naming its cause.
func checkoutFault(dir string, p vfs.Path, err error) error {
	switch {
	case errors.Is(err, fs.ErrExist) || errors.Is(err, syscall.ENOTDIR):
		return wserr.New(wserr.Conflict, "checkout", p.String(), "the file system of %s already holds a name it takes for this one: names that differ only in case (or Unicode form) are one name on a case-insensitive file system; check out onto a case-sensitive one", dir)
	case errors.Is(err, fs.ErrPermission):
		return wserr.Wrap(protocol.CodeInvalidArgument, "checkout", filepath.Join(dir, filepath.FromSlash(p.String())), err)
	}
	return wserr.FromFS("checkout", p.String(), err)
}

// checkoutFile streams one stored file into root, refusing to overwrite,
// and adds it to made when it lies directly in root.
func checkoutFile(ctx context.Context, blobs blobGetter, dir string, root checkoutTarget, fi vfs.FileInfo, made *[]string) (int64, error) {
	name := filepath.FromSlash(fi.Path.String())
	r, err := blobs.Get(ctx, fi.Hash)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return 0, checkoutFault(dir, fi.Path, err)
	}
	if fi.Path.Dir().IsRoot() {
		*made = append(*made, fi.Path.String())
	}
	n, err := io.Copy(fileWriter{f}, r)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fileWriteError{cerr}
	}
	if fe, ok := errors.AsType[fileWriteError](err); ok {
		return n, checkoutFault(dir, fi.Path, fe.err)
	}
	if err != nil {
		return n, fmt.Errorf("checkout %s: %w", fi.Path, err)
	}
	return n, nil
}

// fileWriter is a file checkout writes, its write errors told apart from
// the read errors of the content it copies (fileWriteError).
type fileWriter struct{ f *os.File }

func (w fileWriter) Write(b []byte) (int, error) {
	n, err := w.f.Write(b)
	if err != nil {
		err = fileWriteError{err}
	}
	return n, err
}

// fileWriteError is a failure to write a file into checkout's DIR.
type fileWriteError struct{ err error }

func (e fileWriteError) Error() string { return e.err.Error() }
func (e fileWriteError) Unwrap() error { return e.err }

// newEmptyDir makes sure dir is a new or empty directory, creating it (and
// its parents) if needed, and reports whether it created dir. Anything
// else is store.conflict: checkout never writes into a directory that
// holds files.
func newEmptyDir(dir string) (created bool, err error) {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return false, dirError(dir, err)
		}
		return true, nil
	case err != nil:
		if fi, serr := os.Stat(dir); serr == nil && !fi.IsDir() {
			return false, wserr.New(wserr.Conflict, "checkout", dir, "exists and is not a directory")
		}
		return false, dirError(dir, err)
	case len(entries) > 0:
		return false, wserr.New(wserr.Conflict, "checkout", dir, "directory is not empty: checkout only writes into a new or empty directory")
	}
	return false, nil
}

// dirError codes a failure to make or read checkout's DIR: a path that
// cannot be a directory here (a file on the way, no such parent, no
// permission) is the command line's mistake; a full disk or a read-only
// file system is the host's state.
func dirError(dir string, err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.ENOTDIR) {
		return wserr.Wrap(protocol.CodeInvalidArgument, "checkout", dir, err)
	}
	return wserr.FromFS("checkout", dir, err)
}
