package vfs

import (
	"context"
	"slices"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/wserr"
)

// FileChange is one file of a SetFiles batch: Entry nil deletes the file.
type FileChange struct {
	Path  Path
	Entry *Entry // a file entry; nil to delete
}

// SetFiles applies many file changes to root at once and returns the new
// root. It has the semantics of calling Set for each change in turn (except
// that deleting below a file fails with not_a_directory where Set says
// file_not_found), but every directory on the changed paths is written once, with all its
// changes, so importing n files into one directory writes that directory
// once instead of n times. Changes must name distinct paths, none below
// another, and file entries only (grafts go through Set); otherwise it
// fails with wserr.InvalidArgument. It fails like Set (file_not_found,
// not_a_directory, path_is_directory) on the first change that cannot
// apply, and then nothing is written.
func (t *Trees) SetFiles(ctx context.Context, tx *index.Tx, root cas.Hash, changes []FileChange) (cas.Hash, error) {
	const op = "set"
	if tx == nil {
		return cas.Hash{}, wserr.New(wserr.Internal, op, "", "no transaction: trees are written inside the transaction that references them")
	}
	cs := slices.Clone(changes)
	slices.SortFunc(cs, func(a, b FileChange) int { return ComparePaths(a.Path, b.Path) })
	for i, c := range cs {
		if c.Path.IsRoot() {
			return cas.Hash{}, wserr.New(wserr.InvalidPath, op, c.Path.String(), "the workspace root cannot be set; name a path inside it")
		}
		if c.Entry != nil {
			if c.Entry.Kind != KindFile {
				return cas.Hash{}, wserr.New(wserr.InvalidArgument, op, c.Path.String(), "a batch sets files only")
			}
			e := *c.Entry
			e.Name = c.Path.Base()
			if err := checkEntry(e); err != nil {
				return cas.Hash{}, wserr.Wrap(wserr.InvalidArgument, op, c.Path.String(), err)
			}
			cs[i].Entry = &e
		}
		if i > 0 && cs[i-1].Path.HasPrefix(c.Path) || i > 0 && c.Path.HasPrefix(cs[i-1].Path) {
			return cas.Hash{}, wserr.New(wserr.InvalidArgument, op, c.Path.String(), "the batch changes both %s and %s", cs[i-1].Path, c.Path)
		}
	}
	if len(cs) == 0 {
		return root, nil
	}
	// Stage the new directories in memory first, so a change that fails
	// leaves no row behind, then write them bottom-up.
	var staged []stagedDir
	es, changed, err := t.stageDir(ctx, tx, Root(), root, true, cs, 0, &staged)
	if err != nil {
		return cas.Hash{}, err
	}
	if !changed {
		return root, nil
	}
	var rb refBatch
	for _, dir := range staged {
		if _, err := t.put(ctx, tx, dir.entries, dir.old, &rb); err != nil {
			return cas.Hash{}, err
		}
	}
	h, err := t.put(ctx, tx, es, root, &rb)
	if err != nil {
		return cas.Hash{}, err
	}
	return h, rb.flush(ctx, tx)
}

// stagedDir is a directory's new entries and the stored tree they replace
// (the zero Hash for a new directory).
type stagedDir struct {
	entries []Entry
	old     cas.Hash
}

// ComparePaths orders paths segment by segment, as trees list them: the
// paths of one directory are adjacent, so a caller looking many up in
// this order reads each directory once.
func ComparePaths(a, b Path) int {
	return slices.Compare(a.Segments(), b.Segments())
}

// stageDir computes the new entries of the directory dir (stored at h, or
// new when exists is false) under changes, all of which lie below dir with
// depth segments already consumed. Every new subdirectory's entries are
// appended to staged (children before parents); dir's own are returned.
func (t *Trees) stageDir(ctx context.Context, tx *index.Tx, dir Path, h cas.Hash, exists bool, changes []FileChange, depth int, staged *[]stagedDir) ([]Entry, bool, error) {
	const op = "set"
	var es []Entry
	if exists {
		loaded, err := t.load(ctx, tx, h)
		if err != nil {
			return nil, false, err
		}
		es = slices.Clone(loaded)
	}
	changed := false
	for len(changes) > 0 {
		name := changes[0].Path.Segments()[depth]
		n := 1
		for n < len(changes) && changes[n].Path.Segments()[depth] == name {
			n++
		}
		group := changes[:n]
		changes = changes[n:]
		j, ok := find(es, name)
		child := childPath(dir, name)
		if len(group[0].Path.Segments()) == depth+1 {
			// The change names this entry itself (paths are distinct and
			// none lies below another, so it is alone in its group).
			c := group[0]
			switch {
			case c.Entry == nil && !ok:
				return nil, false, notFound(op, c.Path)
			case c.Entry == nil && es[j].Kind == KindDir:
				return nil, false, wserr.New(wserr.PathIsDirectory, op, c.Path.String(), "is a directory; a batch removes files only")
			case c.Entry == nil:
				es = slices.Delete(es, j, j+1)
				changed = true
			case !ok:
				es = slices.Insert(es, j, *c.Entry)
				changed = true
			case es[j].Kind == KindDir:
				return nil, false, wserr.New(wserr.PathIsDirectory, op, c.Path.String(), "is a directory; remove it first to write a file there")
			case es[j] != *c.Entry:
				es[j] = *c.Entry
				changed = true
			}
			continue
		}
		sub := cas.Hash{}
		subExists := false
		if ok {
			if es[j].Kind != KindDir {
				return nil, false, wserr.New(wserr.NotADirectory, op, group[0].Path.String(), "%s is a file, not a directory", child)
			}
			sub, subExists = es[j].Hash, true
		}
		subEntries, subChanged, err := t.stageDir(ctx, tx, child, sub, subExists, group, depth+1, staged)
		if err != nil {
			return nil, false, err
		}
		if !subChanged {
			continue
		}
		changed = true
		if len(subEntries) == 0 {
			if ok {
				es = slices.Delete(es, j, j+1)
			}
			continue
		}
		data, err := encodeSorted(subEntries)
		if err != nil {
			return nil, false, err
		}
		size, err := totalSize(subEntries)
		if err != nil {
			return nil, false, err
		}
		*staged = append(*staged, stagedDir{entries: subEntries, old: sub})
		e := Entry{Name: name, Kind: KindDir, Hash: TreeHash(data), Size: size}
		if ok {
			es[j] = e
		} else {
			es = slices.Insert(es, j, e)
		}
	}
	return es, changed, nil
}
