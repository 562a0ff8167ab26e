package wsstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/internal/mkdirs"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// CheckoutOptions are the options of Store.Checkout; the zero value
// writes without syncing and reports no progress.
type CheckoutOptions struct {
	// Sync syncs every file and directory written to the disk before
	// they are put in place under DIR's name, and the directory that
	// takes them after, with the directories holding the parents made
	// for a new DIR, so that once Checkout returns a power loss leaves
	// the whole workspace in DIR. Without it the files are as durable as
	// the operating system makes them: a power loss in the minute or so
	// after Checkout returns can leave DIR missing, or holding files that
	// are empty or shorter than the stored ones.
	Sync bool
	// Progress, if not nil, is called with the files written so far and
	// their total: before each file, and with done equal to total at the
	// end. The total is counted by walking the trees once more first.
	Progress func(done, total int)
}

// CheckoutResult counts what Checkout wrote.
type CheckoutResult struct {
	Files int   // files written
	Dirs  int   // directories made below DIR
	Bytes int64 // bytes of the files written
}

// Checkout writes run runID's live workspace (seq runs.Live) with its
// records (tool-args/, tool-results/, model-responses/), or its
// checkpoint seq, into dir on the host's file system, which must not
// exist or be an empty directory: it never overwrites anything. scratch/,
// virtual resources and host paths are left out; the profile's other
// visible roots are directories even when they hold no file, as the
// run's listings show them. Every file and directory is made exclusively,
// through an os.Root, so no stored name reaches outside dir, and two
// names the file system takes for one (names that differ only in case,
// on macOS's and Windows's default file systems) are never merged.
//
// The files are written into a hidden directory, beside a new dir
// (".NAME.wsstore-checkout-" and 12 hex digits) or inside an empty one
// (".wsstore-checkout-" and 12 hex digits), put in place once complete:
// a process killed midway leaves no half workspace under dir's name. A
// checkout touches its hidden directory at least every minute as it
// writes, and the next checkout to dir removes the hidden directories
// untouched for an hour. A checkout that fails removes its hidden
// directory, and only that: what another program saved in dir meanwhile
// stays.
//
// Checkout fails with run.not_found or checkpoint.not_found (also when
// deleted while it wrote); store.conflict for a dir that holds anything
// or is not a directory, two names dir's file system takes for one, a
// file changed meanwhile whose content a gc collected, or a name another
// program made where the files go; workspace.invalid_argument for a dir
// that cannot be made or written into (no permission, a file on its
// way); store.disk_full or store.read_only when the disk is full or
// read-only; store.corrupt for content the store lost.
func (s *Store) Checkout(ctx context.Context, runID string, seq int64, dir string, opt CheckoutOptions) (CheckoutResult, error) {
	// The wall clock, not the store's: stages are judged by the file
	// system's times.
	return s.checkout(ctx, runID, seq, dir, opt, checkoutSeams{blobs: s.Blobs, now: time.Now})
}

// checkoutSeams are what Checkout reads from and writes through, which
// tests replace.
type checkoutSeams struct {
	blobs checkoutBlobs
	// wrapDir, if not nil, wraps the hidden directory the files are
	// written into.
	wrapDir func(checkoutDir) checkoutDir
	// now is the clock the hidden directories' times are set by and
	// judged against.
	now func() time.Time
	// syncPath, if not nil, syncs a directory outside the stage (the
	// parents made for a new DIR); syncPathDir otherwise.
	syncPath func(string) error
}

// checkoutBlobs is what checkout needs of the content store.
type checkoutBlobs interface {
	Get(ctx context.Context, h cas.Hash) (io.ReadCloser, error)
}

// checkoutDir is what checkout needs of the hidden directory it writes
// into: an *os.Root of it (rootDir).
type checkoutDir interface {
	Mkdir(name string, perm fs.FileMode) error
	OpenFile(name string, flag int, perm fs.FileMode) (checkoutFile, error)
	// SyncDir syncs directory name ("." the hidden directory itself).
	SyncDir(name string) error
}

// checkoutFile is a file checkout writes.
type checkoutFile interface {
	io.Writer
	Sync() error
	Close() error
}

