package runs

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// Edit is one file change of an Apply batch: new content for Path, or its
// removal (Remove with no Content).
type Edit struct {
	Path    vfs.Path
	Content []byte
	Remove  bool
}

// Apply makes several file changes as one step: one transaction, one
// rewrite of each directory on the changed paths (importing a project of
// thousands of files writes each directory once, not once per file), one
// workspace_file_written or workspace_file_deleted event per file, and one
// automatic checkpoint (reason after_workspace_batch) when the profile
// takes them. Each new version is stored with its previous one as delta
// base, as Write does. All or nothing: it fails, changing nothing, with the
// codes of Write and Remove for the first edit that cannot apply, and with
// workspace.invalid_argument for an empty batch, a path named twice or an
// edit that both removes its file and gives it content.
func (w *Workspace) Apply(ctx context.Context, edits []Edit) ([]vfs.FileInfo, error) {
	const op = "apply"
	if len(edits) == 0 {
		return nil, wserr.New(wserr.InvalidArgument, op, "", "no edits")
	}
	for _, e := range edits {
		if _, _, _, ok := w.s.virtual.Match(e.Path); ok {
			return nil, wserr.New(wserr.ReadOnlyResource, op, e.Path.String(), "virtual resources are read-only; copy the content into output/ to change it")
		}
		if e.Path.IsRoot() {
			return nil, wserr.New(wserr.PathIsDirectory, op, e.Path.String(), "the workspace root is a directory")
		}
		if e.Remove && len(e.Content) > 0 {
			return nil, wserr.New(wserr.InvalidArgument, op, e.Path.String(), "an edit either removes its file or gives it content, not both")
		}
	}
	// A path named twice, or a file and a path below it, is refused
	// before any edit is looked at, whatever their order.
	paths := make([]vfs.Path, len(edits))
	for i, e := range edits {
		paths[i] = e.Path
	}
	slices.SortFunc(paths, vfs.ComparePaths)
	for i := 1; i < len(paths); i++ {
		if paths[i-1].HasPrefix(paths[i]) || paths[i].HasPrefix(paths[i-1]) {
			return nil, wserr.New(wserr.InvalidArgument, op, paths[i].String(), "the batch changes both %s and %s", paths[i-1], paths[i])
		}
	}
	prepared := w.prepare(ctx, edits)
	var infos []vfs.FileInfo
	err := w.s.UpdateInRoom(ctx, func(tx *index.Tx) error {
		run, caps, err := findRunCaps(ctx, tx, w.runID)
		if err != nil {
			return err
		}
		room := w.s.roomCheck(ctx, tx, op, &caps) // for the batch's contents together
		found := w.lookupAll(ctx, tx, run.Root, edits)
		changes := make([]vfs.FileChange, len(edits))
		events := make([]event, len(edits))
		infos = make([]vfs.FileInfo, len(edits))
		for i, e := range edits {
			if err := w.checkWritable(op, run, e.Path); err != nil {
				return err
			}
			var prev cas.Hash
			var prevSize int64
			switch cur, err := found[i].entry, found[i].err; {
			case err == nil && cur.Kind == vfs.KindDir:
				return wserr.New(wserr.PathIsDirectory, op, e.Path.String(), "is a directory")
			case err == nil:
				prev, prevSize = cur.Hash, cur.Size
				infos[i] = w.info(e.Path, cur, run)
			case wserr.Is(err, wserr.FileNotFound) && e.Remove:
				return wserr.New(wserr.FileNotFound, op, e.Path.String(), "no such file")
			case !wserr.Is(err, wserr.FileNotFound):
				return err
			}
			changes[i].Path = e.Path
			if e.Remove {
				events[i] = event{journal.WorkspaceFileDeleted, journal.FileDeleted{Path: e.Path.String(), PrevHash: prev.String()}}
				continue
			}
			room.grow() // a new version, whatever its size (settle)
			if err := room.add(e.Path, int64(len(e.Content))-prevSize); err != nil {
				return err
			}
			h, err := w.s.blobs.PutPrepared(ctx, tx, prepared[i], prev)
			if err != nil {
				return err
			}
			entry := vfs.Entry{Kind: vfs.KindFile, Hash: h, Size: int64(len(e.Content))}
			changes[i].Entry = &entry
			infos[i] = w.info(e.Path, entry, run)
			events[i] = event{journal.WorkspaceFileWritten, journal.FileWritten{Path: e.Path.String(), Hash: h.String(), Bytes: entry.Size, Mode: string(vfs.Replace), PrevHash: hashString(prev)}}
		}
		root, err := w.s.trees.SetFiles(ctx, tx, run.Root, changes)
		if err != nil {
			return err
		}
		cp, err := w.swapRoot(ctx, tx, run, caps, op, edits[0].Path, root, "after_workspace_batch", nil, events...)
		if err == nil {
			err = room.settle(ctx, tx)
		}
		if err != nil {
			return err
		}
		for i := range infos {
			infos[i].Checkpoint = cp
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return infos, nil
}

// found is what a lookup of one edit's path found.
type found struct {
	entry vfs.Entry
	err   error
}

// lookupAll looks up every edit's path in root, in path order rather than
// the batch's, so that each directory is read once, however the batch
// interleaves directories; the results are in the batch's order.
func (w *Workspace) lookupAll(ctx context.Context, tx *index.Tx, root cas.Hash, edits []Edit) []found {
	order := make([]int, len(edits))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return vfs.ComparePaths(edits[a].Path, edits[b].Path) })
	out := make([]found, len(edits))
	for _, i := range order {
		out[i].entry, out[i].err = w.s.trees.Lookup(ctx, tx, root, edits[i].Path)
	}
	return out
}

// prepare hashes and compresses the batch's contents before its
// transaction, on every core: the paths' current versions are looked up
// in one read transaction (the write transaction looks again, and a
// version that changed meanwhile only costs its compression being done
// there), then the contents are prepared by one worker per core.
func (w *Workspace) prepare(ctx context.Context, edits []Edit) []*cas.Prepared {
	prevs := make([]cas.Hash, len(edits))
	_ = w.s.db.View(ctx, func(tx *index.Tx) error {
		run, err := findRun(ctx, tx, w.runID)
		if err != nil {
			return err
		}
		found := w.lookupAll(ctx, tx, run.Root, edits)
		for i, f := range found {
			if f.err == nil && f.entry.Kind == vfs.KindFile {
				prevs[i] = f.entry.Hash
			}
		}
		return nil
	})
	out := make([]*cas.Prepared, len(edits))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(edits)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(edits) {
					return
				}
				if !edits[i].Remove {
					out[i] = w.s.blobs.Prepare(edits[i].Content, prevs[i])
				}
			}
		}()
	}
	wg.Wait()
	return out
}
