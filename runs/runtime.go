package runs

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/checkpoint"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// runtimeView is where a runtime path of the host's view lives: a path in
// a stored tree (the records tree, a checkpoint's tree), or a file the
// store derives (manifest.json, checkpoint.json).
type runtimeView struct {
	root   cas.Hash // the tree that holds rel
	rel    vfs.Path // p within root
	prefix vfs.Path // what rel's paths are below in the host's view
	gen    *derived // when the path names a derived file
	// extra is a derived file listed beside the entries of a checkpoint's
	// directory (its checkpoint.json).
	extra *vfs.FileInfo
}

// derived is a runtime file the store derives rather than stores
// (manifest.json, a checkpoint's checkpoint.json): its size and hash, and
// a function that writes its content on demand, so a large one is never
// held whole.
type derived struct {
	size  int64
	hash  cas.Hash
	write func(ctx context.Context, w io.Writer) error
}

// heldDerived is a derived file whose content is b.
func heldDerived(b []byte) *derived {
	return &derived{size: int64(len(b)), hash: cas.Sum(b), write: func(_ context.Context, w io.Writer) error {
		_, err := w.Write(b)
		return err
	}}
}

// open returns d's content as a stream: written by a goroutine into a
// pipe, which Close of the reader ends.
func (d *derived) open(ctx context.Context) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(d.write(ctx, pw)) }()
	return pr
}

// read is ReadRange of d, streamed, with the limit every read keeps (as
// readHeld). The stream starts at the first read of it: a read refused
// for its size starts none.
func (d *derived) read(ctx context.Context, p vfs.Path, opt vfs.ReadOptions) (vfs.ReadResult, error) {
	r := &lazyReader{open: func() io.ReadCloser { return d.open(ctx) }}
	defer r.Close()
	return vfs.ReadRangeFrom(p, r, d.size, opt, MaxReadBytes)
}

// lazyReader opens its stream at its first Read.
type lazyReader struct {
	open func() io.ReadCloser
	rc   io.ReadCloser
}

func (l *lazyReader) Read(b []byte) (int, error) {
	if l.rc == nil {
		l.rc = l.open()
	}
	return l.rc.Read(b)
}

func (l *lazyReader) Close() error {
	if l.rc == nil {
		return nil
	}
	return l.rc.Close()
}

// runtime resolves p, for the host scope, when it names a runtime file:
// tool-args/, tool-results/ and model-responses/ are read from the run's
// records tree, manifest.json is the run's manifest, and
// checkpoints/<checkpoint-id>/ holds that checkpoint's checkpoint.json and
// files (seed 000 §13). ok is false for every other path, and for every
// path in the model scope, which sees none of them. None of them is
// versioned, so a checkpoint view has none (workspace.file_not_found).
func (w *Workspace) runtime(ctx context.Context, tx *index.Tx, run Run, p vfs.Path) (v runtimeView, ok bool, err error) {
	if w.scope != HostScope || p.IsRoot() {
		return v, false, nil
	}
	segs := p.Segments()
	if top := segs[0]; !w.live() && (isRecordRoot(top) || top == CheckpointsRoot || (top == ManifestFile && len(segs) == 1)) {
		return v, true, wserr.New(wserr.FileNotFound, "read", p.String(), "the run's records, manifest.json and checkpoints/ are not versioned: a checkpoint view holds none; read them live")
	}
	switch top := segs[0]; {
	case isRecordRoot(top):
		root := run.Records
		if root.IsZero() {
			root = vfs.EmptyTree
		}
		return runtimeView{root: root, rel: p, prefix: vfs.Root()}, true, nil
	case top == ManifestFile && len(segs) == 1:
		m, err := loadManifest(ctx, tx, run.ID)
		if err != nil {
			return v, true, err
		}
		b, err := json.MarshalIndent(m, "", "  ")
		if err != nil {
			return v, true, fmt.Errorf("manifest.json: %w", err)
		}
		return runtimeView{gen: heldDerived(append(b, '\n'))}, true, nil
	case top == CheckpointsRoot:
		if len(segs) == 1 {
			return v, true, wserr.New(wserr.InvalidArgument, "read", p.String(), "name a checkpoint: checkpoints/cp_000001/ (wsctl checkpoints lists them)")
		}
		seq, err := checkpoint.ParseRef(segs[1])
		if err != nil {
			return v, true, wserr.New(wserr.FileNotFound, "read", p.String(), "no checkpoint %q", segs[1])
		}
		cp, err := w.s.checkpoints.Get(ctx, tx, run.ID, seq)
		if err != nil {
			return v, true, err
		}
		dir := child(vfs.MustPath(CheckpointsRoot), segs[1])
		if len(segs) == 3 && segs[2] == CheckpointFile {
			d, err := w.checkpointView(ctx, tx, cp)
			return runtimeView{gen: d}, true, err
		}
		rel := vfs.Root()
		for _, s := range segs[2:] {
			rel = child(rel, s)
		}
		v = runtimeView{root: cp.Root, rel: rel, prefix: dir}
		if len(segs) == 2 {
			d, err := w.checkpointView(ctx, tx, cp)
			if err != nil {
				return v, true, err
			}
			v.extra = &vfs.FileInfo{Path: child(dir, CheckpointFile), Kind: vfs.KindFile, Size: d.size, Hash: d.hash, Resource: vfs.ResourceVirtual}
		}
		return v, true, nil
	}
	return v, false, nil
}

