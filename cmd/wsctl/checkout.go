package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

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
never merged, and DIR is left empty.

The files are written into a hidden directory (beside a new DIR, named
.DIR.wsstore-checkout-NNN, or inside an empty one, .wsstore-checkout-NNN)
that is put in place once complete, so a checkout killed midway leaves
no half workspace under DIR's name; the next checkout to DIR removes the
hidden directories nothing has changed in for an hour. A checkout that
fails removes its hidden directory and leaves what another program saved
in DIR meanwhile; a name another program made where the files go is
store.conflict.`,
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
	stage, err := newCheckoutStage(dir)
	if err != nil {
		return err
	}
	// A checkout that fails removes its stage, for half a workspace is
	// worse than none. The stage holds only what this checkout made: what
	// another program saved in DIR meanwhile stays.
	defer stage.end()
	var target checkoutTarget = stage.root
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
			res.Dirs++
			return nil
		}
		bar.update("checkout", res.Files, total)
		n, err := checkoutFile(ctx, blobs, dir, target, fi)
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
	if err := checkoutEmptyRoots(ctx, ws, target, &res); err != nil {
		return err
	}
	if err := stage.place(); err != nil {
		return err
	}
	bar.update("checkout", total, total)
	bar.done()
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
func checkoutEmptyRoots(ctx context.Context, ws *runs.Workspace, root checkoutTarget, res *checkoutResult) error {
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

// checkoutFile streams one stored file into root, refusing to overwrite.
func checkoutFile(ctx context.Context, blobs blobGetter, dir string, root checkoutTarget, fi vfs.FileInfo) (int64, error) {
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

// stageMark is in the name of the hidden directory a checkout writes
// into: ".DIR.wsstore-checkout-" and 12 hex digits beside a new DIR,
// ".wsstore-checkout-" and 12 hex digits inside an empty one.
const stageMark = ".wsstore-checkout-"

// staleStage is how long a checkout's hidden directory may go unchanged
// before a checkout to the same DIR takes it for one a killed process
// left.
const staleStage = time.Hour

// checkoutStage is the hidden directory a checkout writes its files
// into, so that a process killed midway (SIGKILL, a power loss) leaves no
// half workspace under DIR's name. For a new DIR it is made beside DIR
// and renamed onto it once complete. For an empty directory already
// there it is made inside it, and its entries are moved up at the end:
// renaming onto DIR would replace the directory a shell may sit in, and
// fails on a mount point. Everything is done through parent, the
// directory opened at the start, so a path replaced by a link meanwhile
// is not followed.
type checkoutStage struct {
	dir    string   // DIR, as the errors name it
	parent *os.Root // DIR's parent for a new DIR, DIR for an empty one
	name   string   // the stage's name in parent
	inside bool     // the stage is in DIR
	root   *os.Root // the stage, which checkout writes into
}

// newCheckoutStage makes sure dir is new or an empty directory and makes
// the hidden directory to write into. A dir holding anything but the
// hidden directories of checkouts killed over staleStage ago is
// store.conflict: checkout never writes into a directory that holds
// files. Those old hidden directories are removed.
func newCheckoutStage(dir string) (*checkoutStage, error) {
	dir = filepath.Clean(dir)
	s := &checkoutStage{dir: dir}
	parent, err := os.OpenRoot(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			return nil, dirError(dir, err)
		}
		if parent, err = os.OpenRoot(filepath.Dir(dir)); err != nil {
			return nil, dirError(dir, err)
		}
		s.parent = parent
		prefix := "." + filepath.Base(dir) + stageMark
		clearOldStages(parent, prefix)
		s.name, err = makeStage(parent, prefix)
	case err != nil:
		if fi, serr := os.Stat(dir); serr == nil && !fi.IsDir() {
			return nil, wserr.New(wserr.Conflict, "checkout", dir, "exists and is not a directory")
		}
		return nil, dirError(dir, err)
	default:
		s.parent, s.inside = parent, true
		empty := true
		if err := eachEntry(parent, func(e fs.DirEntry) bool {
			empty = isOldStage(parent, e, stageMark)
			return empty
		}); err != nil {
			parent.Close()
			return nil, dirError(dir, err)
		}
		if !empty {
			parent.Close()
			return nil, wserr.New(wserr.Conflict, "checkout", dir, "directory is not empty: checkout only writes into a new or empty directory")
		}
		clearOldStages(parent, stageMark)
		s.name, err = makeStage(parent, stageMark)
	}
	if err == nil {
		s.root, err = s.parent.OpenRoot(s.name)
	}
	if err != nil {
		s.end()
		return nil, dirError(dir, err)
	}
	return s, nil
}

// makeStage makes a new directory in parent named prefix and 12 hex
// digits, and returns its name.
func makeStage(parent *os.Root, prefix string) (string, error) {
	for {
		var suffix [6]byte
		_, _ = rand.Read(suffix[:])
		name := prefix + hex.EncodeToString(suffix[:])
		err := parent.Mkdir(name, 0o755)
		if err == nil {
			return name, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", err
		}
	}
}

// place puts the files written into the stage under DIR's name. A name
// another program made there meanwhile is store.conflict, and is left as
// it is: the workspace's top-level entries are all directories, and a
// directory is renamed onto neither a file nor a directory that holds
// anything. Entries already moved up are removed again.
func (s *checkoutStage) place() error {
	_ = s.root.Close() // no directory is renamed while open
	if !s.inside {
		if err := s.parent.Rename(s.name, filepath.Base(s.dir)); err != nil {
			return placeFault(s.dir, err)
		}
		s.name = ""
		return nil
	}
	// The workspace's top-level directories: a few.
	entries, err := readStage(s.parent, s.name)
	if err != nil {
		return placeFault(s.dir, err)
	}
	slices.Sort(entries)
	for i, name := range entries {
		if err := s.parent.Rename(filepath.Join(s.name, name), name); err != nil {
			for _, moved := range entries[:i] {
				_ = s.parent.RemoveAll(moved)
			}
			return placeFault(s.dir, err)
		}
	}
	if err := s.parent.Remove(s.name); err != nil {
		for _, moved := range entries {
			_ = s.parent.RemoveAll(moved)
		}
		return placeFault(s.dir, err)
	}
	s.name = ""
	return nil
}

// readStage returns the names in parent's directory name.
func readStage(parent *os.Root, name string) ([]string, error) {
	f, err := parent.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

// end removes the stage, unless it was put in place, and closes what the
// stage opened.
func (s *checkoutStage) end() {
	if s.root != nil {
		_ = s.root.Close()
	}
	if s.name != "" {
		_ = s.parent.RemoveAll(s.name)
	}
	_ = s.parent.Close()
}

// placeFault codes a failure to put the stage's entries under DIR's
// name: a name another program made in DIR (or made DIR, for a new one)
// while checkout wrote is store.conflict; the rest is coded as a failure
// to make DIR is.
func placeFault(dir string, err error) error {
	if errors.Is(err, fs.ErrExist) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EISDIR) {
		return wserr.New(wserr.Conflict, "checkout", dir, "another program put files there while the checkout wrote its own: check out again into a new or empty directory")
	}
	return dirError(dir, err)
}

// eachEntry calls fn for each entry of root's directory, read a batch at
// a time, until fn returns false.
func eachEntry(root *os.Root, fn func(fs.DirEntry) bool) error {
	f, err := root.Open(".")
	if err != nil {
		return err
	}
	defer f.Close()
	for {
		entries, err := f.ReadDir(256)
		for _, e := range entries {
			if !fn(e) {
				return nil
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// isOldStage reports whether e, an entry of root, is a stage named with
// prefix that nothing has changed in for staleStage: a checkout killed
// while it wrote leaves its stage, and one still writing keeps changing
// it.
func isOldStage(root *os.Root, e fs.DirEntry, prefix string) bool {
	rest, ok := strings.CutPrefix(e.Name(), prefix)
	if !ok || len(rest) != 12 || strings.Trim(rest, "0123456789abcdef") != "" || !e.IsDir() {
		return false
	}
	fi, err := root.Lstat(e.Name())
	// The wall clock, not the store's: it is compared with the file
	// system's times.
	return err == nil && fi.IsDir() && time.Since(fi.ModTime()) > staleStage
}

// clearOldStages removes the old stages named with prefix in root's
// directory. One that cannot be removed stays: it keeps an empty DIR it
// is in from counting as empty, and is harmless beside a new one.
func clearOldStages(root *os.Root, prefix string) {
	_ = eachEntry(root, func(e fs.DirEntry) bool {
		if isOldStage(root, e, prefix) {
			_ = root.RemoveAll(e.Name())
		}
		return true
	})
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
