package vfs

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/wserr"
)

// Host mount limits.
const (
	// hostFilePerm is the mode of files that writes create, before the
	// process umask. Writes create no directories.
	hostFilePerm = 0o644
	// hostTempPrefix starts the name of the temporary file a write
	// renames into place, so a user who finds one left by a crash can tell
	// where it came from.
	hostTempPrefix = ".wsstore-write-"
)

// hostLockWait bounds how long a change waits for its directory's write
// lock, held by another writer (another process, or a program that takes
// the same flock), before it fails with store.busy: as long as a write of
// the store waits for the database's write lock (index.Options.BusyTimeout).
var hostLockWait = 30 * time.Second

// hostSkipDirs are directories Search does not enter: version-control
// metadata is large, mostly binary, and never what a query is after.
var hostSkipDirs = map[string]bool{".git": true, ".hg": true, ".svn": true}

// HostFS is a host directory mounted into the workspace (an allow-listed
// host path). The store only checks boundaries: every access goes through
// an os.Root, so no path, ".." or symlink can reach outside the directory;
// the store never creates, chmods or cleans up the directory itself.
//
// The store never creates a directory on the host (seed 004 INV-IO-07:
// boundaries only, never MkdirAll, Chmod, GC or Export): a write whose
// parent directory does not exist fails with workspace.file_not_found and
// creates nothing. A write goes to a temporary file in the same directory
// that is synced and renamed over the target, so a failed write leaves
// the old file whole; the temporary file gets the target's mode, so the
// rename keeps it, and no existing file's mode is changed. A target that
// is a symlink (inside the mount) stays one: the file it leads to is the
// one replaced, the same way.
//
// FileInfo.Resource is ResourceHost and Hash is the BLAKE3 of the content,
// computed by Stat and Read (List leaves it zero so that listing does not
// read every file). ModTime comes from the host.
//
// It is safe for concurrent use. A write, patch or remove holds the
// write lock of the directory it changes from its check (ExpectedHash,
// the content an append or patch starts from) to its rename: an advisory
// flock(2) of that directory on Linux, macOS and the BSDs, which every
// writer in any process takes, so concurrent appends all land, by a
// file's name, a link to it or another allowed path that holds it, and a
// guarded write never overwrites a change it did not see. A change
// resolves its path once and does every step in the directory it
// resolved (see hostChange), so a program that renames directories or
// retargets links meanwhile cannot make it read one file and replace
// another. A program that does not take the lock (an editor, a build) can
// still change a file between the check and the rename; on other
// platforms the lock holds within one process only.
// The temporary files of writes (named hostTempPrefix…, left behind only
// by a process killed mid-write) are never listed or searched.
type HostFS struct {
	root      *os.Root
	writable  bool
	forbidden func(fs.FileInfo) bool
	atLen     int          // bytes At adds before a path of the mount ("host/name/")
	dirReads  atomic.Int64 // directories a walk read, so tests can count them
}

// HostOptions configure a host mount (OpenHostWith).
type HostOptions struct {
	// Writable allows changes; the mount is read-only otherwise.
	Writable bool
	// Forbidden, if set, reports a file the mount must never open, by
	// what stat finds (the store's own database files, which a hard link
	// in the directory could name: closing any descriptor of one drops
	// the process's SQLite locks). Such a file is refused with
	// workspace.path_not_allowed before it is opened.
	Forbidden func(fs.FileInfo) bool
	// At is the path the mount is reached by in a larger view
	// (host/NAME in a run's workspace); the root by default. A name
	// whose path there would be longer than MaxPathLen is left out of
	// listings and searches, as any name no tool could name is.
	At Path
}

var (
	_ WriteFS  = (*HostFS)(nil)
	_ SearchFS = (*HostFS)(nil)
)

// rootEscape is the error os.Root reports for a path that would leave the
// root. The os package does not export it, so it is captured from the first
// root opened; isRootEscape falls back on its text.
var (
	rootEscapeOnce sync.Once
	rootEscape     error
)

func captureRootEscape(r *os.Root) {
	rootEscapeOnce.Do(func() {
		if _, err := r.Stat(".."); err != nil {
			if inner := errors.Unwrap(err); inner != nil {
				rootEscape = inner
			}
		}
	})
}

func isRootEscape(err error) bool {
	return errors.Is(err, errLinkEscapes) || (rootEscape != nil && errors.Is(err, rootEscape)) ||
		strings.Contains(err.Error(), "path escapes from parent")
}

// OpenHost mounts the existing directory dir, read-only unless writable.
// It fails with wserr.InvalidOptions if dir does not exist or is not a
// directory; it never creates it.
func OpenHost(dir string, writable bool) (*HostFS, error) {
	return OpenHostWith(dir, HostOptions{Writable: writable})
}

// OpenHostWith is OpenHost with options.
func OpenHostWith(dir string, opt HostOptions) (*HostFS, error) {
	const op = "open host"
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, wserr.Wrap(wserr.InvalidOptions, op, dir, err)
	}
	if !fi.IsDir() {
		return nil, wserr.New(wserr.InvalidOptions, op, dir, "host path is not a directory")
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, wserr.Wrap(wserr.InvalidOptions, op, dir, err)
	}
	captureRootEscape(root)
	h := &HostFS{root: root, writable: opt.Writable, forbidden: opt.Forbidden}
	if !opt.At.IsRoot() {
		h.atLen = len(opt.At.s) + 1
	}
	return h, nil
}

