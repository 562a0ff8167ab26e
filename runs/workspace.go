package runs

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"slices"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/capread"
	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// Scope says whose view of a workspace an operation takes.
type Scope int

const (
	// ModelScope enforces the run's profile: only visible roots (and
	// virtual mounts) can be seen, only writable roots changed. Agent tools
	// use it.
	ModelScope Scope = iota
	// HostScope sees every path, input/ and runtime files included; writes
	// are still limited to the profile's writable roots. The host and wsctl
	// use it.
	HostScope
)

// Workspace is one run's workspace as agent tools see it: a vfs.WriteFS
// and vfs.SearchFS over the run's stored files and the virtual mounts. A
// Workspace at a checkpoint is read-only.
type Workspace struct {
	s     *Service
	runID string
	scope Scope
	at    int64 // checkpoint seq, when view
	view  bool  // a checkpoint's view (WorkspaceAt), else the live workspace
}

var (
	_ vfs.WriteFS  = (*Workspace)(nil)
	_ vfs.SearchFS = (*Workspace)(nil)
)

// Workspace returns the live workspace of a run in the given scope. It does
// not check that the run exists; operations fail with run.not_found.
func (s *Service) Workspace(runID string, scope Scope) *Workspace {
	return &Workspace{s: s, runID: runID, scope: scope}
}

// WorkspaceAt returns a read-only view of the run's workspace at checkpoint
// seq. Checkpoints count from 1: with a seq below 1 (runs.Live included:
// the live workspace is Workspace's) reads of the stored workspace fail
// with workspace.invalid_argument (the virtual mounts, which no
// checkpoint holds, still answer) and writes with
// workspace.path_not_writable.
func (s *Service) WorkspaceAt(runID string, seq int64, scope Scope) *Workspace {
	return &Workspace{s: s, runID: runID, scope: scope, at: seq, view: true}
}

// live reports whether w is the run's live workspace.
func (w *Workspace) live() bool { return !w.view }

// RunID returns the run this workspace belongs to.
func (w *Workspace) RunID() string { return w.runID }

// root returns the tree the workspace reads: the run's live root or the
// checkpoint's.
func (w *Workspace) root(ctx context.Context, tx *index.Tx) (Run, cas.Hash, error) {
	run, err := findRun(ctx, tx, w.runID)
	if err != nil {
		return Run{}, cas.Hash{}, err
	}
	if w.live() {
		return run, run.Root, nil
	}
	cp, err := w.s.checkpoints.Get(ctx, tx, w.runID, w.at)
	if err != nil {
		return Run{}, cas.Hash{}, err
	}
	return run, cp.Root, nil
}

// checkVisible fails with workspace.path_not_visible if the scope may not
// see p.
func (w *Workspace) checkVisible(op string, run Run, p vfs.Path) error {
	if w.scope == HostScope || p.IsRoot() {
		return nil
	}
	if !run.Profile.visible(p.Top()) {
		if p.Top() == HostRoot && len(run.Profile.AllowPaths) > 0 {
			return hostNotStored(op, !w.live(), p)
		}
		return notVisible(op, run, p)
	}
	return nil
}

// hostNotStored is the error for a host/ path where only stored files
// count: a checkpoint view, which holds no host directory, or an
// operation on stored files alone (apply).
func hostNotStored(op string, view bool, p vfs.Path) error {
	if view {
		return wserr.New(wserr.FileNotFound, op, p.String(), "a checkpoint holds no host/: host directories are not versioned; read the live workspace")
	}
	return wserr.New(wserr.InvalidPath, op, p.String(), "host/ files are the host's, not stored: %s works on stored files only; change host files one by one with write, patch or delete", op)
}

// notVisible is the error for p outside the run's visible roots: it names
// the root p is below, or p itself at the top.
func notVisible(op string, run Run, p vfs.Path) error {
	top := p.Top() + "/"
	if p.Dir().IsRoot() {
		top = p.Top()
	}
	return wserr.New(wserr.PathNotVisible, op, p.String(), "%s is not visible to this run's profile (visible: %v)", top, run.Profile.VisibleRoots)
}

// checkWritable fails unless the run is running and p is in a writable
// root.
func (w *Workspace) checkWritable(op string, run Run, p vfs.Path) error {
	if !w.live() {
		return wserr.New(wserr.PathNotWritable, op, p.String(), "a checkpoint is read-only; roll back to it to change it")
	}
	if err := w.checkVisible(op, run, p); err != nil {
		return err
	}
	if p.Top() == InputRoot {
		return wserr.New(wserr.PathNotWritable, op, p.String(), "input/ is the run's immutable input")
	}
	if slices.Contains(ReservedRoots, p.Top()) {
		return wserr.New(wserr.PathNotWritable, op, p.String(), "%s is the run's runtime record: the store writes it, never a workspace change", p.Top())
	}
	if !run.Profile.writable(p.Top()) || p.Dir().IsRoot() {
		return wserr.New(wserr.PathNotWritable, op, p.String(), "only files below %v may be written", run.Profile.WritableRoots)
	}
	if run.Status != Running {
		return wserr.New(wserr.InvalidState, op, p.String(), "run %s is %s, not running", run.ID, run.Status)
	}
	return nil
}

func (w *Workspace) info(p vfs.Path, e vfs.Entry, run Run) vfs.FileInfo {
	res := vfs.ResourceGenerated
	if p.Top() == InputRoot {
		res = vfs.ResourceMaterialized
	}
	fi := vfs.FileInfo{Path: p, Kind: e.Kind, Size: e.Size, Hash: e.Hash, Resource: res}
	// Only a file is written, patched or removed: a directory, a root's
	// own entry included, is not writable, and nothing is while the run
	// is not running (checkWritable).
	fi.Writable = w.live() && run.Status == Running && p.Top() != InputRoot && run.Profile.writable(p.Top()) && e.Kind == vfs.KindFile &&
		!p.IsRoot() && !p.Dir().IsRoot()
	return fi
}

