package runs

import (
	"context"
	"errors"
	"io"

	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// hostTarget is a path below host/ of a live workspace whose profile
// allows host paths: the run, the allowed path it falls in (fs nil for
// host/ itself) and the path inside it.
type hostTarget struct {
	run   Run
	hp    HostPath
	fs    *vfs.HostFS
	mount vfs.Path // host/<name>
	rel   vfs.Path
}

// host routes p to an allowed host path. It reports false, reading
// nothing, for a path outside host/; and false for a checkpoint view
// (host directories are not versioned, so a checkpoint holds none) or a
// run whose profile allows none, so such paths stay the stored tree's.
// The caller closes the target. A name under host/ no profile entry has
// fails with workspace.file_not_found.
func (w *Workspace) host(ctx context.Context, op string, p vfs.Path) (*hostTarget, bool, error) {
	if p.Top() != HostRoot || !w.live() {
		return nil, false, nil
	}
	var run Run
	err := w.s.db.View(ctx, func(tx *index.Tx) error {
		var err error
		run, err = findRun(ctx, tx, w.runID)
		return err
	})
	if err != nil {
		return nil, true, err
	}
	if len(run.Profile.AllowPaths) == 0 {
		return nil, false, nil
	}
	t := &hostTarget{run: run}
	segs := p.Segments()
	if len(segs) == 1 {
		return t, true, nil
	}
	hp, ok := run.Profile.hostByName(segs[1])
	if !ok {
		return nil, true, wserr.New(wserr.FileNotFound, op, p.String(), "no allowed host path is named %q (host/ holds: %s)", segs[1], run.Profile.allowNames())
	}
	t.hp, t.mount = hp, vfs.MustPath(HostRoot+"/"+hp.Name)
	for _, s := range segs[2:] {
		t.rel, _ = t.rel.Join(s)
	}
	if err := w.s.reachesStore(op, hp); err != nil {
		return nil, true, err
	}
	if t.fs, err = vfs.OpenHostWith(hp.Path, vfs.HostOptions{Writable: hp.Writable, Forbidden: w.s.isStoreFile, At: t.mount}); err != nil {
		return nil, true, wserr.New(wserr.FileNotFound, op, p.String(), "allowed host path %s cannot be opened: %s", hp.Path, wserr.MessageOf(err))
	}
	return t, true, nil
}

func (t *hostTarget) close() {
	if t.fs != nil {
		t.fs.Close()
	}
}

// info rebases a HostFS FileInfo to its workspace path.
func (t *hostTarget) info(fi vfs.FileInfo) vfs.FileInfo {
	fi.Path = joinPath(t.mount, fi.Path)
	fi.Writable = fi.Writable && t.run.Status == Running && !fi.Path.Dir().IsRoot()
	return fi
}

// err rebases a HostFS error's path to the workspace path.
func (t *hostTarget) err(err error) error {
	var e *wserr.Error
	if !errors.As(err, &e) {
		return err
	}
	c := *e
	if rel, perr := vfs.ParsePath(c.Path); perr == nil {
		c.Path = joinPath(t.mount, rel).String()
	} else if c.Path == "" || c.Path == "." {
		c.Path = t.mount.String()
	}
	return &c
}

// dirs are the directories host/ and host/<name>, which exist only to
// reach the allowed paths, to depth levels below root.
func hostDirs(prof Profile, depth int) []vfs.FileInfo {
	out := []vfs.FileInfo{{Path: vfs.MustPath(HostRoot), Kind: vfs.KindDir, Resource: vfs.ResourceHost}}
	if depth != 1 {
		for _, h := range prof.AllowPaths {
			out = append(out, vfs.FileInfo{Path: vfs.MustPath(HostRoot + "/" + h.Name), Kind: vfs.KindDir, Resource: vfs.ResourceHost})
		}
	}
	return out
}

// stat describes the target with stat, (*vfs.HostFS).Stat or, reading no
// host file, (*vfs.HostFS).StatNoRead.
func (t *hostTarget) stat(ctx context.Context, stat func(*vfs.HostFS, context.Context, vfs.Path) (vfs.FileInfo, error)) (vfs.FileInfo, error) {
	if t.fs == nil {
		return hostDirs(t.run.Profile, 1)[0], nil
	}
	fi, err := stat(t.fs, ctx, t.rel)
	if err != nil {
		return vfs.FileInfo{}, t.err(err)
	}
	return t.info(fi), nil
}

func (t *hostTarget) read(ctx context.Context, opt vfs.ReadOptions) (vfs.ReadResult, error) {
	if t.fs == nil {
		return vfs.ReadResult{}, wserr.New(wserr.PathIsDirectory, "read", HostRoot, "is a directory; list it instead")
	}
	res, err := t.fs.Read(ctx, t.rel, opt)
	if err != nil {
		return vfs.ReadResult{}, t.err(err)
	}
	res.Info = t.info(res.Info)
	return res, nil
}

// open streams a host file whole (vfs.HostFS.Open); the stream outlives
// the target, which the caller closes.
func (t *hostTarget) open(ctx context.Context) (io.ReadCloser, vfs.FileInfo, error) {
	if t.fs == nil {
		return nil, vfs.FileInfo{}, wserr.New(wserr.PathIsDirectory, "read", HostRoot, "is a directory; list it instead")
	}
	rc, fi, err := t.fs.Open(ctx, t.rel)
	if err != nil {
		return nil, vfs.FileInfo{}, t.err(err)
	}
	return rc, t.info(fi), nil
}

// listPage lists a host directory, a page at a time. host/ lists the
// allowed paths (and, to depth, what they hold).
func (t *hostTarget) listPage(ctx context.Context, w *Workspace, depth int, page vfs.ListPage) ([]vfs.FileInfo, bool, error) {
	if t.fs == nil {
		if depth <= 0 {
			depth = 1
		}
		dirs := hostDirs(t.run.Profile, 2)[1:]
		sortInfos(dirs)
		var out []vfs.FileInfo
		full := func() bool { return page.Limit > 0 && len(out) > page.Limit }
		for _, d := range dirs {
			if page.Admits(d.Path) {
				out = append(out, d)
			}
			if depth > 1 && !full() {
				// What lies below d, up to one past the page.
				below := page
				if page.Limit > 0 {
					below.Limit = page.Limit + 1 - len(out)
				}
				ls, _, err := w.ListPage(ctx, d.Path, depth-1, below)
				if err != nil {
					return nil, false, err
				}
				out = append(out, ls...)
			}
			if full() {
				return out[:page.Limit], true, nil
			}
		}
		return out, false, nil
	}
	within, ok := page.Within(t.mount)
	if !ok {
		return nil, false, nil
	}
	ls, more, err := t.fs.ListPage(ctx, t.rel, depth, within)
	if err != nil {
		return nil, false, t.err(err)
	}
	for i := range ls {
		ls[i] = t.info(ls[i])
	}
	return ls, more, nil
}

// checkWrite refuses a write to host/ itself, or by a run that is not
// running, before the HostFS refuses what it must (a read-only path, the
// mount's root, an escape).
func (t *hostTarget) checkWrite(op string, p vfs.Path) error {
	if t.fs == nil {
		return wserr.New(wserr.PathNotWritable, op, p.String(), "host/ lists the allowed host paths; write below host/<name>/")
	}
	if t.run.Status != Running {
		return wserr.New(wserr.InvalidState, op, p.String(), "run %s is %s, not running", t.run.ID, t.run.Status)
	}
	if !t.hp.Writable {
		return wserr.New(wserr.PathNotWritable, op, p.String(), "the allowed host path %s is read-only for this run", t.hp.Path)
	}
	return nil
}

func (t *hostTarget) write(ctx context.Context, p vfs.Path, content []byte, opt vfs.WriteOptions) (vfs.FileInfo, error) {
	if err := t.checkWrite("write", p); err != nil {
		return vfs.FileInfo{}, err
	}
	fi, err := t.fs.Write(ctx, t.rel, content, opt)
	if err != nil {
		return vfs.FileInfo{}, t.err(err)
	}
	return t.info(fi), nil
}

// writeFrom streams r into the host file, through a temporary file
// renamed into place (HostFS.WriteFrom), never through the content store.
func (t *hostTarget) writeFrom(ctx context.Context, p vfs.Path, r io.Reader, opt vfs.WriteOptions) (vfs.FileInfo, error) {
	if err := t.checkWrite("write", p); err != nil {
		return vfs.FileInfo{}, err
	}
	fi, err := t.fs.WriteFrom(ctx, t.rel, r, opt)
	if err != nil {
		return vfs.FileInfo{}, t.err(err)
	}
	return t.info(fi), nil
}

func (t *hostTarget) patch(ctx context.Context, p vfs.Path, old, new string, opt vfs.PatchOptions) (vfs.FileInfo, error) {
	if err := t.checkWrite("patch", p); err != nil {
		return vfs.FileInfo{}, err
	}
	fi, err := t.fs.Patch(ctx, t.rel, old, new, opt)
	if err != nil {
		return vfs.FileInfo{}, t.err(err)
	}
	return t.info(fi), nil
}

func (t *hostTarget) remove(ctx context.Context, p vfs.Path) (vfs.FileInfo, error) {
	if err := t.checkWrite("remove", p); err != nil {
		return vfs.FileInfo{}, err
	}
	fi, err := t.fs.RemoveFile(ctx, t.rel)
	if err != nil {
		return vfs.FileInfo{}, t.err(err)
	}
	return t.info(fi), nil
}

func (t *hostTarget) search(ctx context.Context, query string, opt vfs.SearchOptions) (vfs.SearchResult, error) {
	if t.fs == nil {
		return vfs.SearchResult{}, wserr.New(wserr.InvalidArgument, "search", HostRoot, "search below host/<name>/, one allowed host path at a time")
	}
	opt.Path = t.rel
	res, err := t.fs.Search(ctx, query, opt)
	if err != nil {
		return vfs.SearchResult{}, t.err(err)
	}
	for i := range res.Hits {
		res.Hits[i].Path = joinPath(t.mount, res.Hits[i].Path)
	}
	return res, nil
}

// HostPath maps an absolute host path to the workspace path the run
// reaches it by (host/<name>/…), so a host that speaks in host paths
// (seed 004) can address the workspace. It fails with run.not_found,
// workspace.invalid_path for a relative path, and
// workspace.path_not_allowed for a path in the system's temporary
// directory or outside every allowed host path of the run's profile.
// Symlinks are not resolved here: every access goes through os.Root,
// which refuses those that lead out.
func (s *Service) HostPath(ctx context.Context, runID, abs string) (vfs.Path, error) {
	run, err := s.Run(ctx, runID)
	if err != nil {
		return vfs.Path{}, err
	}
	p, _, err := run.Profile.hostWorkspacePath("host path", abs)
	return p, err
}