// rootDir is a checkoutDir over an *os.Root.
type rootDir struct{ root *os.Root }

func (r rootDir) Mkdir(name string, perm fs.FileMode) error { return r.root.Mkdir(name, perm) }

func (r rootDir) OpenFile(name string, flag int, perm fs.FileMode) (checkoutFile, error) {
	f, err := r.root.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err // not a nil *os.File in an interface
	}
	return f, nil
}

func (r rootDir) SyncDir(name string) error { return syncDir(r.root, name) }

// syncPathDir syncs the directory at path p.
func syncPathDir(p string) error { return syncOpened(os.Open(p)) }

// syncDir syncs directory name of root.
func syncDir(root *os.Root, name string) error { return syncOpened(root.Open(name)) }

// syncOpened syncs and closes f, opened with err.
func syncOpened(f *os.File, err error) error {
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// checkoutWalk is one checkout's walk: the run, live or at a checkpoint,
// and the trees it writes.
type checkoutWalk struct {
	s     *Store
	runID string
	seq   int64
	roots []cas.Hash
}

func (s *Store) checkout(ctx context.Context, runID string, seq int64, dir string, opt CheckoutOptions, seams checkoutSeams) (CheckoutResult, error) {
	if dir == "" {
		return CheckoutResult{}, wserr.New(wserr.InvalidArgument, "checkout", "", "empty directory name")
	}
	// The trees of one moment: immutable, so walked page by page after
	// the read that found them, never listed whole.
	roots, err := s.checkoutRoots(ctx, runID, seq)
	if err != nil {
		return CheckoutResult{}, err
	}
	w := &checkoutWalk{s: s, runID: runID, seq: seq, roots: roots}
	total := 0
	if opt.Progress != nil {
		if err := w.each(ctx, func(fi vfs.FileInfo) error {
			if fi.Kind != vfs.KindDir {
				total++
			}
			return nil
		}); err != nil {
			return CheckoutResult{}, err
		}
	}
	stage, err := newCheckoutStage(dir, seams.now)
	if err != nil {
		return CheckoutResult{}, err
	}
	stage.syncPath = syncPathDir
	if seams.syncPath != nil {
		stage.syncPath = seams.syncPath
	}
	// A checkout that fails removes its stage, for half a workspace is
	// worse than none. The stage holds only what this checkout made: what
	// another program saved in DIR meanwhile stays.
	defer stage.end()
	var target checkoutDir = rootDir{stage.root}
	if seams.wrapDir != nil {
		target = seams.wrapDir(target)
	}
	// With opt.Sync, open holds the directories being filled, the stage
	// first, so that each is synced once the walk leaves it: its entries
	// are all made then. The walk is in pre-order, so an entry's parent
	// is on it.
	open := []string{"."}
	leave := func(parent string) error {
		for len(open) > 1 && open[len(open)-1] != parent {
			if err := target.SyncDir(open[len(open)-1]); err != nil {
				return wserr.FromFS("checkout", filepath.ToSlash(open[len(open)-1]), err)
			}
			open = open[:len(open)-1]
		}
		return nil
	}
	var res CheckoutResult
	ws := w.workspace()
	err = w.each(ctx, func(fi vfs.FileInfo) error {
		stage.keepFresh()
		name := filepath.FromSlash(fi.Path.String())
		if opt.Sync {
			if err := leave(filepath.FromSlash(path.Dir(fi.Path.String()))); err != nil {
				return err
			}
		}
		if fi.Kind == vfs.KindDir {
			// Each directory is made once, after its parent (the walk is
			// in pre-order), so one already there is another stored name
			// the file system takes for this one: never merged into it.
			if err := target.Mkdir(name, 0o755); err != nil {
				return checkoutFault(dir, fi.Path, err)
			}
			res.Dirs++
			if opt.Sync {
				open = append(open, name)
			}
			return nil
		}
		if opt.Progress != nil {
			opt.Progress(res.Files, total)
		}
		n, err := checkOutFile(ctx, seams.blobs, dir, target, stage, fi, opt.Sync)
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
		return CheckoutResult{}, err
	}
	if err := checkoutEmptyRoots(ctx, ws, target, opt.Sync, &res); err != nil {
		return CheckoutResult{}, err
	}
	if opt.Sync {
		if err := leave("."); err != nil {
			return CheckoutResult{}, err
		}
		if err := target.SyncDir("."); err != nil {
			return CheckoutResult{}, wserr.FromFS("checkout", dir, err)
		}
	}
	if err := stage.place(opt.Sync); err != nil {
		return CheckoutResult{}, err
	}
	if opt.Progress != nil {
		opt.Progress(total, total)
	}
	return res, nil
}

// workspace returns the host's view of the run checked out.
func (w *checkoutWalk) workspace() *runs.Workspace {
	if w.seq == runs.Live {
		return w.s.Runs.Workspace(w.runID, runs.HostScope)
	}
	return w.s.Runs.WorkspaceAt(w.runID, w.seq, runs.HostScope)
}

// checkoutDepth is a List depth that reaches every level of any real
// tree.
const checkoutDepth = 1 << 30

// each calls fn for every entry checked out, in pre-order: stored files
// and directories, not scratch/ (never exported, whether the run is
// still active or kept it after failing).
func (w *checkoutWalk) each(ctx context.Context, fn func(vfs.FileInfo) error) error {
	for _, root := range w.roots {
		var fnErr error // fn's own, judged by fn (ContentMissing)
		err := w.s.Trees.ListFunc(ctx, nil, root, vfs.Root(), checkoutDepth, vfs.Path{}, func(l vfs.Listed) error {
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
			err = w.treeMissing(ctx, err)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// checkoutEmptyRoots makes the profile's visible roots that hold no file
// (plan/, summaries/, … of a fresh run) as empty directories: every view
// of the run lists them, though no tree stores them. scratch/, virtual
// mounts and host/ are left out, as their files are.
func checkoutEmptyRoots(ctx context.Context, ws *runs.Workspace, root checkoutDir, sync bool, res *CheckoutResult) error {
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
			name := filepath.FromSlash(fi.Path.String())
			if err := root.Mkdir(name, 0o755); err != nil {
				if errors.Is(err, fs.ErrExist) {
					continue // it holds files now: written above, or after the listing began
				}
				return fmt.Errorf("checkout: %w", wserr.FSFault("checkout", fi.Path.String(), err))
			}
			if sync {
				if err := root.SyncDir(name); err != nil {
					return wserr.FromFS("checkout", fi.Path.String(), err)
				}
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
func (s *Store) checkoutRoots(ctx context.Context, runID string, seq int64) ([]cas.Hash, error) {
	if seq != runs.Live {
		cp, err := s.Checkpoints.Get(ctx, nil, runID, seq)
		if err != nil {
			return nil, err
		}
		return []cas.Hash{cp.Root}, nil
	}
	run, err := s.Runs.Run(ctx, runID)
	if err != nil {
		return nil, err
	}
	roots := []cas.Hash{run.Root}
	if !run.Records.IsZero() {
		roots = append(roots, run.Records)
	}
	return roots, nil
}

// treeMissing judges err, a tree of the checkout's roots found missing
// while they were walked: the run or checkpoint deleted meanwhile is its
// own not-found error, and the live run moved on from the roots (a gc
// then collected a tree only they named) store.conflict, as a file
// changed meanwhile is; with the same roots the store lost the tree, err.
func (w *checkoutWalk) treeMissing(ctx context.Context, err error) error {
	now, gone := w.s.checkoutRoots(context.WithoutCancel(ctx), w.runID, w.seq)
	switch {
	case gone != nil:
		return gone
	case !slices.Equal(now, w.roots):
		return wserr.New(wserr.Conflict, "checkout", "", "the run changed while it was being checked out, and a gc collected the trees it had: try again")
	}
	return err
}

// checkoutFault codes a failure to make p in checkout's DIR. DIR was new
// or empty and each stored name is made once, so a name already there
// (or a file where p needs a directory) is another stored name that the
// file system takes for p: names that differ only in case are one name
// on a case-insensitive file system, as macOS's and Windows's are by
// default. That is store.conflict, never a merge of the two. A DIR the
// process may not write into is the caller's mistake, as one it may not
// create is (dirError); a full disk or a read-only file system keeps its
// own code, and any other failure is store.internal naming its cause.
func checkoutFault(dir string, p vfs.Path, err error) error {
	switch {
	case errors.Is(err, fs.ErrExist) || errors.Is(err, syscall.ENOTDIR):
		return wserr.New(wserr.Conflict, "checkout", p.String(), "the file system of %s already holds a name it takes for this one: names that differ only in case (or Unicode form) are one name on a case-insensitive file system; check out onto a case-sensitive one", dir)
	case errors.Is(err, fs.ErrPermission):
		return wserr.Wrap(wserr.InvalidArgument, "checkout", filepath.Join(dir, filepath.FromSlash(p.String())), err)
	}
	return wserr.FromFS("checkout", p.String(), err)
}

// checkOutFile streams one stored file into root, refusing to overwrite,
// and with sync syncs it.
func checkOutFile(ctx context.Context, blobs checkoutBlobs, dir string, root checkoutDir, stage *checkoutStage, fi vfs.FileInfo, sync bool) (int64, error) {
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
	n, err := io.Copy(fileWriter{f, stage}, r)
	if err == nil && sync {
		if serr := f.Sync(); serr != nil {
			err = fileWriteError{serr}
		}
	}
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
// the read errors of the content it copies (fileWriteError). Each write
// keeps the stage fresh, however long one file takes.
type fileWriter struct {
	f     checkoutFile
	stage *checkoutStage
}

func (w fileWriter) Write(b []byte) (int, error) {
	w.stage.keepFresh()
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

// staleStage is how long a checkout's hidden directory may go untouched
// before a checkout to the same DIR takes it for one a killed process
// left.
const staleStage = time.Hour

// touchStage is how often a checkout touches its hidden directory as it
// writes: far less than staleStage, so a live checkout's is never taken
// for a killed one's, whatever it writes (the directory's time changes
// by itself only as entries are made right in it).
const touchStage = time.Minute

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
	dir     string           // DIR, as the errors name it
	parent  *os.Root         // DIR's parent for a new DIR, DIR for an empty one
	name    string           // the stage's name in parent
	inside  bool             // the stage is in DIR
	root    *os.Root         // the stage, which checkout writes into
	now     func() time.Time // the clock stages are touched and judged by
	touched time.Time        // when the stage was last touched
	// made are the directories made for a new DIR's parent, outermost
	// first, whose entries a sync syncs too.
	made     []string
	syncPath func(string) error // syncs a directory outside the stage
}

// newCheckoutStage makes sure dir is new or an empty directory and makes
// the hidden directory to write into. A dir holding anything but the
// hidden directories of checkouts killed over staleStage ago is
// store.conflict: checkout never writes into a directory that holds
// files. Those old hidden directories are removed.
func newCheckoutStage(dir string, now func() time.Time) (*checkoutStage, error) {
	dir = filepath.Clean(dir)
	s := &checkoutStage{dir: dir, now: now}
	parent, err := os.OpenRoot(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		s.made = mkdirs.Missing(filepath.Dir(dir))
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			return nil, dirError(dir, err)
		}
		if parent, err = os.OpenRoot(filepath.Dir(dir)); err != nil {
			return nil, dirError(dir, err)
		}
		s.parent = parent
		prefix := "." + filepath.Base(dir) + stageMark
		s.clearOld(prefix)
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
			empty = s.isOld(e, stageMark)
			return empty
		}); err != nil {
			parent.Close()
			return nil, dirError(dir, err)
		}
		if !empty {
			parent.Close()
			return nil, wserr.New(wserr.Conflict, "checkout", dir, "directory is not empty: checkout only writes into a new or empty directory")
		}
		s.clearOld(stageMark)
		s.name, err = makeStage(parent, stageMark)
	}
	if err == nil {
		s.root, err = s.parent.OpenRoot(s.name)
	}
	if err != nil {
		s.end()
		return nil, dirError(dir, err)
	}
	s.keepFresh() // the stage's time is the clock's from the start
	return s, nil
}

// keepFresh sets the stage's time to now if it was last set touchStage
// ago or more, so that no checkout to the same DIR takes it for one a
// killed process left while this one writes. A failure is let pass: the
// stage was made by this process a moment ago.
func (s *checkoutStage) keepFresh() {
	now := s.now()
	if !s.touched.IsZero() && now.Sub(s.touched) < touchStage {
		return
	}
	s.touched = now
	_ = s.parent.Chtimes(s.name, now, now)
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

// place puts the files written into the stage under DIR's name, and with
// sync syncs the directory that takes them. A name another program made
// there meanwhile is store.conflict, and is left as it is: the
// workspace's top-level entries are all directories, and a directory is
// renamed onto neither a file nor a directory that holds anything.
// Entries already moved up are removed again.
func (s *checkoutStage) place(sync bool) error {
	_ = s.root.Close() // no directory is renamed while open
	if !s.inside {
		base := filepath.Base(s.dir)
		if err := s.parent.Rename(s.name, base); err != nil {
			return placeFault(s.dir, err)
		}
		s.name = ""
		if sync {
			err := syncDir(s.parent, ".")
			// Each directory made for DIR's parent is an entry of its own
			// parent, which a power loss could lose as well.
			for _, d := range s.made {
				if err == nil {
					err = s.syncPath(filepath.Dir(d))
				}
			}
			if err != nil {
				_ = s.parent.RemoveAll(base)
				return dirError(s.dir, err)
			}
		}
		return nil
	}
	// The workspace's top-level directories: a few.
	entries, err := readStage(s.parent, s.name)
	if err != nil {
		return placeFault(s.dir, err)
	}
	slices.Sort(entries)
	removeMoved := func(moved []string) {
		for _, name := range moved {
			_ = s.parent.RemoveAll(name)
		}
	}
	for i, name := range entries {
		if err := s.parent.Rename(filepath.Join(s.name, name), name); err != nil {
			removeMoved(entries[:i])
			return placeFault(s.dir, err)
		}
	}
	if err := s.parent.Remove(s.name); err != nil {
		removeMoved(entries)
		return placeFault(s.dir, err)
	}
	s.name = ""
	if sync {
		if err := syncDir(s.parent, "."); err != nil {
			removeMoved(entries)
			return dirError(s.dir, err)
		}
	}
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

// end removes the stage, unless it was put in place, with the directories
// made for a new DIR's parent, and closes what the stage opened.
func (s *checkoutStage) end() {
	if s.root != nil {
		_ = s.root.Close()
	}
	if s.name != "" {
		_ = s.parent.RemoveAll(s.name)
	}
	_ = s.parent.Close()
	// A DIR put in place keeps the innermost of them from being removed.
	mkdirs.RemoveEmpty(s.made)
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

// isOld reports whether e, an entry of the stage's parent, is a stage
// named with prefix untouched for staleStage: a checkout killed while it
// wrote leaves its stage, and one still writing keeps touching it.
func (s *checkoutStage) isOld(e fs.DirEntry, prefix string) bool {
	rest, ok := strings.CutPrefix(e.Name(), prefix)
	if !ok || len(rest) != 12 || strings.Trim(rest, "0123456789abcdef") != "" || !e.IsDir() {
		return false
	}
	fi, err := s.parent.Lstat(e.Name())
	return err == nil && fi.IsDir() && s.now().Sub(fi.ModTime()) > staleStage
}

// clearOld removes the old stages named with prefix in the parent's
// directory. One that cannot be removed stays: it keeps an empty DIR it
// is in from counting as empty, and is harmless beside a new one.
func (s *checkoutStage) clearOld(prefix string) {
	_ = eachEntry(s.parent, func(e fs.DirEntry) bool {
		if s.isOld(e, prefix) {
			_ = s.parent.RemoveAll(e.Name())
		}
		return true
	})
}

// dirError codes a failure to make or read checkout's DIR: a path that
// cannot be a directory here (a file on the way, no such parent, no
// permission) is the caller's mistake; a full disk or a read-only file
// system is the host's state.
func dirError(dir string, err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.ENOTDIR) {
		return wserr.Wrap(wserr.InvalidArgument, "checkout", dir, err)
	}
	return wserr.FromFS("checkout", dir, err)
}