// openRegular opens name in r for reading once stat has found it a
// regular file the mount may open (fi), and checks what it opened: a
// file replaced meanwhile by a FIFO or device is refused, never waited
// on (the open does not block), and so is a forbidden one.
func (h *HostFS) openRegular(r *os.Root, name, op string, p Path, write bool, fi fs.FileInfo) (*os.File, fs.FileInfo, error) {
	if err := h.allowed(op, p, fi); err != nil {
		return nil, nil, err
	}
	f, err := r.OpenFile(name, openReadFlags, 0)
	if errors.Is(err, syscall.EAGAIN) {
		// A lease another program holds (Samba, an NFS server) makes a
		// non-blocking open fail where a blocking one waits for it to
		// be given back; stat found a regular file, which is not a FIFO.
		f, err = r.OpenFile(name, os.O_RDONLY, 0)
	}
	if err != nil {
		return nil, nil, hostError(op, p, write, err)
	}
	if fi, err = f.Stat(); err != nil {
		f.Close()
		return nil, nil, hostError(op, p, write, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		e := wserr.New(wserr.InvalidPath, op, p.String(), "is not a regular file")
		e.Err = errNotRegular
		return nil, nil, e
	}
	if err := h.allowed(op, p, fi); err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// errReplacedLink is a link that was replaced while it was followed.
var errReplacedLink = errors.New("the link was replaced while it was followed")

// errNotRegular is in the error of an open that found no regular file:
// one a stat found regular was replaced meanwhile.
var errNotRegular = errors.New("not a regular file")

// allowed refuses a file Forbidden names.
func (h *HostFS) allowed(op string, p Path, fi fs.FileInfo) error {
	if h.forbidden != nil && h.forbidden(fi) {
		return wserr.New(wserr.PathNotAllowed, op, p.String(), "is one of the store's own database files (a link to it): never opened through a host path")
	}
	return nil
}

// Close releases the directory handle. Calls after Close fail with
// store.closed.
func (h *HostFS) Close() error { return h.root.Close() }

// Writable reports whether the mount accepts writes.
func (h *HostFS) Writable() bool { return h.writable }

// hostName is p as os.Root names it.
func hostName(p Path) string {
	if p.IsRoot() {
		return "."
	}
	return filepath.FromSlash(p.s)
}

// canceled is the end of ctx, met by operation op on p, as
// store.canceled; the context's error stays in the chain.
func canceled(op string, p Path, err error) error {
	return wserr.Wrap(wserr.Canceled, op, p.String(), err)
}

// hostError maps an error from os.Root about p to a coded error. write
// says whether the operation changes the mount: a file where a directory
// should be is then wserr.NotADirectory, while for reads such a path
// simply does not exist (as in Trees.Lookup), and a permission error is
// wserr.PathNotWritable rather than wserr.PathNotVisible.
func hostError(op string, p Path, write bool, err error) error {
	switch {
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.Is(err, fs.ErrClosed):
		return wserr.Wrap(wserr.Closed, op, p.String(), err)
	case isRootEscape(err):
		return wserr.New(wserr.InvalidPath, op, p.String(), "path leaves the host directory through a symlink; only files inside it can be reached")
	case errors.Is(err, syscall.ELOOP):
		return wserr.New(wserr.InvalidPath, op, p.String(), "too many levels of symlinks")
	case errors.Is(err, syscall.ENOTDIR) && write:
		return wserr.New(wserr.NotADirectory, op, p.String(), "a file is in the way where a directory must be")
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
		return wserr.New(wserr.FileNotFound, op, p.String(), "no such file or directory")
	case errors.Is(err, syscall.EISDIR):
		return isDirError(op, p)
	case errors.Is(err, fs.ErrPermission) && write:
		return wserr.Wrap(wserr.PathNotWritable, op, p.String(), err)
	case errors.Is(err, fs.ErrPermission):
		return wserr.Wrap(wserr.PathNotVisible, op, p.String(), err)
	case errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || errors.Is(err, syscall.EFBIG) || errors.Is(err, syscall.EROFS):
		return wserr.FSFault(op, p.String(), err)
	}
	return wserr.Wrap(wserr.Internal, op, p.String(), err)
}

// notRegular is the error for a FIFO, socket or device: the store reads,
// writes and removes regular files only.
func notRegular(op string, p Path) error {
	return wserr.New(wserr.InvalidPath, op, p.String(), "is not a regular file or directory")
}

func isDirError(op string, p Path) error {
	return wserr.New(wserr.PathIsDirectory, op, p.String(), "is a directory; list it, or name a file inside it")
}

// info builds the FileInfo of p from the host's fi.
func (h *HostFS) info(p Path, fi fs.FileInfo) FileInfo {
	info := FileInfo{Path: p, Kind: KindFile, Size: fi.Size(), Resource: ResourceHost, Writable: h.writable && mayWrite(fi), ModTime: fi.ModTime()}
	if fi.IsDir() {
		info.Kind, info.Size, info.Writable = KindDir, 0, false // FileInfo.Writable: never a directory
	}
	return info
}

// stat follows symlinks (inside the root) and accepts only regular files
// and directories: reading a FIFO or a device could block or never end.
func (h *HostFS) stat(op string, p Path, write bool) (fs.FileInfo, error) {
	fi, err := h.root.Stat(hostName(p))
	if err != nil {
		return nil, hostError(op, p, write, err)
	}
	if !fi.Mode().IsRegular() && !fi.IsDir() {
		return nil, notRegular(op, p)
	}
	return fi, nil
}

// openFile opens the regular file p for reading, checked again once open:
// p may have been replaced since stat.
func (h *HostFS) openFile(op string, p Path, write bool) (*os.File, fs.FileInfo, error) {
	fi, err := h.stat(op, p, write)
	if err != nil {
		return nil, nil, err
	}
	if fi.IsDir() {
		return nil, nil, isDirError(op, p)
	}
	return h.openRegular(h.root, hostName(p), op, p, write, fi)
}

// readFile returns the content of the regular file p, which must be at
// most MaxReadBytes long (else workspace.size_limit_exceeded): what is
// held whole is bounded, whatever the host keeps there.
func (h *HostFS) readFile(op string, p Path, write bool) ([]byte, fs.FileInfo, error) {
	f, fi, err := h.openFile(op, p, write)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	b, err := readOpen(op, p, f, fi, write)
	return b, fi, err
}

// readOpen reads the open regular file f (fi is its own) whole, up to
// MaxReadBytes, as readFile does.
func readOpen(op string, p Path, f *os.File, fi fs.FileInfo, write bool) ([]byte, error) {
	if fi.Size() > MaxReadBytes {
		return nil, hostTooLarge(op, p, fi.Size())
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxReadBytes+1))
	if err != nil {
		return nil, hostError(op, p, write, err)
	}
	if len(b) > MaxReadBytes {
		return nil, hostTooLarge(op, p, int64(len(b)))
	}
	return b, nil
}

func hostTooLarge(op string, p Path, size int64) error {
	return wserr.New(wserr.SizeLimitExceeded, op, p.String(), "the host file is %d bytes or more, more than a %s of a host file holds (%d)", size, op, MaxReadBytes)
}

// hashFile returns the hash and length of the regular file p, read as it
// streams.
func (h *HostFS) hashFile(ctx context.Context, op string, p Path, write bool) (cas.Hash, int64, fs.FileInfo, error) {
	f, fi, err := h.openFile(op, p, write)
	if err != nil {
		return cas.Hash{}, 0, nil, err
	}
	defer f.Close()
	hash, n, err := hashOpen(ctx, op, p, f, write)
	return hash, n, fi, err
}

// hashOpen returns the hash and length of what is left to read of f,
// until ctx ends (store.canceled).
func hashOpen(ctx context.Context, op string, p Path, f *os.File, write bool) (cas.Hash, int64, error) {
	sum := cas.NewHasher()
	defer sum.Release()
	n, err := io.Copy(sum, ctxReader{ctx, f})
	if err != nil {
		return cas.Hash{}, 0, readError(ctx, op, p, write, err)
	}
	return sum.Sum(), n, nil
}

// ctxReader reads r until ctx ends, so that a read of a host file of any
// size (for its hash, or a range and the rest) stops once its caller has
// gone.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(b []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(b)
}