// Stat describes p. It fails with workspace.file_not_found,
// workspace.path_not_visible, or the codes of virtual resources.
func (w *Workspace) Stat(ctx context.Context, p vfs.Path) (vfs.FileInfo, error) {
	if t, ok, err := w.host(ctx, "stat", p); ok {
		if err != nil {
			return vfs.FileInfo{}, err
		}
		defer t.close()
		return t.stat(ctx, (*vfs.HostFS).Stat)
	}
	if _, _, _, ok := w.s.virtual.Match(p); ok {
		return w.s.virtual.Stat(ctx, p)
	}
	var fi vfs.FileInfo
	err := w.s.db.View(ctx, func(tx *index.Tx) error {
		run, root, err := w.root(ctx, tx)
		if err != nil {
			return err
		}
		if v, ok, err := w.runtime(ctx, tx, run, p); ok {
			if err != nil {
				return err
			}
			fi, err = w.runtimeStat(ctx, tx, v, p)
			return err
		}
		if err := w.checkVisible("stat", run, p); err != nil {
			return err
		}
		e, err := w.lookup(ctx, tx, run, root, p)
		if err != nil {
			return err
		}
		fi = w.info(p, e, run)
		if p.IsRoot() && w.scope == ModelScope {
			return w.visibleRoot(ctx, tx, run, root, &fi)
		}
		return nil
	})
	if w.besideVirtual(p, err) {
		return w.s.virtual.Stat(ctx, p)
	}
	return fi, err
}

// StatNoRead is Stat reading no host file: a file of a host path has a
// zero Hash (its Size is what the host reports), for a caller that reads
// the file next, as a download does (Open hashes a host file as it opens
// it). Every other path is described as Stat describes it. It fails like
// Stat.
func (w *Workspace) StatNoRead(ctx context.Context, p vfs.Path) (vfs.FileInfo, error) {
	if t, ok, err := w.host(ctx, "stat", p); ok {
		if err != nil {
			return vfs.FileInfo{}, err
		}
		defer t.close()
		return t.stat(ctx, (*vfs.HostFS).StatNoRead)
	}
	return w.Stat(ctx, p)
}

// visibleRoot makes fi, the stored root's, describe the root the model
// scope sees: the roots it may not see (input/) are not counted, and the
// stored root's address, which names them, is not given. It reads the
// root's own entries, never below them.
func (w *Workspace) visibleRoot(ctx context.Context, tx *index.Tx, run Run, root cas.Hash, fi *vfs.FileInfo) error {
	fi.Hash = cas.Hash{}
	return w.s.trees.ListFunc(ctx, tx, root, vfs.Root(), 1, vfs.Path{}, func(l vfs.Listed) error {
		if !run.Profile.visible(l.Path.Top()) {
			fi.Size -= l.Size
		}
		return nil
	})
}

// emptyDir is the entry of a root the tree does not hold (emptyRoot): a
// directory with nothing below it, whose address is the empty tree's.
var emptyDir = vfs.Entry{Kind: vfs.KindDir, Hash: vfs.EmptyTree}

// emptyRoot reports whether err, a lookup's of p in the workspace's tree,
// only says that p is one of the profile's visible roots that holds no
// file. A tree keeps no empty directory, but those roots always exist
// (seed 000 §13): an agent's first listing shows where it may write, and
// a stat, list or search of an empty one answers as for any empty
// directory. Nothing is stored for them. A root a virtual mount reaches
// is the mount's to describe (besideVirtual).
func (w *Workspace) emptyRoot(run Run, p vfs.Path, err error) bool {
	return wserr.Is(err, wserr.FileNotFound) && !p.IsRoot() && p.Dir().IsRoot() && w.standing(run, p.Top())
}

// standing reports whether the root named top always exists in the
// workspace's views (emptyRoot): one the profile shows the model, that no
// virtual mount reaches.
func (w *Workspace) standing(run Run, top string) bool {
	if !run.Profile.visible(top) {
		return false
	}
	for _, q := range w.s.virtual.Prefixes() {
		if q.Top() == top {
			return false
		}
	}
	return true
}

// lookup is the tree's entry of p in root, a standing root the tree does
// not hold an empty directory (emptyRoot).
func (w *Workspace) lookup(ctx context.Context, tx *index.Tx, run Run, root cas.Hash, p vfs.Path) (vfs.Entry, error) {
	e, err := w.s.trees.Lookup(ctx, tx, root, p)
	if w.emptyRoot(run, p, err) {
		return emptyDir, nil
	}
	return e, err
}

// emptyRoots returns, for a listing of the root, the standing roots that
// root does not hold, as empty directories, those page admits in path
// order. It reads the root's own entries, never below them.
func (w *Workspace) emptyRoots(ctx context.Context, tx *index.Tx, run Run, root cas.Hash, page vfs.ListPage) ([]vfs.FileInfo, error) {
	es, err := w.s.trees.Entries(ctx, tx, root)
	if err != nil {
		return nil, err
	}
	var out []vfs.FileInfo
	for _, r := range run.Profile.VisibleRoots {
		held := slices.ContainsFunc(es, func(e vfs.Entry) bool { return e.Name == r })
		if p := vfs.MustPath(r); !held && w.standing(run, r) && page.Admits(p) {
			out = append(out, w.info(p, emptyDir, run))
		}
	}
	sortInfos(out)
	return out, nil
}

