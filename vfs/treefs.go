package vfs

import (
	"context"
	"io"
	"io/fs"
	"time"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/wserr"
)

// FS returns a read-only io/fs view of the tree root: it implements fs.FS,
// fs.ReadDirFS, fs.StatFS and fs.ReadFileFS, reads trees through the read
// pool and file contents through t's cas.Store (verified, as cas.Get
// guarantees). ctx bounds every operation on the view, since io/fs has no
// context of its own. Files have mode 0444 and directories fs.ModeDir|0555;
// modification times are zero because trees record none. A directory's
// Size is the total of the files below it. Info().Sys() returns the Entry.
//
// Errors are *fs.PathError: fs.ErrNotExist for paths that name nothing
// (including names no tree can hold), fs.ErrInvalid for names fs.ValidPath
// refuses, and otherwise the store's error (a *wserr.Error) as the cause:
// once the store is closed every call fails with store.closed, even one
// the cache of trees could answer.
func (t *Trees) FS(ctx context.Context, root cas.Hash) fs.FS {
	return &treeFS{ctx: ctx, t: t, root: root}
}

// treeFS is the view FS returns.
type treeFS struct {
	ctx  context.Context
	t    *Trees
	root cas.Hash
}

// resolve finds the entry an io/fs name refers to.
func (f *treeFS) resolve(op, name string) (Path, Entry, error) {
	if !fs.ValidPath(name) {
		return Path{}, Entry{}, &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	var p Path
	if name != "." {
		var err error
		// fs.ValidPath allows names (with a backslash, say) that no tree
		// holds, so they do not exist. The rules about names other
		// platforms treat specially are left out, as when a tree is
		// decoded: a name stored before them is listed, so it opens.
		if p, err = parseRules("open", name, false); err != nil {
			return Path{}, Entry{}, &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
		}
	}
	e, err := f.t.Lookup(f.ctx, nil, f.root, p)
	if wserr.Is(err, wserr.FileNotFound) {
		return Path{}, Entry{}, &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
	}
	if err != nil {
		return Path{}, Entry{}, &fs.PathError{Op: op, Path: name, Err: err}
	}
	return p, e, nil
}

// Open opens the file or directory name.
func (f *treeFS) Open(name string) (fs.File, error) {
	p, e, err := f.resolve("open", name)
	if err != nil {
		return nil, err
	}
	info := newTreeInfo(p, e)
	if e.Kind == KindDir {
		es, err := f.t.load(f.ctx, nil, e.Hash)
		if err != nil {
			return nil, &fs.PathError{Op: "open", Path: name, Err: err}
		}
		return &treeDir{fs: f, name: name, path: p, info: info, entries: es}, nil
	}
	return &treeFile{fs: f, name: name, info: info}, nil
}

// Stat describes name without opening it.
func (f *treeFS) Stat(name string) (fs.FileInfo, error) {
	p, e, err := f.resolve("stat", name)
	if err != nil {
		return nil, err
	}
	return newTreeInfo(p, e), nil
}

// ReadDir lists the directory name, sorted by name.
func (f *treeFS) ReadDir(name string) ([]fs.DirEntry, error) {
	p, e, err := f.resolve("readdir", name)
	if err != nil {
		return nil, err
	}
	if e.Kind != KindDir {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: wserr.New(wserr.NotADirectory, "", "", "not a directory")}
	}
	es, err := f.t.load(f.ctx, nil, e.Hash)
	if err != nil {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: err}
	}
	out := make([]fs.DirEntry, len(es))
	for i, c := range es {
		out[i] = newTreeInfo(childPath(p, c.Name), c)
	}
	return out, nil
}

// ReadFile returns the whole content of the file name.
func (f *treeFS) ReadFile(name string) ([]byte, error) {
	_, e, err := f.resolve("read", name)
	if err != nil {
		return nil, err
	}
	if e.Kind != KindFile {
		return nil, &fs.PathError{Op: "read", Path: name, Err: wserr.New(wserr.PathIsDirectory, "", "", "is a directory")}
	}
	b, err := f.t.blobs.ReadAll(f.ctx, e.Hash)
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: name, Err: err}
	}
	return b, nil
}

// treeInfo is both the fs.FileInfo and the fs.DirEntry of an entry.
type treeInfo struct {
	name  string
	entry Entry
}