// readError is the error of a read of p that failed with err: the end of
// ctx as store.canceled, else as hostError.
func readError(ctx context.Context, op string, p Path, write bool, err error) error {
	if cerr := ctx.Err(); cerr != nil && errors.Is(err, cerr) {
		return canceled(op, p, err)
	}
	return hostError(op, p, write, err)
}

// Stat describes p; for a file it reads the content, as it streams, to
// give its hash: it is StatNoRead and the hash. It fails with
// wserr.FileNotFound, wserr.InvalidPath (a symlink leading out of the
// mount, a symlink loop, a FIFO or device), wserr.PathNotVisible (the host
// refuses access) or wserr.PathNotAllowed (a file the mount may never
// open, HostOptions.Forbidden).
func (h *HostFS) Stat(ctx context.Context, p Path) (FileInfo, error) {
	info, err := h.StatNoRead(ctx, p)
	if err != nil || info.Kind == KindDir {
		return info, err
	}
	// The open checks again what StatNoRead found: the file may have
	// been replaced since.
	hash, n, fi, err := h.hashFile(ctx, "stat", p, false)
	if err != nil {
		return FileInfo{}, err
	}
	info = h.info(p, fi)
	info.Size, info.Hash = n, hash
	return info, nil
}

// StatNoRead is Stat without the hash: it reads no file's content, so a
// file's Hash is zero and its Size is what the host reports. It is for a
// caller that reads the file next (Open hashes it as it opens it). It
// fails like Stat.
func (h *HostFS) StatNoRead(ctx context.Context, p Path) (FileInfo, error) {
	const op = "stat"
	if err := ctx.Err(); err != nil {
		return FileInfo{}, canceled(op, p, err)
	}
	fi, err := h.stat(op, p, false)
	if err != nil {
		return FileInfo{}, err
	}
	if err := h.allowed(op, p, fi); err != nil {
		return FileInfo{}, err
	}
	return h.info(p, fi), nil
}

// Read reads p as ReadRangeFrom does, streaming the file: a file over
// MaxReadBytes is read by line or char range only, up to the range's end,
// and its hash is computed as the rest streams by. It fails like Stat, with
// wserr.PathIsDirectory for a directory, and with ReadRangeFrom's errors.
func (h *HostFS) Read(ctx context.Context, p Path, opt ReadOptions) (ReadResult, error) {
	const op = "read"
	if err := ctx.Err(); err != nil {
		return ReadResult{}, canceled(op, p, err)
	}
	f, fi, err := h.openFile(op, p, false)
	if err != nil {
		return ReadResult{}, err
	}
	defer f.Close()
	sum := cas.NewHasher()
	defer sum.Release()
	res, err := ReadRangeFrom(p, io.TeeReader(ctxReader{ctx, f}, sum), fi.Size(), opt, MaxReadBytes)
	if cerr := ctx.Err(); err != nil && cerr != nil && errors.Is(err, cerr) {
		return ReadResult{}, canceled(op, p, err)
	}
	if err != nil {
		return ReadResult{}, err
	}
	if line, char := opt.ranges(); line || char || fi.Size() > MaxReadBytes {
		// The hash is of the whole file, streamed past the range; a
		// whole read has read to the end, and its hash and size are of
		// the bytes it answers, whatever another program appends now.
		if _, err := io.Copy(sum, ctxReader{ctx, f}); err != nil {
			return ReadResult{}, readError(ctx, op, p, false, err)
		}
	}
	res.Info = h.info(p, fi)
	res.Info.Size, res.Info.Hash = sum.Len(), sum.Sum()
	return res, nil
}

// Open returns p's whole content as a stream, read with bounded memory
// whatever the file's size (Read holds at most MaxReadBytes), and p's
// info. The size and hash in the info are of the file as a first pass
// read it, streamed; the stream yields at most that many bytes and fails
// with store.conflict if they are not those bytes (another program
// changed the file meanwhile), holding back the read that would complete
// them: a reader that stops at the size it was given never gets the whole
// of another version. The caller closes the stream. It fails like Read.
func (h *HostFS) Open(ctx context.Context, p Path) (io.ReadCloser, FileInfo, error) {
	const op = "read"
	if err := ctx.Err(); err != nil {
		return nil, FileInfo{}, canceled(op, p, err)
	}
	f, fi, err := h.openFile(op, p, false)
	if err != nil {
		return nil, FileInfo{}, err
	}
	hash, n, err := hashOpen(ctx, op, p, f, false)
	if err == nil {
		if _, serr := f.Seek(0, io.SeekStart); serr != nil {
			err = hostError(op, p, false, serr)
		}
	}
	if err != nil {
		f.Close()
		return nil, FileInfo{}, err
	}
	info := h.info(p, fi)
	info.Size, info.Hash = n, hash
	return &hostStream{f: f, r: io.LimitReader(f, n), left: n, sum: cas.NewHasher(), want: hash, p: p}, info, nil
}

// hostStream is HostFS.Open's stream: the file, up to the length its
// first pass hashed, checked against that hash by the read that reaches
// that length (or the file's end, for a file cut short meanwhile), which
// yields its bytes only if they match.
type hostStream struct {
	f    *os.File
	r    io.Reader
	left int64 // bytes still to come
	sum  *cas.Hasher
	want cas.Hash
	p    Path
	err  error
}

func (s *hostStream) Read(b []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	n, err := s.r.Read(b)
	s.sum.Write(b[:n])
	s.left -= int64(n)
	switch {
	case err != nil && err != io.EOF:
		s.err = hostError("read", s.p, false, err)
		return n, s.err
	case (s.left == 0 || err == io.EOF) && s.sum.Sum() != s.want:
		s.err = wserr.New(wserr.Conflict, "read", s.p.String(), "the host file changed while it was being read: read it again")
		return 0, s.err
	case s.left == 0:
		err = io.EOF // checked: nothing more is read
	}
	return n, err
}