// Read returns p's content, whole or a line or character range, at most
// MaxReadBytes of it whatever the resource (stored, host, virtual or
// derived). It fails with workspace.file_not_found,
// workspace.path_is_directory, workspace.path_not_visible,
// workspace.invalid_line_range, workspace.invalid_char_range,
// workspace.not_text, or workspace.size_limit_exceeded for a whole read of
// a larger file.
func (w *Workspace) Read(ctx context.Context, p vfs.Path, opt vfs.ReadOptions) (vfs.ReadResult, error) {
	if t, ok, err := w.host(ctx, "read", p); ok {
		if err != nil {
			return vfs.ReadResult{}, err
		}
		defer t.close()
		return t.read(ctx, opt)
	}
	if _, _, _, ok := w.s.virtual.Match(p); ok {
		return w.readVirtual(ctx, p, opt)
	}
	fi, gen, err := w.lookupFile(ctx, "read", p)
	if w.besideVirtual(p, err) {
		return w.readVirtual(ctx, p, opt)
	}
	if err != nil {
		return vfs.ReadResult{}, err
	}
	var res vfs.ReadResult
	if gen != nil {
		res, err = gen.read(ctx, p, opt)
	} else {
		res, err = w.readStored(ctx, p, fi, opt)
	}
	if err != nil {
		return vfs.ReadResult{}, err
	}
	res.Info = fi
	return res, nil
}

// readVirtual reads the virtual resource p whole from its provider and
// returns what opt asks of it as readHeld does, so a virtual resource is
// held to MaxReadBytes like a stored or host file.
func (w *Workspace) readVirtual(ctx context.Context, p vfs.Path, opt vfs.ReadOptions) (vfs.ReadResult, error) {
	whole, err := w.s.virtual.Read(ctx, p, vfs.ReadOptions{})
	if err != nil {
		return vfs.ReadResult{}, err
	}
	res, err := readHeld(p, whole.Content, opt)
	if err != nil {
		return vfs.ReadResult{}, err
	}
	res.Info = whole.Info
	return res, nil
}

// readHeld is ReadRange of content already in memory (a virtual
// resource), with the limit every
// read keeps: over MaxReadBytes a whole read fails with
// workspace.size_limit_exceeded and a range is cut to what fits.
func readHeld(p vfs.Path, content []byte, opt vfs.ReadOptions) (vfs.ReadResult, error) {
	return vfs.ReadRangeFrom(p, bytes.NewReader(content), int64(len(content)), opt, MaxReadBytes)
}

// lookupFile finds the file p in the workspace's tree, or among the
// runtime files (gen then holds a derived one's content). It fails with
// workspace.file_not_found, workspace.path_is_directory or
// workspace.path_not_visible.
func (w *Workspace) lookupFile(ctx context.Context, op string, p vfs.Path) (fi vfs.FileInfo, gen *derived, err error) {
	err = w.s.db.View(ctx, func(tx *index.Tx) error {
		run, root, err := w.root(ctx, tx)
		if err != nil {
			return err
		}
		if v, ok, err := w.runtime(ctx, tx, run, p); ok {
			if err != nil {
				return err
			}
			if fi, err = w.runtimeStat(ctx, tx, v, p); err != nil {
				return err
			}
			if fi.Kind == vfs.KindDir {
				return wserr.New(wserr.PathIsDirectory, op, p.String(), "is a directory; list it instead")
			}
			gen = v.gen
			return nil
		}
		if err := w.checkVisible(op, run, p); err != nil {
			return err
		}
		e, err := w.lookup(ctx, tx, run, root, p)
		if err != nil {
			return err
		}
		if e.Kind == vfs.KindDir {
			return wserr.New(wserr.PathIsDirectory, op, p.String(), "is a directory; list it instead")
		}
		fi = w.info(p, e, run)
		return nil
	})
	return fi, gen, err
}

// List returns what lies below p to depth levels, in path order compared
// segment by segment. At the root, the model scope sees only visible roots;
// every scope also sees the virtual mounts below p (at the root or in a
// stored directory above them) and, to depth, what lies below them. It
// holds the whole listing: ListPage reads one of any size a page
// at a time.
func (w *Workspace) List(ctx context.Context, p vfs.Path, depth int) ([]vfs.FileInfo, error) {
	out, _, err := w.ListPage(ctx, p, depth, vfs.ListPage{})
	return out, err
}

