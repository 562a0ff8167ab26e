package vfs

import (
	"context"
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
	d := differ{ctx: ctx, tx: tx, t: t}
	if err := d.trees(Root(), a, b); err != nil {
		return nil, err
	}
	return d.out, nil
}

// differ carries one Diff's state through the recursion.
type differ struct {
	ctx context.Context
	tx  *index.Tx
	t   *Trees
	out []Change
}

// trees diffs the directories a and b at dir.
func (d *differ) trees(dir Path, a, b cas.Hash) error {
	if a == b {
		return nil
	}
	if err := d.ctx.Err(); err != nil {
		return err
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
		d.out = append(d.out, Change{Path: p, Op: Modified, Old: o, New: n})
		return nil
	case o.Kind == KindFile:
		// The file p sorts before everything below the directory p.
		d.out = append(d.out, Change{Path: p, Op: Deleted, Old: o})
		return d.side(p, n, Added)
	default:
		d.out = append(d.out, Change{Path: p, Op: Added, New: n})
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
		d.out = append(d.out, c)
		return nil
	}
	if e.Kind == KindFile {
		return add(p, e)
	}
	return d.t.walk(d.ctx, d.tx, p, e.Hash, -1, Path{}, add)
}