func (s *hostStream) Close() error {
	if s.sum != nil {
		s.sum.Release()
		s.sum = nil
	}
	if s.err == nil {
		s.err = wserr.New(wserr.Closed, "read", s.p.String(), "the stream is closed")
	}
	return s.f.Close()
}

// List lists p to depth levels (0 means 1) in path order; a file lists as
// itself. Entries follow symlinks that stay inside the mount, but List does
// not descend into a symlinked directory (a link to an ancestor would
// never end); it leaves out symlinks that lead outside or nowhere, FIFOs
// and devices, and names that are not valid workspace paths (nor, below
// HostOptions.At, short enough to be one), since no tool could name them.
// It fails like Stat.
func (h *HostFS) List(ctx context.Context, p Path, depth int) ([]FileInfo, error) {
	out, _, err := h.ListPage(ctx, p, depth, ListPage{})
	return out, err
}

// ListPage returns one page of List's entries, and whether entries remain
// after it. A page reads the directories on the way to its cursor and
// those it lists, not the subtrees before the cursor (a directory read
// holds its names, not its entries' details).
func (h *HostFS) ListPage(ctx context.Context, p Path, depth int, page ListPage) ([]FileInfo, bool, error) {
	const op = "list"
	if err := page.Check(op, p); err != nil {
		return nil, false, err
	}
	if err := ctx.Err(); err != nil {
		return nil, false, canceled(op, p, err)
	}
	if depth <= 0 {
		depth = 1
	}
	fi, err := h.stat(op, p, false)
	if err != nil {
		return nil, false, err
	}
	if !fi.IsDir() {
		out, more := page.Filter([]FileInfo{h.info(p, fi)})
		return out, more, nil
	}
	var out []FileInfo
	more := false
	err = h.walkDir(ctx, op, p, depth, true, page.After, func(info FileInfo, _ bool) error {
		if page.Limit > 0 && len(out) == page.Limit {
			more = true
			return fs.SkipAll
		}
		out = append(out, info)
		return nil
	})
	if err != nil && !errors.Is(err, fs.SkipAll) {
		return nil, false, err
	}
	return out, more, nil
}

// walk calls fn for the entries below the directory dir, to depth levels
// (negative: all), with whether the entry is a symlink, in List's order.
// fn returning fs.SkipDir for a directory skips its contents; walk passes
// other errors on.
func (h *HostFS) walk(ctx context.Context, op string, dir Path, depth int, fn func(info FileInfo, link bool) error) error {
	return h.walkDir(ctx, op, dir, depth, true, Path{}, fn)
}