// ListPage returns one page of List's entries, and whether entries remain
// after it (ask again with the last entry's path as page.After). A page
// reads the stored and host directories on the way to its cursor and
// those it lists, not the subtrees before it.
func (w *Workspace) ListPage(ctx context.Context, p vfs.Path, depth int, page vfs.ListPage) ([]vfs.FileInfo, bool, error) {
	if err := page.Check("list", p); err != nil {
		return nil, false, err
	}
	if depth <= 0 {
		depth = 1 // as every listing below takes it; host/'s own entries too
	}
	if t, ok, err := w.host(ctx, "list", p); ok {
		if err != nil {
			return nil, false, err
		}
		defer t.close()
		return t.listPage(ctx, w, depth, page)
	}
	if _, _, _, ok := w.s.virtual.Match(p); ok {
		vl, err := w.s.virtual.List(ctx, p, depth)
		if err != nil {
			return nil, false, err
		}
		out, more := page.Filter(vl)
		return out, more, nil
	}
	// Each source gives at most one entry past the page: the first
	// page.Limit of all of them together are then the page.
	full := func(out []vfs.FileInfo) bool { return page.Limit > 0 && len(out) > page.Limit }
	var out []vfs.FileInfo
	merged := false
	err := w.s.db.View(ctx, func(tx *index.Tx) error {
		run, root, err := w.root(ctx, tx)
		if err != nil {
			return err
		}
		if v, ok, err := w.runtime(ctx, tx, run, p); ok {
			if err != nil {
				return err
			}
			out, err = w.runtimeList(ctx, tx, v, p, depth, page)
			merged = true
			return err
		}
		if err := w.checkVisible("list", run, p); err != nil {
			return err
		}
		err = w.s.trees.ListFunc(ctx, tx, root, p, depth, page.After, func(l vfs.Listed) error {
			if w.checkVisible("list", run, l.Path) != nil {
				if l.Kind == vfs.KindDir {
					return fs.SkipDir // nothing below it is visible either
				}
				return nil
			}
			out = append(out, w.info(l.Path, l.Entry, run))
			if full(out) {
				return fs.SkipAll
			}
			return nil
		})
		if w.emptyRoot(run, p, err) {
			err = nil // nothing below it
		}
		if err != nil {
			return err
		}
		if p.IsRoot() {
			empty, err := w.emptyRoots(ctx, tx, run, root, page)
			if err != nil {
				return err
			}
			out, merged = append(out, empty...), merged || len(empty) > 0
		}
		if p.IsRoot() && w.live() && len(run.Profile.AllowPaths) > 0 {
			// Only the directories that reach the allowed host paths:
			// what those hold is listed by naming them, so a listing of
			// the whole workspace (show, checkout) never walks a host
			// directory.
			out, merged = append(out, page.Past(hostDirs(run.Profile, depth))...), true
		}
		if p.IsRoot() && w.scope == HostScope {
			rt, err := w.runtimeRoots(ctx, tx, run, depth, page)
			if err != nil {
				return err
			}
			out, merged = append(out, rt...), true
		}
		return nil
	})
	if w.besideVirtual(p, err) {
		vl, err := w.s.virtual.List(ctx, p, depth)
		if err != nil {
			return nil, false, err
		}
		out, more := page.Filter(vl)
		return out, more, nil
	}
	if err != nil {
		return nil, false, err
	}
	if len(w.mountsBelow(p)) > 0 {
		// The mounts below p and, as deep as asked, what lies below
		// them, as Stat finds them; a stored entry of the same name (a
		// directory both hold) wins.
		vl, err := w.s.virtual.List(ctx, p, depth)
		if err != nil {
			return nil, false, err
		}
		vl = page.Past(vl)
		stored := make(map[vfs.Path]bool, len(out))
		for _, fi := range out {
			stored[fi.Path] = true
		}
		for _, fi := range vl {
			if !stored[fi.Path] {
				out = append(out, fi)
			}
		}
		merged = true
	}
	if merged {
		sortInfos(out)
	}
	if full(out) {
		return out[:page.Limit], true, nil
	}
	return out, false, nil
}

// besideVirtual reports whether a stored-tree operation on p that failed
// with err should be answered by the virtual resources instead: p is not
// served by a provider (Match handles those) but shares its top-level
// directory with a mounted prefix, like chat/ above chat/history.tail.md,
// and the stored tree has nothing the scope may see there. The directories
// above a prefix and the missing paths beside it are then the virtual
// resources' to describe, as the root listing shows them.
func (w *Workspace) besideVirtual(p vfs.Path, err error) bool {
	switch {
	case err == nil || p.IsRoot():
		return false
	case wserr.Is(err, wserr.PathNotVisible):
		// input/ stays hidden whatever is mounted beside it.
		if p.Top() == InputRoot {
			return false
		}
	case !wserr.Is(err, wserr.FileNotFound):
		return false
	}
	for _, q := range w.s.virtual.Prefixes() {
		if q.Top() == p.Top() {
			return true
		}
	}
	return false
}

// Write replaces or appends to p's content. With opt.ExpectedHash set it
// fails with workspace.write_stale_file unless p's current hash (zero for a
// missing file) matches. It fails with workspace.path_not_writable,
// workspace.path_is_directory, workspace.read_only_resource for virtual
// paths, and workspace.size_limit_exceeded past the profile's cap.
func (w *Workspace) Write(ctx context.Context, p vfs.Path, content []byte, opt vfs.WriteOptions) (vfs.FileInfo, error) {
	mode := opt.Mode
	if mode == "" {
		mode = vfs.Replace
	}
	if mode != vfs.Replace && mode != vfs.Append {
		return vfs.FileInfo{}, wserr.New(wserr.InvalidArgument, "write", p.String(), "mode must be replace or append, not %q", mode)
	}
	if t, ok, err := w.host(ctx, "write", p); ok {
		if err != nil {
			return vfs.FileInfo{}, err
		}
		defer t.close()
		return t.write(ctx, p, content, opt)
	}
	fi, err := w.mutate(ctx, "write", p, opt.ExpectedHash, func(load func() ([]byte, error), exists bool) (mutation, error) {
		next := content
		if mode == vfs.Append && exists {
			old, err := load()
			if err != nil {
				return mutation{}, err
			}
			next = make([]byte, 0, len(old)+len(content))
			next = append(append(next, old...), content...)
		}
		return mutation{content: next, event: journal.WorkspaceFileWritten, reason: "after_workspace_write",
			payload: func(prev, h cas.Hash) any {
				return journal.FileWritten{Path: p.String(), Hash: h.String(), Bytes: int64(len(next)), Mode: string(mode), PrevHash: hashString(prev)}
			}}, nil
	})
	if errors.Is(err, errLargeFile) {
		base, ok, err := w.largeBase(ctx, "write", p)
		if err != nil {
			return vfs.FileInfo{}, err
		}
		if ok {
			return w.appendLarge(ctx, p, base, content, opt)
		}
		return w.Write(ctx, p, content, opt) // no longer large
	}
	return fi, err
}

