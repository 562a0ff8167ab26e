package vfs

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/wserr"
)

// readOnlyMessage is what every write to a virtual resource answers: the
// model can fix the call by working on a copy it is allowed to change.
const readOnlyMessage = "virtual resources are read-only; materialize it into input/ or copy it into output/"

// Provider serves read-only resources below one prefix. Paths given to it
// are relative to that prefix; Root() is the prefix itself, which is a
// directory for most providers and the file itself for one made by
// FileProvider. A provider reports errors with its relative paths; Virtual
// rewrites them to workspace paths.
type Provider interface {
	FS
}

// Virtual routes workspace paths to providers mounted at prefixes. Mounted
// prefixes never overlap, so a path has at most one provider. The
// directories above the prefixes exist only to reach them: Stat and List
// show them as directories, empty except for the way down.
//
// Virtual implements FS, WriteFS (every change fails with
// wserr.ReadOnlyResource) and SearchFS. Every FileInfo it returns says
// Resource Virtual and Writable false, and carries the full workspace
// path. It is safe for concurrent use.
type Virtual struct {
	mu    sync.RWMutex
	mount map[Path]Provider
}

var (
	_ WriteFS  = (*Virtual)(nil)
	_ SearchFS = (*Virtual)(nil)
)

// NewVirtual returns a Virtual with nothing mounted.
func NewVirtual() *Virtual {
	return &Virtual{mount: make(map[Path]Provider)}
}