func newTreeInfo(p Path, e Entry) *treeInfo {
	return &treeInfo{name: p.Base(), entry: e}
}

func (i *treeInfo) Name() string       { return i.name }
func (i *treeInfo) Size() int64        { return i.entry.Size }
func (i *treeInfo) ModTime() time.Time { return time.Time{} }
func (i *treeInfo) IsDir() bool        { return i.entry.Kind == KindDir }
func (i *treeInfo) Sys() any           { return i.entry }
func (i *treeInfo) Type() fs.FileMode  { return i.Mode().Type() }

func (i *treeInfo) Info() (fs.FileInfo, error) { return i, nil }
func (i *treeInfo) String() string             { return fs.FormatFileInfo(i) }

func (i *treeInfo) Mode() fs.FileMode {
	if i.IsDir() {
		return fs.ModeDir | 0o555
	}
	return 0o444
}

// treeFile is an open file. Its content is fetched on the first Read, so
// Open and Stat of a large file cost no blob read.
type treeFile struct {
	fs     *treeFS
	name   string // as given to Open, for errors
	info   *treeInfo
	r      io.ReadCloser
	closed bool
}

func (f *treeFile) Stat() (fs.FileInfo, error) {
	if f.closed {
		return nil, &fs.PathError{Op: "stat", Path: f.name, Err: fs.ErrClosed}
	}
	return f.info, nil
}

func (f *treeFile) Read(b []byte) (int, error) {
	if f.closed {
		return 0, &fs.PathError{Op: "read", Path: f.name, Err: fs.ErrClosed}
	}
	if f.r == nil {
		r, err := f.fs.t.blobs.Get(f.fs.ctx, f.info.entry.Hash)
		if err != nil {
			return 0, &fs.PathError{Op: "read", Path: f.name, Err: err}
		}
		f.r = r
	}
	return f.r.Read(b)
}

func (f *treeFile) Close() error {
	if f.closed {
		return &fs.PathError{Op: "close", Path: f.name, Err: fs.ErrClosed}
	}
	f.closed = true
	if f.r != nil {
		return f.r.Close()
	}
	return nil
}

// treeDir is an open directory; ReadDir pages through its entries.
type treeDir struct {
	fs      *treeFS
	name    string // as given to Open, for errors
	path    Path
	info    *treeInfo
	entries []Entry // shared with the tree cache: read only
	off     int
	closed  bool
}

func (d *treeDir) Stat() (fs.FileInfo, error) {
	if d.closed {
		return nil, &fs.PathError{Op: "stat", Path: d.name, Err: fs.ErrClosed}
	}
	return d.info, nil
}

func (d *treeDir) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.name, Err: wserr.New(wserr.PathIsDirectory, "", "", "is a directory")}
}

func (d *treeDir) Close() error {
	if d.closed {
		return &fs.PathError{Op: "close", Path: d.name, Err: fs.ErrClosed}
	}
	d.closed = true
	return nil
}

// ReadDir follows fs.ReadDirFile: n > 0 returns at most n entries and
// io.EOF at the end; n <= 0 returns all remaining entries and a nil error.
func (d *treeDir) ReadDir(n int) ([]fs.DirEntry, error) {
	if d.closed {
		return nil, &fs.PathError{Op: "readdir", Path: d.name, Err: fs.ErrClosed}
	}
	if err := d.fs.t.db.CheckOpen("readdir"); err != nil {
		return nil, &fs.PathError{Op: "readdir", Path: d.name, Err: err}
	}
	rest := d.entries[d.off:]
	if n > 0 && len(rest) == 0 {
		return nil, io.EOF
	}
	if n > 0 && n < len(rest) {
		rest = rest[:n]
	}
	d.off += len(rest)
	out := make([]fs.DirEntry, len(rest))
	for i, c := range rest {
		out[i] = newTreeInfo(childPath(d.path, c.Name), c)
	}
	return out, nil
}

var (
	_ fs.ReadDirFS   = (*treeFS)(nil)
	_ fs.StatFS      = (*treeFS)(nil)
	_ fs.ReadFileFS  = (*treeFS)(nil)
	_ fs.ReadDirFile = (*treeDir)(nil)
)