// WriteFrom replaces p's content with what r yields, streamed into the
// store with bounded memory whatever its size (large content is chunked,
// and unchanged chunks of a previous version are not stored again). The
// path is checked before anything is read (writable, not a directory nor
// below a file, at opt.ExpectedHash when set); the content is stored before
// the change's transaction, so if that fails the blob is left for gc. A
// stream is read only up to the room the run's cap (Profile.MaxRunBytes)
// and the store's cap leave; one refused or cancelled while it is read
// frees what it stored of its content (cas.Store.Put). A host file (host/<name>/…) is streamed into a temporary file
// beside it, renamed into place (vfs.HostFS.WriteFrom). It fails as Write
// does, and with workspace.invalid_argument wrapping r's own error if r
// fails (wserr.Source); opt.Mode must be replace.
func (w *Workspace) WriteFrom(ctx context.Context, p vfs.Path, r io.Reader, opt vfs.WriteOptions) (vfs.FileInfo, error) {
	if opt.Mode != "" && opt.Mode != vfs.Replace {
		return vfs.FileInfo{}, wserr.New(wserr.InvalidArgument, "write", p.String(), "a streamed write replaces the file; mode must be replace")
	}
	if r == nil {
		return vfs.FileInfo{}, wserr.New(wserr.InvalidArgument, "write", p.String(), "nil reader")
	}
	r = wserr.Source(r, "write", p.String())
	if t, ok, err := w.host(ctx, "write", p); ok {
		if err != nil {
			return vfs.FileInfo{}, err
		}
		defer t.close()
		return t.writeFrom(ctx, p, r, opt)
	}
	if _, _, _, ok := w.s.virtual.Match(p); ok {
		return vfs.FileInfo{}, wserr.New(wserr.ReadOnlyResource, "write", p.String(), "virtual resources are read-only; copy the content into output/ to change it")
	}
	runRoom := int64(-1) // no cap
	var runCap int64
	err := w.s.db.View(ctx, func(tx *index.Tx) error {
		run, err := findRun(ctx, tx, w.runID)
		if err != nil {
			return err
		}
		if err := w.checkWritable("write", run, p); err != nil {
			return err
		}
		if err := w.checkTarget(ctx, tx, run.Root, "write", p, opt.ExpectedHash); err != nil {
			return err
		}
		if runCap = run.Profile.MaxRunBytes; runCap > 0 {
			runRoom, err = w.roomFor(ctx, tx, run, p)
		}
		return err
	})
	if err != nil {
		return vfs.FileInfo{}, err
	}
	// The size of a stream is known only once it is stored; under a cap
	// it is read, in bounded memory, only up to the room left. The
	// change's transaction checks the caps again.
	if runRoom >= 0 {
		r = capread.Reader(r, runRoom, runCapExceeded("write", p, runCap))
	}
	// Content the store holds already adds no content bytes, but only
	// its address tells, once it is read: under the store's cap the
	// stream is hashed as it comes (the tally sits inside the run's cap,
	// whose refusal is the stream's own), and one the room refuses is
	// read on, stored nowhere, and written if its content is stored.
	t := &cas.Tally{R: r}
	src, release, err := w.s.StreamCap(ctx, t, 0, -1, "write", p.String())
	if err != nil {
		return vfs.FileInfo{}, err
	}
	if src != io.Reader(t) { // capped
		t.Hash = cas.NewHasher()
		defer t.Hash.Release()
	}
	defer w.s.blobs.Hold()() // until the change references it
	h, err := w.s.blobs.Put(ctx, src)
	release() // stored (it counts in the store now) or abandoned
	var full error
	if err != nil && t.Hash != nil && t.CapRefused(err) {
		full = err
		if h, _, err = t.Finish(ctx, "write", p.String()); err != nil {
			return vfs.FileInfo{}, err
		}
	}
	if err != nil {
		return vfs.FileInfo{}, err
	}
	info, err := w.s.blobs.Stat(ctx, h)
	switch {
	case errors.Is(err, cas.ErrNotFound) && full != nil:
		return vfs.FileInfo{}, full // new content, which does not fit
	case errors.Is(err, cas.ErrNotFound):
		return vfs.FileInfo{}, cas.Collected("write", h, err)
	case err != nil:
		return vfs.FileInfo{}, err
	}
	fi, err := w.mutate(ctx, "write", p, opt.ExpectedHash, func(_ func() ([]byte, error), _ bool) (mutation, error) {
		return mutation{stored: &info, event: journal.WorkspaceFileWritten, reason: "after_workspace_write",
			payload: func(prev, h cas.Hash) any {
				return journal.FileWritten{Path: p.String(), Hash: h.String(), Bytes: info.Size, Mode: string(vfs.Replace), PrevHash: hashString(prev)}
			}}, nil
	})
	if full != nil && errors.Is(err, cas.ErrNotFound) {
		return vfs.FileInfo{}, full // the stored content went meanwhile
	}
	return fi, err
}

// checkTarget refuses, as the change's transaction would, a file change at
// p in root that cannot apply: p is a directory or lies below a file
// (vfs.FileTarget), or its hash is not expected
// (workspace.write_stale_file, when expected is set). WriteFrom checks it
// before it reads the stream, so a refused stream is not read.
func (w *Workspace) checkTarget(ctx context.Context, tx *index.Tx, root cas.Hash, op string, p vfs.Path, expected cas.Hash) error {
	cur, err := vfs.FileTarget(op, p, func(q vfs.Path) (vfs.Entry, error) { return w.s.trees.Lookup(ctx, tx, root, q) })
	if err != nil && (expected.IsZero() || !wserr.Is(err, wserr.NotADirectory)) {
		return err
	}
	// Below a file no file is there: the transaction finds the expected
	// hash stale before it finds where p lies.
	if !expected.IsZero() && expected != cur {
		return wserr.New(wserr.WriteStaleFile, op, p.String(), "file changed since it was read: its hash is %s, not %s", shortOrNone(cur), expected.Short())
	}
	return nil
}