// checkpointView is cp's checkpoint.json, as checkpoint.Store.View
// derives it: streamed from cp's tree once here (in tx) for its size and
// hash, and again, through the read pool, each time it is read, so a
// checkpoint of any size costs bounded memory. Its tree is immutable
// while cp exists (a read that outlives cp's deletion and collection
// fails).
func (w *Workspace) checkpointView(ctx context.Context, tx *index.Tx, cp checkpoint.Checkpoint) (*derived, error) {
	write := func(ctx context.Context, tx *index.Tx, out io.Writer) error {
		return checkpoint.WriteJSON(ctx, out, checkpoint.ViewOf(cp), checkpoint.FilesOf(ctx, w.s.trees, tx, cp.Root))
	}
	sum := cas.NewHasher()
	defer sum.Release()
	if err := write(ctx, tx, sum); err != nil {
		return nil, fmt.Errorf("checkpoint.json: %w", err)
	}
	return &derived{size: sum.Len(), hash: sum.Sum(), write: func(ctx context.Context, out io.Writer) error {
		return write(ctx, nil, out)
	}}, nil
}

// full is rel's path in the host's view.
func (v runtimeView) full(rel vfs.Path) vfs.Path { return joinPath(v.prefix, rel) }

// named is err, an error of v's tree, naming the path in the host's view
// (checkpoints/<id>/output/a.md rather than output/a.md, which reads as
// the live file).
func (v runtimeView) named(err error) error {
	e, ok := err.(*wserr.Error)
	if !ok || v.prefix.IsRoot() {
		return err
	}
	rel, perr := vfs.ParsePath(e.Path)
	if perr != nil {
		return err
	}
	named := *e
	named.Path = v.full(rel).String()
	return &named
}

// info describes a runtime entry: stored runtime files are read-only to
// every scope, written only by the records and checkpoints that own them.
func (v runtimeView) info(p vfs.Path, e vfs.Entry) vfs.FileInfo {
	return vfs.FileInfo{Path: p, Kind: e.Kind, Size: e.Size, Hash: e.Hash, Resource: vfs.ResourceMaterialized}
}

// genInfo describes a derived runtime file.
func (v runtimeView) genInfo(p vfs.Path) vfs.FileInfo {
	return vfs.FileInfo{Path: p, Kind: vfs.KindFile, Size: v.gen.size, Hash: v.gen.hash, Resource: vfs.ResourceVirtual}
}

// stat describes p in v.
func (w *Workspace) runtimeStat(ctx context.Context, tx *index.Tx, v runtimeView, p vfs.Path) (vfs.FileInfo, error) {
	if v.gen != nil {
		return v.genInfo(p), nil
	}
	e, err := w.s.trees.Lookup(ctx, tx, v.root, v.rel)
	if err != nil {
		return vfs.FileInfo{}, v.named(err)
	}
	fi := v.info(p, e)
	if v.extra != nil {
		fi.Size += v.extra.Size
	}
	return fi, nil
}

// runtimeList lists what lies below p in v to depth levels.
func (w *Workspace) runtimeList(ctx context.Context, tx *index.Tx, v runtimeView, p vfs.Path, depth int, page vfs.ListPage) ([]vfs.FileInfo, error) {
	if v.gen != nil {
		return page.Past([]vfs.FileInfo{v.genInfo(p)}), nil
	}
	var out []vfs.FileInfo
	if v.extra != nil {
		out = page.Past([]vfs.FileInfo{*v.extra})
	}
	// The tree's paths are v.prefix's: so is the cursor.
	within, ok := page.Within(v.prefix)
	if !ok {
		return out, nil
	}
	if within.Limit > 0 {
		within.Limit++ // one past the page says more remain
	}
	ls, _, err := w.s.trees.ListPage(ctx, tx, v.root, v.rel, depth, within)
	if err != nil {
		return nil, v.named(err)
	}
	for _, l := range ls {
		out = append(out, v.info(v.full(l.Path), l.Entry))
	}
	return out, nil
}

// runtimeRoots lists, for a host listing of the root, the records tree's
// entries to depth levels. The derived files (manifest.json,
// checkpoints/) are read by name, not listed: a listing shows what is
// stored.
func (w *Workspace) runtimeRoots(ctx context.Context, tx *index.Tx, run Run, depth int, page vfs.ListPage) ([]vfs.FileInfo, error) {
	if w.scope != HostScope || run.Records.IsZero() || !w.live() {
		return nil, nil
	}
	if page.Limit > 0 {
		page.Limit++ // one past the page says more remain
	}
	ls, _, err := w.s.trees.ListPage(ctx, tx, run.Records, vfs.Root(), depth, page)
	if err != nil {
		return nil, err
	}
	out := make([]vfs.FileInfo, 0, len(ls))
	for _, l := range ls {
		out = append(out, vfs.FileInfo{Path: l.Path, Kind: l.Entry.Kind, Size: l.Entry.Size, Hash: l.Entry.Hash, Resource: vfs.ResourceMaterialized})
	}
	return out, nil
}

// child is p/seg for a seg taken from a valid path, which cannot fail.
func child(p vfs.Path, seg string) vfs.Path {
	q, _ := p.Join(seg)
	return q
}