// walkDir is walk of dir, the directory asked for (top) or one below it:
// one below that vanished, or cannot be read or entered, is passed over
// as its files would be, where the one asked for fails. Entries that come
// no later than after (the zero Path: none) are passed over, and a
// subdirectory wholly before it is not read.
func (h *HostFS) walkDir(ctx context.Context, op string, dir Path, depth int, top bool, after Path, fn func(info FileInfo, link bool) error) error {
	if err := ctx.Err(); err != nil {
		return canceled(op, dir, err)
	}
	f, err := h.root.OpenFile(hostName(dir), openDirFlags, 0) // a FIFO put there is not waited on
	var entries []fs.DirEntry
	if err == nil {
		entries, err = f.ReadDir(-1)
		f.Close()
		h.dirReads.Add(1)
	}
	if err != nil {
		if !top && (errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) ||
			errors.Is(err, syscall.ENOTDIR) || isRootEscape(err)) {
			return nil
		}
		return hostError(op, dir, false, err)
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), hostTempPrefix) {
			continue // a write's temporary file, left by a killed process
		}
		child, err := dir.Join(e.Name())
		if err != nil || h.atLen+len(child.s) > MaxPathLen {
			continue // not a name a workspace path can hold
		}
		at := cursorOf(child, after)
		if at == beforeCursor {
			continue
		}
		link := e.Type()&fs.ModeSymlink != 0
		if at == intoCursor {
			if e.IsDir() && depth != 1 {
				if err := h.walkDir(ctx, op, child, depth-1, false, after, fn); err != nil {
					return err
				}
			}
			continue
		}
		after = Path{} // what follows comes after the cursor
		var fi fs.FileInfo
		if link {
			fi, err = h.root.Stat(hostName(child))
		} else {
			fi, err = e.Info()
		}
		if err != nil || (!fi.Mode().IsRegular() && !fi.IsDir()) {
			continue // escaping or dangling link, FIFO, device, or gone meanwhile
		}
		info := h.info(child, fi)
		err = fn(info, link)
		if errors.Is(err, fs.SkipDir) {
			continue
		}
		if err != nil {
			return err
		}
		if info.Kind == KindDir && !link && depth != 1 {
			if err := h.walkDir(ctx, op, child, depth-1, false, Path{}, fn); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkWritable fails with wserr.PathNotWritable on a read-only mount and
// with wserr.InvalidPath for the mount's root, which is never a file.
func (h *HostFS) checkWritable(op string, p Path) error {
	if !h.writable {
		return wserr.New(wserr.PathNotWritable, op, p.String(), "this host directory is mounted read-only")
	}
	if p.IsRoot() {
		return wserr.New(wserr.InvalidPath, op, p.String(), "the mount's root is a directory; name a file inside it")
	}
	if op != "remove" && strings.HasPrefix(p.Base(), hostTempPrefix) {
		// Such files are never listed or searched: a write of one
		// would make a file no listing shows.
		return wserr.New(wserr.InvalidPath, op, p.String(), "names beginning with %s are the store's temporary files; choose another name", hostTempPrefix)
	}
	return nil
}

// checkExpected fails with wserr.WriteStaleFile if want is set and the file
// p (whose hash is got, if it exists) does not have that hash.
func checkExpected(op string, p Path, want, got cas.Hash, exists bool) error {
	switch {
	case want.IsZero():
		return nil
	case !exists:
		return wserr.New(wserr.WriteStaleFile, op, p.String(), "expected hash %s, but the file does not exist", want.Short())
	}
	if got != want {
		return wserr.New(wserr.WriteStaleFile, op, p.String(), "file has changed: its hash is %s, not the expected %s; read it again", got.Short(), want.Short())
	}
	return nil
}

// Write replaces or appends to the file p, creating it if needed (never
// a directory: a missing parent is wserr.FileNotFound), under the mount's
// write lock (see HostFS). It fails with
// wserr.PathNotWritable on a read-only mount (or when the host refuses),
// wserr.InvalidArgument for an unknown mode, wserr.InvalidPath for the root
// or a path leading out of the mount, wserr.PathIsDirectory if p is a
// directory, wserr.NotADirectory if a file is in the way of a parent, and
// wserr.WriteStaleFile if opt.ExpectedHash is set and is not the file's
// current hash, wserr.InvalidPath for a name beginning with the prefix of
// the store's temporary files (.wsstore-write-), which no listing shows,
// and wserr.Busy when another writer held the directory's write lock for
// 30 seconds. On error the file is unchanged. A rewrite keeps the file's
// permission bits exactly; setuid and setgid are not carried over to the
// new content, as the system clears them when a file is written.
func (h *HostFS) Write(ctx context.Context, p Path, content []byte, opt WriteOptions) (FileInfo, error) {
	const op = "write"
	if err := ctx.Err(); err != nil {
		return FileInfo{}, canceled(op, p, err)
	}
	if err := h.checkWritable(op, p); err != nil {
		return FileInfo{}, err
	}
	if opt.Mode != "" && opt.Mode != Replace && opt.Mode != Append {
		return FileInfo{}, wserr.New(wserr.InvalidArgument, op, p.String(), "unknown write mode %s; use %q or %q", quoteForError(string(opt.Mode)), Replace, Append)
	}
	c, err := h.begin(ctx, op, p)
	if err != nil {
		return FileInfo{}, err
	}
	defer c.end()
	data := content
	if opt.Mode == Append {
		// The file and what is appended are written anew, together.
		old, exists, err := c.read()
		if err != nil {
			return FileInfo{}, err
		}
		if err := checkExpected(op, p, opt.ExpectedHash, cas.Sum(old), exists); err != nil {
			return FileInfo{}, err
		}
		if exists {
			data = append(old[:len(old):len(old)], content...)
		}
	} else {
		if err := c.checkReplaced(ctx, opt.ExpectedHash); err != nil {
			return FileInfo{}, err
		}
	}
	return c.replace(ctx, data)
}

// WriteFrom replaces the file p with what r yields, creating it if
// needed, as Write does in Replace mode, but streaming: the content goes
// through a buffer into the temporary file that is renamed over p, so
// memory does not grow with its size. It fails as Write does, and with
// workspace.invalid_argument wrapping r's own error (wserr.Source; ctx's
// end is store.canceled) if r fails; the file is then unchanged. The
// content is written to the temporary file before the directory's write
// lock is taken (a slow stream holds no other writer up); the lock is
// held from the check of opt.ExpectedHash to the rename.
func (h *HostFS) WriteFrom(ctx context.Context, p Path, r io.Reader, opt WriteOptions) (FileInfo, error) {
	const op = "write"
	if err := ctx.Err(); err != nil {
		return FileInfo{}, canceled(op, p, err)
	}
	if err := h.checkWritable(op, p); err != nil {
		return FileInfo{}, err
	}
	if opt.Mode != "" && opt.Mode != Replace {
		return FileInfo{}, wserr.New(wserr.InvalidArgument, op, p.String(), "a streamed write replaces the file; mode must be %q", Replace)
	}
	if r == nil {
		return FileInfo{}, wserr.New(wserr.InvalidArgument, op, p.String(), "nil reader")
	}
	r = wserr.Source(r, op, p.String())
	c, err := h.resolve(op, p, true)
	if err != nil {
		return FileInfo{}, err
	}
	defer c.end()
	// The content is staged before the lock is taken, so a slow stream
	// does not hold up the directory's other writers.
	st, err := c.stage(ctx, r)
	if err != nil {
		return FileInfo{}, err
	}
	defer st.discard()
	if err := c.lock(ctx); err != nil {
		return FileInfo{}, err
	}
	if err := c.checkReplaced(ctx, opt.ExpectedHash); err != nil {
		return FileInfo{}, err
	}
	return c.commit(ctx, st)
}

// Patch replaces old with new in the file p through ApplyPatch. It fails
// like Write, with wserr.FileNotFound if p does not exist, and with
// ApplyPatch's errors.
func (h *HostFS) Patch(ctx context.Context, p Path, old, new string, opt PatchOptions) (FileInfo, error) {
	const op = "patch"
	if err := ctx.Err(); err != nil {
		return FileInfo{}, canceled(op, p, err)
	}
	if err := h.checkWritable(op, p); err != nil {
		return FileInfo{}, err
	}
	c, err := h.begin(ctx, op, p)
	if err != nil {
		return FileInfo{}, err
	}
	defer c.end()
	cur, exists, err := c.read()
	if err != nil {
		return FileInfo{}, err
	}
	if !exists {
		return FileInfo{}, hostError(op, p, true, fs.ErrNotExist)
	}
	if err := checkExpected(op, p, opt.ExpectedHash, cas.Sum(cur), true); err != nil {
		return FileInfo{}, err
	}
	data, _, err := ApplyPatch(p, cur, old, new, opt.ReplaceAll)
	if err != nil {
		return FileInfo{}, err
	}
	return c.replace(ctx, data)
}

// hostChange is a change of one file of the mount under way: the
// directory the file is in, opened once and write-locked (see HostFS),
// and the file's name in it. Every step of the change, from reading what
// is there to the rename, goes through that directory, so a program that
// renames a directory of the mount or retargets a symlink meanwhile cannot
// make the change read one file and replace another, nor leave its
// temporary file where it cannot be removed.
type hostChange struct {
	h       *HostFS
	op      string
	p       Path
	dir     *os.Root
	dirName string // dir's name in the mount when it was resolved
	d       *os.File
	release func()
	base    string // the file's name in dir
}

// begin resolves p (following a symlink) and takes the lock of the
// directory the change is made in: resolve, then lock.
func (h *HostFS) begin(ctx context.Context, op string, p Path) (*hostChange, error) {
	c, err := h.resolve(op, p, true)
	if err != nil {
		return nil, err
	}
	if err := c.lock(ctx); err != nil {
		c.end()
		return nil, err
	}
	return c, nil
}

// resolve resolves p once, to the file a change of it makes: p itself
// or, when follow is set and p is a symlink, the file it leads to, and
// opens that file's directory. The caller calls end when the change is
// done or refused. It fails, for a change that writes (follow), with
// wserr.FileNotFound if the directory does not exist (the store creates
// none) and wserr.NotADirectory if a file is in its way; for a removal
// both are wserr.FileNotFound; and as hostError (a link leading out of
// the mount, a loop).
func (h *HostFS) resolve(op string, p Path, follow bool) (*hostChange, error) {
	name := hostName(p)
	if follow {
		if lfi, err := h.root.Lstat(name); err == nil && lfi.Mode()&fs.ModeSymlink != 0 {
			if name, err = h.linkTarget(name); errors.Is(err, errReplacedLink) {
				return nil, wserr.New(wserr.WriteStaleFile, op, p.String(), "the file was replaced by another program during the %s; try again", op)
			} else if err != nil {
				return nil, hostError(op, p, true, err)
			}
		}
	}
	dirName := filepath.Dir(name)
	dir, err := h.root.OpenRoot(dirName)
	if err != nil {
		// os.Root does not say why a directory cannot be opened as one
		// (a file in its place is an error of its own text), so ask.
		fi, serr := h.root.Stat(dirName)
		switch {
		case !follow && (serr == nil && !fi.IsDir() || errors.Is(serr, fs.ErrNotExist) || errors.Is(serr, syscall.ENOTDIR)):
			return nil, hostError(op, p, false, fs.ErrNotExist)
		case serr == nil && !fi.IsDir():
			return nil, wserr.New(wserr.NotADirectory, op, p.String(), "%s is a file, not a directory", filepath.ToSlash(dirName))
		case errors.Is(serr, fs.ErrNotExist):
			return nil, wserr.New(wserr.FileNotFound, op, p.String(), "directory %s does not exist on the host; the store creates no host directory", filepath.ToSlash(dirName))
		case serr != nil:
			return nil, hostError(op, p, true, serr)
		}
		return nil, hostError(op, p, true, err)
	}
	return &hostChange{h: h, op: op, p: p, dir: dir, dirName: dirName, base: filepath.Base(name)}, nil
}

// lock takes the write lock of the change's directory, waiting while
// another writer holds it, until ctx ends or hostLockWait has passed
// (then store.busy). A directory is locked by what
// it is, not by the name it was reached by, so a file changed by its
// name, through a link, or through another allowed path that holds it
// (one nested in this one, or this one in it) is changed under one lock.
func (c *hostChange) lock(ctx context.Context) error {
	d, err := c.dir.Open(".")
	if err != nil {
		return hostError(c.op, c.p, true, err)
	}
	wait, cancel := context.WithTimeout(ctx, hostLockWait)
	defer cancel()
	release, err := lockDir(wait, d, filepath.Join(c.h.root.Name(), c.dirName))
	if err != nil {
		d.Close()
		switch {
		case ctx.Err() != nil:
			return canceled(c.op, c.p, ctx.Err())
		case wait.Err() != nil:
			return wserr.New(wserr.Busy, c.op, c.p.String(), "another writer has held the write lock of the file's directory for %s; try again", hostLockWait)
		}
		return hostError(c.op, c.p, true, err)
	}
	c.d, c.release = d, release
	return nil
}

// end releases the lock, if taken, and the directory.
func (c *hostChange) end() {
	if c.d != nil {
		c.release()
		c.d.Close()
		c.d = nil
	}
	c.dir.Close()
}

// notWritable is the error for a change of a file whose permissions do
// not let this process write it: the change would replace it, which its
// directory's permissions alone would allow.
func (c *hostChange) notWritable() error {
	return wserr.New(wserr.PathNotWritable, c.op, c.p.String(), "the host file's permissions do not let this process write it")
}

// changedMeanwhile is the error for a file that another program kept
// replacing between the change's steps (with a symlink, or with another
// file each time it was opened): the change is refused, nothing written.
func (c *hostChange) changedMeanwhile() error {
	return wserr.New(wserr.WriteStaleFile, c.op, c.p.String(), "the file was replaced by another program during the %s; try again", c.op)
}

// lstat describes the file the change makes, if it exists: a regular
// file, since the change resolved every symlink (wserr.PathIsDirectory
// for a directory, wserr.InvalidPath for a FIFO or device).
func (c *hostChange) lstat() (fi fs.FileInfo, exists bool, err error) {
	fi, err = c.dir.Lstat(c.base)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, false, nil
	case err != nil:
		return nil, false, hostError(c.op, c.p, true, err)
	case fi.IsDir():
		return nil, false, isDirError(c.op, c.p)
	case fi.Mode()&fs.ModeSymlink != 0:
		return nil, false, c.changedMeanwhile()
	case !fi.Mode().IsRegular():
		return nil, false, notRegular(c.op, c.p)
	}
	return fi, true, nil
}