// Mount serves p at prefix. It fails with wserr.InvalidArgument if prefix is
// the root, p is nil, or prefix equals, contains or lies inside a prefix
// already mounted: nested mounts would make a path's owner depend on
// mount order.
func (v *Virtual) Mount(prefix Path, p Provider) error {
	const op = "mount"
	if prefix.IsRoot() {
		return wserr.New(wserr.InvalidArgument, op, prefix.String(), "a virtual provider cannot be mounted at the workspace root")
	}
	if p == nil {
		return wserr.New(wserr.InvalidArgument, op, prefix.String(), "provider is nil")
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	for q := range v.mount {
		if prefix.HasPrefix(q) || q.HasPrefix(prefix) {
			return wserr.New(wserr.InvalidArgument, op, prefix.String(), "overlaps the virtual prefix %s already mounted", q)
		}
	}
	v.mount[prefix] = p
	return nil
}

// Match returns the prefix whose provider serves p, p relative to it, and
// the provider; ok is false if no prefix holds p.
func (v *Virtual) Match(p Path) (prefix Path, rel Path, prov Provider, ok bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	// Prefixes do not overlap, so the longest match is the only one; it is
	// found by trying p and each directory above it.
	for q := p; ; q = q.Dir() {
		if prov, ok := v.mount[q]; ok {
			return q, relativeTo(p, q), prov, true
		}
		if q.IsRoot() {
			return Path{}, Path{}, nil, false
		}
	}
}

// Prefixes returns the mounted prefixes in path order.
func (v *Virtual) Prefixes() []Path {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return slices.SortedFunc(maps.Keys(v.mount), comparePathSegments)
}

// relativeTo returns p relative to its ancestor q (p.HasPrefix(q)). A part
// of a clean path is clean, so no validation is needed.
func relativeTo(p, q Path) Path {
	if q.IsRoot() {
		return p
	}
	if len(p.s) == len(q.s) {
		return Path{}
	}
	return Path{s: p.s[len(q.s)+1:]}
}

// underPrefix returns rel below prefix, failing with wserr.InvalidPath if
// the joined path is too long to be a workspace path.
func underPrefix(op string, prefix, rel Path) (Path, error) {
	switch {
	case rel.IsRoot():
		return prefix, nil
	case prefix.IsRoot():
		return rel, nil
	}
	s := prefix.s + "/" + rel.s
	if len(s) > MaxPathLen {
		return Path{}, wserr.New(wserr.InvalidPath, op, quoteForError(s), "path is %d bytes, longer than the limit of %d", len(s), MaxPathLen)
	}
	return Path{s: s}, nil
}

// virtualDir is the FileInfo of a directory that exists only above
// prefixes.
func virtualDir(p Path) FileInfo {
	return FileInfo{Path: p, Kind: KindDir, Resource: ResourceVirtual}
}

// isAbovePrefix reports whether p is a strict ancestor of a mounted prefix,
// or the root.
func (v *Virtual) isAbovePrefix(p Path) bool {
	if p.IsRoot() {
		return true
	}
	v.mu.RLock()
	defer v.mu.RUnlock()
	for q := range v.mount {
		if q.HasPrefix(p) {
			return true
		}
	}
	return false
}

// rebase turns info from a provider mounted at prefix into a workspace
// FileInfo.
func rebase(op string, prefix Path, info FileInfo) (FileInfo, error) {
	p, err := underPrefix(op, prefix, info.Path)
	if err != nil {
		return FileInfo{}, err
	}
	info.Path = p
	info.Resource = ResourceVirtual
	info.Writable = false
	return info, nil
}

// providerError rewrites a provider's error, whose path is relative to
// prefix, into one about the workspace path; full is the path to report
// when the error names none. Errors without a code are a provider's
// failure, not the model's, and become wserr.Internal.
func providerError(op string, prefix, full Path, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var e *wserr.Error
	if !errors.As(err, &e) {
		return wserr.Wrap(wserr.Internal, op, full.String(), err)
	}
	c := *e
	switch rel, perr := ParsePath(c.Path); {
	case c.Path == "":
		c.Path = full.String()
	case c.Path == ".":
		c.Path = prefix.String()
	case perr == nil:
		if p, jerr := underPrefix(op, prefix, rel); jerr == nil {
			c.Path = p.String()
		}
	}
	return &c
}

// Stat returns the FileInfo of p: a provider's resource, or a directory
// above the prefixes. It fails with wserr.FileNotFound if p is neither,
// and passes on the provider's errors with workspace paths.
func (v *Virtual) Stat(ctx context.Context, p Path) (FileInfo, error) {
	const op = "stat"
	if err := ctx.Err(); err != nil {
		return FileInfo{}, canceled(op, p, err)
	}
	if prefix, rel, prov, ok := v.Match(p); ok {
		info, err := prov.Stat(ctx, rel)
		if err != nil {
			return FileInfo{}, providerError(op, prefix, p, err)
		}
		return rebase(op, prefix, info)
	}
	if v.isAbovePrefix(p) {
		return virtualDir(p), nil
	}
	return FileInfo{}, virtualNotFound(op, p)
}

func virtualNotFound(op string, p Path) error {
	return wserr.New(wserr.FileNotFound, op, p.String(), "no such virtual resource")
}

// Read reads p from its provider. It fails with wserr.PathIsDirectory for a
// directory above the prefixes, wserr.FileNotFound for a path no provider
// holds, and passes on the provider's errors (range errors included) with
// workspace paths.
func (v *Virtual) Read(ctx context.Context, p Path, opt ReadOptions) (ReadResult, error) {
	const op = "read"
	if err := ctx.Err(); err != nil {
		return ReadResult{}, canceled(op, p, err)
	}
	prefix, rel, prov, ok := v.Match(p)
	if !ok {
		if v.isAbovePrefix(p) {
			return ReadResult{}, wserr.New(wserr.PathIsDirectory, op, p.String(), "is a directory; list it, or read a file inside it")
		}
		return ReadResult{}, virtualNotFound(op, p)
	}
	res, err := prov.Read(ctx, rel, opt)
	if err != nil {
		return ReadResult{}, providerError(op, prefix, p, err)
	}
	if res.Info, err = rebase(op, prefix, res.Info); err != nil {
		return ReadResult{}, err
	}
	return res, nil
}

// List lists p to depth levels (0 means 1), in path order compared segment
// by segment. Below a prefix the provider lists; above the prefixes List
// shows the directories on the way to them and, once it reaches a prefix,
// what its provider lists there. A file lists as itself. It fails with
// wserr.FileNotFound if p does not exist.
func (v *Virtual) List(ctx context.Context, p Path, depth int) ([]FileInfo, error) {
	const op = "list"
	if err := ctx.Err(); err != nil {
		return nil, canceled(op, p, err)
	}
	if depth <= 0 {
		depth = 1
	}
	if prefix, rel, prov, ok := v.Match(p); ok {
		return v.listProvider(ctx, prefix, rel, prov, depth)
	}
	if !v.isAbovePrefix(p) {
		return nil, virtualNotFound(op, p)
	}
	var out []FileInfo
	dirs := make(map[Path]bool)
	for _, q := range v.Prefixes() {
		if !q.HasPrefix(p) {
			continue
		}
		rest := relativeTo(q, p).Segments()
		// The directories between p and q, as far as depth reaches.
		d := p
		for i, name := range rest[:len(rest)-1] {
			if i+1 > depth {
				break
			}
			d = Path{s: strings.TrimPrefix(d.s+"/"+name, "/")}
			if !dirs[d] {
				dirs[d] = true
				out = append(out, virtualDir(d))
			}
		}
		if len(rest) > depth {
			continue
		}
		_, _, prov, ok := v.Match(q)
		if !ok {
			continue // unmounted meanwhile
		}
		info, err := prov.Stat(ctx, Root())
		if err != nil {
			return nil, providerError(op, q, q, err)
		}
		if info, err = rebase(op, q, info); err != nil {
			return nil, err
		}
		out = append(out, info)
		if info.Kind == KindDir && len(rest) < depth {
			below, err := v.listProvider(ctx, q, Root(), prov, depth-len(rest))
			if err != nil {
				return nil, err
			}
			out = append(out, below...)
		}
	}
	sortInfos(out)
	return out, nil
}

// listProvider lists rel in prov, mounted at prefix, with workspace paths.
func (v *Virtual) listProvider(ctx context.Context, prefix, rel Path, prov Provider, depth int) ([]FileInfo, error) {
	const op = "list"
	infos, err := prov.List(ctx, rel, depth)
	if err != nil {
		full, _ := underPrefix(op, prefix, rel)
		return nil, providerError(op, prefix, full, err)
	}
	out := make([]FileInfo, 0, len(infos))
	for _, info := range infos {
		info, err := rebase(op, prefix, info)
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	sortInfos(out)
	return out, nil
}

func sortInfos(infos []FileInfo) {
	slices.SortFunc(infos, func(a, b FileInfo) int { return comparePathSegments(a.Path, b.Path) })
}

// Write always fails with wserr.ReadOnlyResource.
func (v *Virtual) Write(ctx context.Context, p Path, content []byte, opt WriteOptions) (FileInfo, error) {
	return FileInfo{}, wserr.New(wserr.ReadOnlyResource, "write", p.String(), readOnlyMessage)
}

// Patch always fails with wserr.ReadOnlyResource.
func (v *Virtual) Patch(ctx context.Context, p Path, old, new string, opt PatchOptions) (FileInfo, error) {
	return FileInfo{}, wserr.New(wserr.ReadOnlyResource, "patch", p.String(), readOnlyMessage)
}

// Remove always fails with wserr.ReadOnlyResource.
func (v *Virtual) Remove(ctx context.Context, p Path) error {
	return wserr.New(wserr.ReadOnlyResource, "remove", p.String(), readOnlyMessage)
}

// Search scores the text files below opt.Path (or opt.Path itself if it is
// a file) across all providers, reading them through List and Read; files
// over MaxSearchFile are passed over, as every search passes them. From a
// directory above the prefixes, a mount whose provider fails is passed
// over and named in the result's Skipped (SearchBelow). It fails with
// wserr.InvalidArgument for a bad query or options, wserr.FileNotFound if
// opt.Path does not exist, and, for a path at or inside a prefix, with the
// first error its provider returns.
func (v *Virtual) Search(ctx context.Context, query string, opt SearchOptions) (SearchResult, error) {
	s, err := NewSearcher(query, opt)
	if err != nil {
		return SearchResult{}, err
	}
	if _, _, _, ok := v.Match(opt.Path); ok || !v.isAbovePrefix(opt.Path) {
		err = searchWalk(ctx, v, opt.Path, s)
	} else {
		err = v.SearchBelow(ctx, s, opt.Path)
	}
	if err != nil {
		return SearchResult{}, err
	}
	return s.Result(), nil
}

// SearchBelow offers s the text files of the mounts strictly below dir
// (every mount for the root), in path order, until s is full. A mount
// whose provider fails is recorded with s.Skip and the search goes on
// with the next; only the end of ctx (store.canceled) fails it.
func (v *Virtual) SearchBelow(ctx context.Context, s *Searcher, dir Path) error {
	for _, q := range v.Prefixes() {
		if q == dir || !q.HasPrefix(dir) {
			continue
		}
		if s.Full() {
			return nil
		}
		err := searchWalk(ctx, v, q, s)
		if cerr := ctx.Err(); cerr != nil {
			return canceled("search", q, cerr)
		}
		if err != nil {
			s.Skip(q, err)
		}
	}
	return nil
}

// searchWalk offers the files at and below p in fsys to s, one directory
// level at a time so that it can stop once s is full. It suits file
// systems without cycles; HostFS, which may have symlinked directories,
// walks on its own.
func searchWalk(ctx context.Context, fsys FS, p Path, s *Searcher) error {
	infos, err := fsys.List(ctx, p, 1)
	if err != nil {
		return err
	}
	for _, info := range infos {
		if s.Full() {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return canceled("search", p, err)
		}
		switch {
		case info.Kind == KindDir && info.Path != p:
			if err := searchWalk(ctx, fsys, info.Path, s); err != nil {
				return err
			}
		case info.Kind == KindFile && info.Size <= MaxSearchFile:
			res, err := fsys.Read(ctx, info.Path, ReadOptions{})
			if err != nil {
				return err
			}
			s.Add(info.Path, res.Content)
		}
	}
	return nil
}

// StaticProvider serves a fixed set of in-memory files, for tests and for
// hosts with small virtual documents.
type StaticProvider struct {
	files map[Path]staticFile
	dirs  map[Path]bool // every directory above a file, the root included
}

type staticFile struct {
	content []byte
	hash    cas.Hash
}

var _ Provider = (*StaticProvider)(nil)

// NewStaticProvider returns a provider serving files, keyed by path
// relative to the prefix it will be mounted at. It copies the contents.
// It fails with wserr.InvalidPath for a key that is not a valid path and
// wserr.InvalidArgument if two keys name the same path once cleaned or a
// key is both a file and a directory above another.
func NewStaticProvider(files map[string][]byte) (*StaticProvider, error) {
	const op = "static provider"
	sp := &StaticProvider{files: make(map[Path]staticFile, len(files)), dirs: map[Path]bool{{}: true}}
	// Sorted keys make the reported conflict the same on every run.
	for _, k := range slices.Sorted(maps.Keys(files)) {
		p, err := ParsePath(k)
		if err != nil {
			return nil, err
		}
		if _, dup := sp.files[p]; dup {
			return nil, wserr.New(wserr.InvalidArgument, op, p.String(), "given twice (keys %q clean to the same path)", k)
		}
		c := slices.Clone(files[k])
		if c == nil {
			c = []byte{}
		}
		sp.files[p] = staticFile{content: c, hash: cas.Sum(c)}
		for d := p.Dir(); !d.IsRoot(); d = d.Dir() {
			sp.dirs[d] = true
		}
	}
	for p := range sp.files {
		if sp.dirs[p] {
			return nil, wserr.New(wserr.InvalidArgument, op, p.String(), "is both a file and a directory above other files")
		}
	}
	return sp, nil
}

func (sp *StaticProvider) info(p Path) (FileInfo, bool) {
	if f, ok := sp.files[p]; ok {
		return FileInfo{Path: p, Kind: KindFile, Size: int64(len(f.content)), Hash: f.hash, Resource: ResourceVirtual}, true
	}
	if sp.dirs[p] {
		return FileInfo{Path: p, Kind: KindDir, Resource: ResourceVirtual}, true
	}
	return FileInfo{}, false
}

// Stat returns the FileInfo of p, or wserr.FileNotFound.
func (sp *StaticProvider) Stat(ctx context.Context, p Path) (FileInfo, error) {
	info, ok := sp.info(p)
	if !ok {
		return FileInfo{}, virtualNotFound("stat", p)
	}
	return info, nil
}

// Read returns p's content (a copy) through ReadRange. It fails with
// wserr.FileNotFound, wserr.PathIsDirectory or ReadRange's errors.
func (sp *StaticProvider) Read(ctx context.Context, p Path, opt ReadOptions) (ReadResult, error) {
	const op = "read"
	f, ok := sp.files[p]
	if !ok {
		if sp.dirs[p] {
			return ReadResult{}, wserr.New(wserr.PathIsDirectory, op, p.String(), "is a directory; list it, or read a file inside it")
		}
		return ReadResult{}, virtualNotFound(op, p)
	}
	res, err := ReadRange(p, f.content, opt)
	if err != nil {
		return ReadResult{}, err
	}
	res.Content = slices.Clone(res.Content)
	res.Info, _ = sp.info(p)
	return res, nil
}

// List lists p to depth levels (0 means 1) in path order; a file lists as
// itself. It fails with wserr.FileNotFound.
func (sp *StaticProvider) List(ctx context.Context, p Path, depth int) ([]FileInfo, error) {
	info, ok := sp.info(p)
	if !ok {
		return nil, virtualNotFound("list", p)
	}
	if info.Kind == KindFile {
		return []FileInfo{info}, nil
	}
	if depth <= 0 {
		depth = 1
	}
	base := len(p.Segments())
	var out []FileInfo
	add := func(q Path) {
		if q != p && q.HasPrefix(p) && len(q.Segments())-base <= depth {
			info, _ := sp.info(q)
			out = append(out, info)
		}
	}
	for q := range sp.files {
		add(q)
	}
	for q := range sp.dirs {
		add(q)
	}
	sortInfos(out)
	return out, nil
}

// FileProvider returns a provider for one generated file, mounted at its
// own path (say chat/history.tail.md): Root() is the file, and read makes
// its content on every Stat and Read, so it is never stale and never
// stored. Any other path below it fails with wserr.FileNotFound, as a path
// below a file does everywhere; List of the file lists the file alone.
// Errors from read pass through; those without a code become
// wserr.Internal, since a generator failing is the host's problem.
func FileProvider(read func(ctx context.Context) ([]byte, error)) Provider {
	return fileProvider{read: read}
}

type fileProvider struct {
	read func(ctx context.Context) ([]byte, error)
}

func (fp fileProvider) load(ctx context.Context, op string, p Path) ([]byte, FileInfo, error) {
	if !p.IsRoot() {
		return nil, FileInfo{}, wserr.New(wserr.FileNotFound, op, p.String(), "no such virtual resource: the mount is a single file")
	}
	b, err := fp.read(ctx)
	if err != nil {
		// The generator's error is about the one file this provider
		// serves, whatever path it names; "." lets Virtual report it
		// under the mount.
		var e *wserr.Error
		if errors.As(err, &e) {
			c := *e
			c.Path = Root().String()
			return nil, FileInfo{}, &c
		}
		return nil, FileInfo{}, err
	}
	return b, FileInfo{Kind: KindFile, Size: int64(len(b)), Hash: cas.Sum(b), Resource: ResourceVirtual}, nil
}

func (fp fileProvider) Stat(ctx context.Context, p Path) (FileInfo, error) {
	_, info, err := fp.load(ctx, "stat", p)
	return info, err
}

func (fp fileProvider) Read(ctx context.Context, p Path, opt ReadOptions) (ReadResult, error) {
	b, info, err := fp.load(ctx, "read", p)
	if err != nil {
		return ReadResult{}, err
	}
	res, err := ReadRange(p, b, opt)
	if err != nil {
		return ReadResult{}, err
	}
	res.Info = info
	return res, nil
}

func (fp fileProvider) List(ctx context.Context, p Path, depth int) ([]FileInfo, error) {
	_, info, err := fp.load(ctx, "list", p)
	if err != nil {
		return nil, err
	}
	return []FileInfo{info}, nil
}