// Patch replaces old with new in p (exactly once unless opt.ReplaceAll).
// It fails with the workspace.patch_* codes, workspace.file_not_found and
// the codes of Write.
func (w *Workspace) Patch(ctx context.Context, p vfs.Path, old, new string, opt vfs.PatchOptions) (vfs.FileInfo, error) {
	if t, ok, err := w.host(ctx, "patch", p); ok {
		if err != nil {
			return vfs.FileInfo{}, err
		}
		defer t.close()
		return t.patch(ctx, p, old, new, opt)
	}
	fi, err := w.mutate(ctx, "patch", p, opt.ExpectedHash, func(load func() ([]byte, error), exists bool) (mutation, error) {
		if !exists {
			return mutation{}, wserr.New(wserr.FileNotFound, "patch", p.String(), "no such file")
		}
		cur, err := load()
		if err != nil {
			return mutation{}, err
		}
		next, n, err := vfs.ApplyPatch(p, cur, old, new, opt.ReplaceAll)
		if err != nil {
			return mutation{}, err
		}
		return mutation{content: next, event: journal.WorkspacePatchApplied, reason: "after_workspace_patch",
			payload: func(prev, h cas.Hash) any {
				return journal.PatchApplied{Path: p.String(), Hash: h.String(), PrevHash: hashString(prev), Replacements: n}
			}}, nil
	})
	if errors.Is(err, errLargeFile) {
		base, ok, err := w.largeBase(ctx, "patch", p)
		if err != nil {
			return vfs.FileInfo{}, err
		}
		if ok {
			return w.patchLarge(ctx, p, base, old, new, opt)
		}
		return w.Patch(ctx, p, old, new, opt) // no longer large
	}
	return fi, err
}

// Remove deletes the file p. It fails with workspace.file_not_found,
// workspace.path_is_directory and the codes of Write.
func (w *Workspace) Remove(ctx context.Context, p vfs.Path) error {
	_, err := w.Delete(ctx, p)
	return err
}

// Delete is Remove returning the removed file's last info, with the
// checkpoint the removal took.
func (w *Workspace) Delete(ctx context.Context, p vfs.Path) (vfs.FileInfo, error) {
	if t, ok, err := w.host(ctx, "remove", p); ok {
		if err != nil {
			return vfs.FileInfo{}, err
		}
		defer t.close()
		return t.remove(ctx, p)
	}
	return w.mutate(ctx, "remove", p, cas.Hash{}, func(_ func() ([]byte, error), exists bool) (mutation, error) {
		if !exists {
			return mutation{}, wserr.New(wserr.FileNotFound, "remove", p.String(), "no such file")
		}
		return mutation{remove: true, event: journal.WorkspaceFileDeleted, reason: "after_workspace_delete",
			payload: func(prev, _ cas.Hash) any {
				return journal.FileDeleted{Path: p.String(), PrevHash: prev.String()}
			}}, nil
	})
}

func hashString(h cas.Hash) string {
	if h.IsZero() {
		return ""
	}
	return h.String()
}

// mutation is what an operation decided to do with a file.
type mutation struct {
	content []byte
	stored  *cas.Info // content already in the store (streamed writes)
	// checkRoom holds stored content to the store cap as content is held
	// (a streamed write is held to it as it is read instead).
	checkRoom bool
	remove    bool
	event     journal.Type
	reason    string // checkpoint reason
	payload   func(prev, next cas.Hash) any
}

// mutate runs one workspace-changing operation in one transaction: it
// reads p's current content, lets decide compute the change, stores the
// new blob and trees, swaps the run's root, journals the event and takes
// the automatic checkpoint. Any failure rolls all of it back.
func (w *Workspace) mutate(ctx context.Context, op string, p vfs.Path, expected cas.Hash,
	decide func(load func() ([]byte, error), exists bool) (mutation, error)) (vfs.FileInfo, error) {
	if _, _, _, ok := w.s.virtual.Match(p); ok {
		return vfs.FileInfo{}, wserr.New(wserr.ReadOnlyResource, op, p.String(), "virtual resources are read-only; copy the content into output/ to change it")
	}
	if p.IsRoot() {
		return vfs.FileInfo{}, wserr.New(wserr.PathIsDirectory, op, p.String(), "the workspace root is a directory")
	}
	var fi vfs.FileInfo
	change := func(tx *index.Tx) error {
		run, caps, err := findRunCaps(ctx, tx, w.runID)
		if err != nil {
			return err
		}
		if err := w.checkWritable(op, run, p); err != nil {
			return err
		}
		var prev vfs.Entry
		exists := false
		switch e, err := w.s.trees.Lookup(ctx, tx, run.Root, p); {
		case err == nil && e.Kind == vfs.KindDir:
			return wserr.New(wserr.PathIsDirectory, op, p.String(), "is a directory")
		case err == nil:
			prev, exists = e, true
		case wserr.Is(err, wserr.FileNotFound):
		default:
			return err
		}
		if !expected.IsZero() && expected != prev.Hash {
			return wserr.New(wserr.WriteStaleFile, op, p.String(), "file changed since it was read: its hash is %s, not %s", shortOrNone(prev.Hash), expected.Short())
		}
		// The current content is read only by operations that need it
		// (append, patch), so replacing or removing a large file costs
		// nothing per byte of its old version.
		// What it read is handed to the content store, so the previous
		// version is decoded once per change.
		var loaded []byte
		load := func() ([]byte, error) {
			if !exists {
				return nil, nil
			}
			if prev.Size > largeFile {
				// streamed instead (largefile.go): the caller sees
				// errLargeFile once this transaction is rolled back
				return nil, errLargeFile
			}
			b, err := w.s.blobs.ReadAllIn(ctx, tx, prev.Hash)
			loaded = b
			return b, err
		}
		m, err := decide(load, exists)
		if err != nil {
			return err
		}
		room := w.s.roomCheck(ctx, tx, op, &caps)
		if !m.remove {
			// Whatever its content's size (an empty file, a shorter
			// version), the change adds a version, trees, an event and a
			// checkpoint: settle holds them to the cap.
			room.grow()
		}
		if !m.remove && (m.stored == nil || m.checkRoom) {
			size := int64(len(m.content))
			if m.stored != nil {
				size = m.stored.Size
			}
			if err := room.add(p, size-prev.Size); err != nil {
				return err
			}
		}
		if m.stored != nil && m.stored.Hash != prev.Hash {
			room.storedAhead(p)
		}
		var next *vfs.Entry
		var h cas.Hash
		var replaced cas.Sized // prev's stored size, when the store read it
		switch {
		case m.remove:
		case m.stored != nil:
			// Streamed in before the transaction; refresh its row so a
			// concurrent gc keeps it now that this change references it.
			if _, err := w.s.blobs.Touch(ctx, tx, m.stored.Hash); err != nil {
				return err // a gc took it meanwhile: store.busy (cas.Collected)
			}
			h = m.stored.Hash
			next = &vfs.Entry{Kind: vfs.KindFile, Hash: h, Size: m.stored.Size}
		default:
			// The previous version is the delta base: agents rewrite the
			// same files round after round. The store hashes the content
			// (once); rewriting identical content is still a recorded
			// step, with nothing new stored.
			if h, replaced, err = w.s.blobs.PutVersionSized(ctx, tx, m.content, prev.Hash, loaded); err != nil {
				return err
			}
			next = &vfs.Entry{Kind: vfs.KindFile, Hash: h, Size: int64(len(m.content))}
		}
		root, err := w.s.trees.Set(ctx, tx, run.Root, p, next)
		if err != nil {
			return err
		}
		if next != nil {
			fi = w.info(p, *next, run)
		} else {
			fi = w.info(p, prev, run)
		}
		if fi.Checkpoint, err = w.swapRoot(ctx, tx, run, caps, op, p, root, m.reason, []cas.Sized{replaced}, event{m.event, m.payload(prev.Hash, h)}); err != nil {
			return err
		}
		return room.settle(ctx, tx)
	}
	err := w.s.UpdateInRoom(ctx, change)
	return fi, err
}