// open opens the file the change makes, if it exists, checked to be the
// one lstat saw: os.Root follows a symlink put in its place meanwhile,
// which the change must not read through. A file replaced by another
// between the two (an editor's save) is looked at again, a few times.
func (c *hostChange) open() (f *os.File, fi fs.FileInfo, exists bool, err error) {
	for range 3 {
		lfi, exists, err := c.lstat()
		if err != nil || !exists {
			return nil, nil, false, err
		}
		f, fi, err = c.h.openRegular(c.dir, c.base, c.op, c.p, true, lfi)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue // removed meanwhile: look again
		case errors.Is(err, errNotRegular):
			continue // replaced meanwhile: look again
		case err != nil:
			return nil, nil, false, err
		}
		if os.SameFile(lfi, fi) {
			return f, fi, true, nil
		}
		f.Close()
	}
	return nil, nil, false, c.changedMeanwhile()
}

// read returns the content of the file the change makes, if it exists,
// up to MaxReadBytes.
func (c *hostChange) read() (content []byte, exists bool, err error) {
	f, fi, exists, err := c.open()
	if err != nil || !exists {
		return nil, false, err
	}
	defer f.Close()
	b, err := readOpen(c.op, c.p, f, fi, true)
	return b, err == nil, err
}

// hash returns the hash and length of the file the change makes, if it
// exists, with its own description.
func (c *hostChange) hash(ctx context.Context, write bool) (hash cas.Hash, n int64, fi fs.FileInfo, exists bool, err error) {
	f, fi, exists, err := c.open()
	if err != nil || !exists {
		return cas.Hash{}, 0, nil, false, err
	}
	defer f.Close()
	hash, n, err = hashOpen(ctx, c.op, c.p, f, write)
	return hash, n, fi, err == nil, err
}

// checkReplaced checks that the file the change replaces may be replaced
// (it is not a directory), and that its hash is want if want is set:
// what is there is read only for its hash.
func (c *hostChange) checkReplaced(ctx context.Context, want cas.Hash) error {
	var hash cas.Hash
	var exists bool
	var err error
	if want.IsZero() {
		_, exists, err = c.lstat()
	} else {
		hash, _, _, exists, err = c.hash(ctx, true)
	}
	if err != nil {
		return err
	}
	return checkExpected(c.op, c.p, want, hash, exists)
}

