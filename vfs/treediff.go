package vfs

import (
	"context"
	"errors"
	"io/fs"
	"strings"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
)

// ChangeOp says what happened to a file between two trees.
type ChangeOp string

// Change operations.
const (
	Added    ChangeOp = "added"
	Modified ChangeOp = "modified"
	Deleted  ChangeOp = "deleted"
)

// Change is one file that differs between two trees. Old is set for
// Modified and Deleted, New for Added and Modified.
type Change struct {
	Path Path     `json:"path"`
	Op   ChangeOp `json:"op"`
	Old  Entry    `json:"old,omitzero"`
	New  Entry    `json:"new,omitzero"`
}

// Diff returns the file-level changes that turn tree a into tree b, sorted
// by path (segment by segment, as List orders them). Directories are not
// reported themselves: a directory that appears or disappears shows as its
// files added or deleted, and a directory replaced by a file (or the other
// way round) as the deletes of one and the adds of the other. Subtrees with
// equal hashes are skipped without being read, so the cost follows the size
// of the change, not of the trees. tx nil reads through the read pool; a
// missing tree fails with wserr.Corrupt.
func (t *Trees) Diff(ctx context.Context, tx *index.Tx, a, b cas.Hash) ([]Change, error) {
	out, _, err := t.DiffPage(ctx, tx, a, b, ListPage{})
	return out, err
}

// DiffPage returns one page of Diff's changes: those whose paths come
// after page.After, at most page.Limit of them (0: all), and whether
// changes remain after it. Subtrees that lie wholly before After are
// passed over unread, so a page costs what it answers and the depth of
// After.
func (t *Trees) DiffPage(ctx context.Context, tx *index.Tx, a, b cas.Hash, page ListPage) ([]Change, bool, error) {
	if err := page.Check("diff", Root()); err != nil {
		return nil, false, err
	}
	var out []Change
	more := false
	err := t.DiffFunc(ctx, tx, a, b, page.After, func(c Change) error {
		if page.Limit > 0 && len(out) == page.Limit {
			more = true
			return fs.SkipAll
		}
		out = append(out, c)
		return nil
	})
	return out, more, err
}

// DiffFunc calls fn with each of Diff's changes whose path comes after
// after (the zero Path: every change), in order, holding none of them.
// fn returning fs.SkipAll ends the diff, and DiffFunc returns nil; any
// other error from fn ends it and is returned.
func (t *Trees) DiffFunc(ctx context.Context, tx *index.Tx, a, b cas.Hash, after Path, fn func(Change) error) error {
	d := differ{ctx: ctx, tx: tx, t: t, after: after, fn: fn}
	err := d.trees(Root(), a, b)
	if errors.Is(err, fs.SkipAll) {
		return nil
	}
	return err
}

// differ carries one Diff's state through the recursion.
type differ struct {
	ctx   context.Context
	tx    *index.Tx
	t     *Trees
	after Path // changes up to it are not reported
	fn    func(Change) error
}

// emit reports c unless it comes no later than the cursor.
func (d *differ) emit(c Change) error {
	if !d.after.IsRoot() {
		if comparePathSegments(c.Path, d.after) <= 0 {
			return nil
		}
		d.after = Path{} // the changes that follow come after it too
	}
	return d.fn(c)
}

// trees diffs the directories a and b at dir.
func (d *differ) trees(dir Path, a, b cas.Hash) error {
	if a == b || cursorOf(dir, d.after) == beforeCursor {
		return nil
	}
	if err := d.ctx.Err(); err != nil {
		return index.Translate(err)
	}
	as, err := d.t.load(d.ctx, d.tx, a)
	if err != nil {
		return err
	}
	bs, err := d.t.load(d.ctx, d.tx, b)
	if err != nil {
		return err
	}
	return mergeByName(as, bs, func(o, n *Entry) error {
		switch {
		case n == nil:
			return d.side(childPath(dir, o.Name), *o, Deleted)
		case o == nil:
			return d.side(childPath(dir, n.Name), *n, Added)
		default:
			return d.entries(childPath(dir, o.Name), *o, *n)
		}
	})
}

// mergeByName calls fn for each name of as and bs, two directories'
// entries sorted by name, in order: with both entries when both hold the
// name, else with the one that does and nil. fn's first error ends it.
func mergeByName(as, bs []Entry, fn func(a, b *Entry) error) error {
	for len(as) > 0 || len(bs) > 0 {
		var c int
		switch {
		case len(as) == 0:
			c = 1
		case len(bs) == 0:
			c = -1
		default:
			c = strings.Compare(as[0].Name, bs[0].Name)
		}
		var err error
		switch {
		case c < 0:
			err = fn(&as[0], nil)
			as = as[1:]
		case c > 0:
			err = fn(nil, &bs[0])
			bs = bs[1:]
		default:
			err = fn(&as[0], &bs[0])
			as, bs = as[1:], bs[1:]
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// entries diffs two entries of the same name at p.
func (d *differ) entries(p Path, o, n Entry) error {
	switch {
	case o == n:
		return nil
	case o.Kind == KindDir && n.Kind == KindDir:
		return d.trees(p, o.Hash, n.Hash)
	case o.Kind == KindFile && n.Kind == KindFile:
		return d.emit(Change{Path: p, Op: Modified, Old: o, New: n})
	case o.Kind == KindFile:
		// The file p sorts before everything below the directory p.
		if err := d.emit(Change{Path: p, Op: Deleted, Old: o}); err != nil {
			return err
		}
		return d.side(p, n, Added)
	default:
		if err := d.emit(Change{Path: p, Op: Added, New: n}); err != nil {
			return err
		}
		return d.side(p, o, Deleted)
	}
}

// side reports the file e at p, or every file below the directory e at p,
// as op (Added or Deleted).
func (d *differ) side(p Path, e Entry, op ChangeOp) error {
	add := func(p Path, e Entry) error {
		if e.Kind != KindFile {
			return nil
		}
		c := Change{Path: p, Op: op}
		if op == Added {
			c.New = e
		} else {
			c.Old = e
		}
		return d.emit(c)
	}
	if e.Kind == KindFile {
		return add(p, e)
	}
	if cursorOf(p, d.after) == beforeCursor {
		return nil
	}
	// The walk passes over what lies before the cursor unread.
	return d.t.walk(d.ctx, d.tx, p, e.Hash, -1, d.after, add)
}