// event is a journal event a workspace change records.
type event struct {
	typ     journal.Type
	payload any
}

// swapRoot is the tail of every workspace change, inside its transaction:
// it enforces the size cap, makes root the run's live tree, journals the
// events that record the change and takes the automatic checkpoint (held
// to the profile's MaxCheckpoints), returning its id ("" if the profile
// takes none). p names the change in errors; known are stored sizes the
// change read (newCheckpoint).
func (w *Workspace) swapRoot(ctx context.Context, tx *index.Tx, run Run, caps runCaps, op string, p vfs.Path, root cas.Hash, reason string, known []cas.Sized, events ...event) (string, error) {
	if err := w.checkSize(ctx, tx, run, op, p, root); err != nil {
		return "", err
	}
	entries := make([]journal.Entry, 0, len(events)+1)
	for _, ev := range events {
		e, err := w.s.journal.Prepare(ev.typ, journal.Info, ev.payload)
		if err != nil {
			return "", err
		}
		entries = append(entries, e)
	}
	head, cpID := run.HeadCheckpoint, ""
	// A change that leaves the workspace as it was (the same bytes
	// written again, an empty append) is journaled but takes no
	// checkpoint: one would only push older ones out of a capped run.
	if run.Profile.autoCheckpoint() && root != run.Root {
		// The change's events go in with the checkpoint's.
		cp, err := w.s.newCheckpoint(ctx, tx, run.ID, caps, root, run.HeadCheckpoint, reason, known, entries...)
		if err != nil {
			return "", err
		}
		head, cpID = cp.Seq, cp.ID
	} else if _, err := w.s.journal.AppendEntries(ctx, tx, run.ID, entries...); err != nil {
		return "", err
	}
	// One update of the run's row: the new root and, with it, the
	// checkpoint that now heads it.
	if err := w.s.moveHead(ctx, tx, run.ID, root, head, true); err != nil {
		return "", err
	}
	return cpID, nil
}

func shortOrNone(h cas.Hash) string {
	if h.IsZero() {
		return "none (no such file)"
	}
	return h.Short()
}

// inherited returns the bytes of root that the run did not add itself:
// its input/ (fixed at creation: the host's inputs and
// input/persist_snapshot.json) and the chat's persist/ layer it started
// from (run.PersistBase). The run cap counts only the rest, so a chat
// whose persist/ layer has grown past a run's cap still starts runs that
// can write.
func (w *Workspace) inherited(ctx context.Context, tx *index.Tx, run Run, root cas.Hash) (int64, error) {
	var n int64
	switch e, err := w.s.trees.Lookup(ctx, tx, root, vfs.MustPath(InputRoot)); {
	case err == nil:
		n += e.Size
	case !wserr.Is(err, wserr.FileNotFound):
		return 0, err
	}
	if run.PersistBase != vfs.EmptyTree && !run.PersistBase.IsZero() {
		e, err := w.s.trees.Lookup(ctx, tx, run.PersistBase, vfs.Root())
		if err != nil {
			return 0, err
		}
		n += e.Size
	}
	return n, nil
}

// added returns the bytes of root the run added itself (see inherited):
// the workspace's size less what it inherited, never negative. A run that
// removes or shrinks inherited files may write as many bytes of its own
// before its cap bites: the workspace stays within what it started with
// plus the cap.
func (w *Workspace) added(ctx context.Context, tx *index.Tx, run Run, root cas.Hash) (int64, error) {
	total, err := w.s.trees.Lookup(ctx, tx, root, vfs.Root())
	if err != nil {
		return 0, err
	}
	inh, err := w.inherited(ctx, tx, run, root)
	if err != nil {
		return 0, err
	}
	return max(total.Size-inh, 0), nil
}