// staged is content written to a temporary file in a change's
// directory, not yet in place. discard removes it unless commit renamed
// it.
type staged struct {
	c    *hostChange
	f    *os.File
	name string
	n    int64
	hash cas.Hash
	done bool
}

func (st *staged) discard() {
	if !st.done {
		st.f.Close()
		st.c.dir.Remove(st.name)
		st.done = true
	}
}

// replace makes data the content of the file the change makes; the
// caller holds the lock.
func (c *hostChange) replace(ctx context.Context, data []byte) (FileInfo, error) {
	st, err := c.stage(ctx, bytes.NewReader(data))
	if err != nil {
		return FileInfo{}, err
	}
	defer st.discard()
	return c.commit(ctx, st)
}

// stage writes what r yields to a new temporary file in the change's
// directory, with the mode of the file it will replace (or the default
// one), hashing it on the way. An error of r is returned as it is, the
// end of ctx as store.canceled; nothing is left behind on any error.
func (c *hostChange) stage(ctx context.Context, r io.Reader) (*staged, error) {
	if err := ctx.Err(); err != nil {
		return nil, canceled(c.op, c.p, err)
	}
	perm := fs.FileMode(hostFilePerm)
	fi, exists, err := c.lstat()
	if err != nil {
		return nil, err
	}
	if exists {
		if !mayWrite(fi) {
			return nil, c.notWritable()
		}
		perm = fi.Mode().Perm()
	}
	st := &staged{c: c, name: hostTempPrefix + rand.Text()}
	if st.f, err = c.dir.OpenFile(st.name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm); err != nil {
		return nil, hostError(c.op, c.p, true, err)
	}
	ok := false
	defer func() {
		if !ok { // an error, or r panicked
			st.discard()
		}
	}()
	sum := cas.NewHasher()
	defer sum.Release()
	n, readErr, err := copyContent(ctx, st.f, sum, r)
	switch {
	case readErr != nil && ctx.Err() != nil && errors.Is(readErr, ctx.Err()):
		return nil, canceled(c.op, c.p, readErr)
	case readErr != nil:
		return nil, readErr
	case err != nil:
		return nil, hostError(c.op, c.p, true, err)
	}
	st.n, st.hash = n, sum.Sum()
	ok = true
	return st, nil
}

// commit renames the staged content over the file the change makes,
// once it has the file's mode exactly (the umask must not narrow an
// existing file's) and is synced; the caller holds the lock.
func (c *hostChange) commit(ctx context.Context, st *staged) (FileInfo, error) {
	if err := ctx.Err(); err != nil {
		return FileInfo{}, canceled(c.op, c.p, err)
	}
	fi, exists, err := c.lstat()
	if err != nil {
		return FileInfo{}, err
	}
	if exists {
		if !mayWrite(fi) {
			return FileInfo{}, c.notWritable()
		}
		err = st.f.Chmod(fi.Mode().Perm())
	}
	if err == nil {
		err = st.f.Sync()
	}
	if cerr := st.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = ctx.Err()
		if err != nil {
			return FileInfo{}, canceled(c.op, c.p, err)
		}
		err = c.dir.Rename(st.name, c.base)
	}
	if err != nil {
		return FileInfo{}, hostError(c.op, c.p, true, err)
	}
	st.done = true
	if fi, err = c.dir.Lstat(c.base); err != nil {
		return FileInfo{}, hostError(c.op, c.p, true, err)
	}
	info := c.h.info(c.p, fi)
	info.Size, info.Hash = st.n, st.hash
	return info, nil
}

// copyContent copies r into f and sum until r ends, checking ctx between
// reads. readErr is r's error, or ctx's; err is f's.
func copyContent(ctx context.Context, f *os.File, sum io.Writer, r io.Reader) (n int64, readErr, err error) {
	buf := make([]byte, 64<<10)
	for {
		if err := ctx.Err(); err != nil {
			return n, err, nil
		}
		m, rerr := r.Read(buf)
		if m > 0 {
			if _, err := f.Write(buf[:m]); err != nil {
				return n, nil, err
			}
			sum.Write(buf[:m])
			n += int64(m)
		}
		switch {
		case rerr == io.EOF:
			return n, nil, nil
		case rerr != nil:
			return n, rerr, nil
		}
	}
}

// maxLinkHops bounds the symlinks linkTarget follows, as the system's
// own limit (ELOOP) does.
const maxLinkHops = 40

// errLinkEscapes is linkTarget's answer for a link that leads out of the
// mount, or is absolute, which os.Root never follows either.
var errLinkEscapes = errors.New("path escapes from parent")

// linkTarget returns the name, inside the mount, of the file the symlink
// name leads to, every link on the way followed one component at a time
// as the system follows them (a link's ".." is its real directory's
// parent). The last component may not exist: a write through a dangling
// link creates its target.
func (h *HostFS) linkTarget(name string) (string, error) {
	var done []string // resolved components, none of them a link
	rest := strings.Split(filepath.ToSlash(name), "/")
	trailing := false // the last component was "", "." or "..": a directory is named
	for hops := 0; len(rest) > 0; {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case "", ".":
			trailing = true
			continue
		case "..":
			if len(done) == 0 {
				return "", errLinkEscapes
			}
			done = done[:len(done)-1]
			trailing = true
			continue
		}
		trailing = false
		cur := filepath.Join(append(done, c)...)
		fi, err := h.root.Lstat(cur)
		switch {
		case errors.Is(err, fs.ErrNotExist) && len(rest) == 0:
			return cur, nil
		case err != nil:
			return "", err
		case fi.Mode()&fs.ModeSymlink == 0:
			done = append(done, c)
			continue
		}
		if hops++; hops > maxLinkHops {
			return "", syscall.ELOOP
		}
		to, err := h.root.Readlink(cur)
		if errors.Is(err, syscall.EINVAL) || errors.Is(err, fs.ErrNotExist) {
			return "", errReplacedLink // no longer a link, or gone, since Lstat
		}
		if err != nil {
			return "", err
		}
		if filepath.IsAbs(to) || filepath.VolumeName(to) != "" {
			return "", errLinkEscapes
		}
		rest = append(strings.Split(filepath.ToSlash(to), "/"), rest...)
	}
	if len(done) == 0 {
		return "", syscall.EISDIR // the mount's own directory
	}
	if trailing {
		// "f.txt/" names a directory, as the system reads it.
		if fi, err := h.root.Lstat(filepath.Join(done...)); err == nil && !fi.IsDir() {
			return "", syscall.ENOTDIR
		}
	}
	return filepath.Join(done...), nil
}