// roomFor returns how many bytes a new content of file p may have under
// run's MaxRunBytes (which must be set): checkSize allows the run's own
// bytes up to the cap, or up to their present amount if that is larger.
func (w *Workspace) roomFor(ctx context.Context, tx *index.Tx, run Run, p vfs.Path) (int64, error) {
	own, err := w.added(ctx, tx, run, run.Root)
	if err != nil {
		return 0, err
	}
	var cur int64 // what p holds now, which the new content replaces
	switch e, err := w.s.trees.Lookup(ctx, tx, run.Root, p); {
	case err == nil && e.Kind == vfs.KindFile:
		cur = e.Size
	case err != nil && !wserr.Is(err, wserr.FileNotFound) && !wserr.Is(err, wserr.NotADirectory):
		return 0, err
	}
	return max(run.Profile.MaxRunBytes, own) - own + cur, nil
}

// checkSize enforces the profile's MaxRunBytes on the new root: the bytes
// the run added itself (added: inputs and the persist/ layer it inherited
// do not count) may not grow past the cap. Only a change that grows them
// past it is refused, so shrinking files or removing them stays possible.
func (w *Workspace) checkSize(ctx context.Context, tx *index.Tx, run Run, op string, p vfs.Path, root cas.Hash) error {
	if run.Profile.MaxRunBytes <= 0 {
		return nil
	}
	now, err := w.added(ctx, tx, run, root)
	if err != nil {
		return err
	}
	before, err := w.added(ctx, tx, run, run.Root)
	if err != nil {
		return err
	}
	if now > run.Profile.MaxRunBytes && now > before {
		return wserr.New(wserr.SizeLimitExceeded, op, p.String(), "the run would hold %d bytes of its own (inputs and the inherited persist/ layer not counted); its cap is %d", now, run.Profile.MaxRunBytes)
	}
	return nil
}

// Search scores the visible text files below opt.Path (and the virtual
// resources mounted below it) against query and returns the best hits. Files over
// vfs.MaxSearchFile (stored, host or virtual) are passed over, so a search's memory stays bounded
// whatever the workspace holds. A virtual mount below opt.Path whose
// provider fails is passed over and named in the result's Skipped, with
// its error. It fails with
// workspace.invalid_argument for a bad query or options, like Stat
// for opt.Path (workspace.file_not_found, workspace.path_not_visible), and
// with the provider's error for a path at or inside a virtual mount.
func (w *Workspace) Search(ctx context.Context, query string, opt vfs.SearchOptions) (vfs.SearchResult, error) {
	sr, err := vfs.NewSearcher(query, opt)
	if err != nil {
		return vfs.SearchResult{}, err
	}
	if t, ok, err := w.host(ctx, "search", opt.Path); ok {
		if err != nil {
			return vfs.SearchResult{}, err
		}
		defer t.close()
		return t.search(ctx, query, opt)
	}
	if _, _, _, ok := w.s.virtual.Match(opt.Path); ok {
		return w.s.virtual.Search(ctx, query, opt)
	}
	maxFiles := opt.MaxFiles
	if maxFiles <= 0 {
		maxFiles = 2000
	}
	type file struct {
		p vfs.Path
		h cas.Hash
	}
	var files []file
	err = w.s.db.View(ctx, func(tx *index.Tx) error {
		run, root, err := w.root(ctx, tx)
		if err != nil {
			return err
		}
		if err := w.checkVisible("search", run, opt.Path); err != nil {
			return err
		}
		start, err := w.s.trees.Lookup(ctx, tx, root, opt.Path)
		if w.emptyRoot(run, opt.Path, err) {
			return nil // nothing below it
		}
		if err != nil {
			return err
		}
		if start.Kind != vfs.KindDir {
			if start.Size <= vfs.MaxSearchFile {
				files = append(files, file{opt.Path, start.Hash})
			}
			return nil
		}
		return w.s.trees.Walk(ctx, tx, start.Hash, func(rel vfs.Path, e vfs.Entry) error {
			full := joinPath(opt.Path, rel)
			if w.checkVisible("search", run, full) != nil {
				if e.Kind == vfs.KindDir {
					return fs.SkipDir
				}
				return nil
			}
			if e.Kind == vfs.KindFile && e.Size <= vfs.MaxSearchFile {
				if files = append(files, file{full, e.Hash}); len(files) == maxFiles {
					return fs.SkipAll // no directory after it is read
				}
			}
			return nil
		})
	})
	if w.besideVirtual(opt.Path, err) {
		return w.s.virtual.Search(ctx, query, opt)
	}
	if err != nil {
		return vfs.SearchResult{}, err
	}
	for _, f := range files {
		b, err := w.s.blobs.ReadAll(ctx, f.h)
		if err != nil {
			return vfs.SearchResult{}, err
		}
		sr.Add(f.p, b)
	}
	if err := w.s.virtual.SearchBelow(ctx, sr, opt.Path); err != nil {
		return vfs.SearchResult{}, err
	}
	return sr.Result(), nil
}

// mountsBelow returns the virtual prefixes strictly below p (every one
// for the root): a stored directory above them lists and searches them
// too.
func (w *Workspace) mountsBelow(p vfs.Path) []vfs.Path {
	var out []vfs.Path
	for _, q := range w.s.virtual.Prefixes() {
		if q != p && q.HasPrefix(p) {
			out = append(out, q)
		}
	}
	return out
}

// joinPath appends rel's segments to dir; both are already valid, so the
// joins cannot fail.
func joinPath(dir, rel vfs.Path) vfs.Path {
	for _, seg := range rel.Segments() {
		dir, _ = dir.Join(seg)
	}
	return dir
}

// sortInfos sorts infos in the order List promises and the stored tree
// walks in: by path compared segment by segment, so "a/x" comes before
// "a-b" although '-' sorts before '/'.
func sortInfos(infos []vfs.FileInfo) {
	slices.SortFunc(infos, func(a, b vfs.FileInfo) int {
		return slices.Compare(a.Path.Segments(), b.Path.Segments())
	})
}