// Remove deletes the file p (a symlink itself, not its target: a link
// that is dangling, loops, or leads out of the mount is removed too, and
// nothing it names is touched). It fails
// with wserr.PathNotWritable on a read-only mount, wserr.FileNotFound,
// wserr.PathIsDirectory for a directory or a link to one (directories are
// the host's to manage), wserr.InvalidPath for the root, a path whose
// directory lies out of the mount, or a FIFO, socket or device (or a link
// to one), which the store neither reads nor writes, and wserr.Busy when
// another writer held the directory's write lock for 30 seconds.
func (h *HostFS) Remove(ctx context.Context, p Path) error {
	_, err := h.RemoveFile(ctx, p)
	return err
}

// RemoveFile is Remove that also describes what it removed, as Stat would
// (the file a symlink leads to, hashed for a regular file), read under the
// same write lock as the removal, so another writer of the mount cannot
// change the file between the two. A symlink is described by the file it
// leads to as seen from the locked directory; one that leads out of that
// directory is described by the file its path leads to from the mount's
// root, which a program moving directories meanwhile may change. A link
// that leads to no file of the mount is described as itself, with zero
// size and hash.
func (h *HostFS) RemoveFile(ctx context.Context, p Path) (FileInfo, error) {
	const op = "remove"
	if err := ctx.Err(); err != nil {
		return FileInfo{}, canceled(op, p, err)
	}
	if err := h.checkWritable(op, p); err != nil {
		return FileInfo{}, err
	}
	c, err := h.resolve(op, p, false)
	if err != nil {
		return FileInfo{}, err
	}
	defer c.end()
	if err := c.lock(ctx); err != nil {
		return FileInfo{}, err
	}
	lfi, err := c.dir.Lstat(c.base)
	if err != nil {
		return FileInfo{}, hostError(op, p, false, err)
	}
	var info FileInfo
	switch {
	case lfi.IsDir():
		return FileInfo{}, isDirError(op, p)
	case lfi.Mode()&fs.ModeSymlink != 0:
		if info, err = c.describeLink(ctx, lfi); err != nil {
			return FileInfo{}, err
		}
	case lfi.Mode().IsRegular():
		hash, n, fi, exists, err := c.hash(ctx, false)
		switch {
		case err != nil:
			return FileInfo{}, err
		case !exists:
			return FileInfo{}, hostError(op, p, false, fs.ErrNotExist)
		}
		info = h.info(p, fi)
		info.Size, info.Hash = n, hash
	default:
		return FileInfo{}, notRegular(op, p)
	}
	if err := c.dir.Remove(c.base); err != nil {
		return FileInfo{}, hostError(op, p, true, err)
	}
	return info, nil
}

// describeLink describes the file the symlink the change names leads to,
// as Stat does: followed inside the change's directory, or from the
// mount's root for a link that leads out of it. A link that leads to no
// file (dangling, a loop, or out of the mount) is described as itself,
// with no content (zero size and hash): removing it removes only the link.
// lfi is the link's own description.
func (c *hostChange) describeLink(ctx context.Context, lfi fs.FileInfo) (FileInfo, error) {
	r, name := c.dir, c.base
	_, err := r.Stat(name)
	if err != nil && isRootEscape(err) {
		r, name = c.h.root, hostName(c.p)
		_, err = r.Stat(name)
	}
	if err != nil && leadsNowhere(err) {
		info := c.h.info(c.p, lfi)
		info.Size = 0
		return info, nil
	}
	return c.h.describe(ctx, r, name, c.op, c.p)
}

// leadsNowhere reports whether err, a stat's through a symlink, says the
// link reaches no file of the mount: its target is missing, a file is in
// the way of its path, it loops, or it leads out of the mount.
func leadsNowhere(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) ||
		errors.Is(err, syscall.ELOOP) || isRootEscape(err)
}

// describe describes the file name leads to in r, as Stat does, for a
// removal of p (op): a directory is wserr.PathIsDirectory, a FIFO, socket
// or device wserr.InvalidPath.
func (h *HostFS) describe(ctx context.Context, r *os.Root, name, op string, p Path) (FileInfo, error) {
	fi, err := r.Stat(name)
	switch {
	case err != nil:
		return FileInfo{}, hostError(op, p, false, err)
	case fi.IsDir():
		return FileInfo{}, isDirError(op, p)
	case !fi.Mode().IsRegular():
		return FileInfo{}, notRegular(op, p)
	}
	f, fi, err := h.openRegular(r, name, op, p, false, fi)
	if err != nil {
		return FileInfo{}, err
	}
	defer f.Close()
	hash, n, err := hashOpen(ctx, op, p, f, false)
	if err != nil {
		return FileInfo{}, err
	}
	info := h.info(p, fi)
	info.Size, info.Hash = n, hash
	return info, nil
}

// Search scores the text files at or below opt.Path. It walks like List
// (not into symlinked directories), skips version-control directories and
// files over 4 MiB, and stops after opt.MaxFiles files. It fails with
// wserr.InvalidArgument for a bad query or options and like Stat for
// opt.Path; files that vanish or cannot be read during the walk are
// skipped.
func (h *HostFS) Search(ctx context.Context, query string, opt SearchOptions) (SearchResult, error) {
	const op = "search"
	s, err := NewSearcher(query, opt)
	if err != nil {
		return SearchResult{}, err
	}
	fi, err := h.stat(op, opt.Path, false)
	if err != nil {
		return SearchResult{}, err
	}
	add := func(p Path, size int64) {
		if size > MaxSearchFile {
			return
		}
		if b, _, err := h.readFile(op, p, false); err == nil {
			s.Add(p, b)
		}
	}
	if !fi.IsDir() {
		add(opt.Path, fi.Size())
		return s.Result(), nil
	}
	err = h.walk(ctx, op, opt.Path, -1, func(info FileInfo, _ bool) error {
		if s.Full() {
			return fs.SkipAll
		}
		if info.Kind == KindDir {
			if hostSkipDirs[info.Path.Base()] {
				return fs.SkipDir
			}
			return nil
		}
		add(info.Path, info.Size)
		return nil
	})
	if err != nil && !errors.Is(err, fs.SkipAll) {
		return SearchResult{}, err
	}
	return s.Result(), nil
}
