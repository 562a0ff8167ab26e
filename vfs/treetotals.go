package vfs

import (
	"context"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
)

// Totals counts what a tree holds below its root: its files, its
// directories and the bytes of its files.
type Totals struct {
	Files int64 `json:"files"`
	Dirs  int64 `json:"dirs"`
	Bytes int64 `json:"bytes"`
}

// Plus returns t with d added.
func (t Totals) Plus(d Totals) Totals {
	return Totals{Files: t.Files + d.Files, Dirs: t.Dirs + d.Dirs, Bytes: t.Bytes + d.Bytes}
}

// minus returns t with d taken away.
func (t Totals) minus(d Totals) Totals {
	return Totals{Files: t.Files - d.Files, Dirs: t.Dirs - d.Dirs, Bytes: t.Bytes - d.Bytes}
}

// TotalsDelta returns what tree b holds beyond tree a: b's totals less
// a's, so a's totals plus the delta are b's. Subtrees with equal hashes
// are skipped unread, as in Diff, and a subtree on one side only is
// walked, so the cost follows the size of the change, not of the trees;
// TotalsDelta(EmptyTree, b) counts the whole of b. tx nil reads through
// the read pool; a missing tree fails with wserr.Corrupt.
func (t *Trees) TotalsDelta(ctx context.Context, tx *index.Tx, a, b cas.Hash) (Totals, error) {
	var d Totals
	err := t.totalsDelta(ctx, tx, a, b, &d)
	return d, err
}

func (t *Trees) totalsDelta(ctx context.Context, tx *index.Tx, a, b cas.Hash, d *Totals) error {
	if a == b {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	as, err := t.load(ctx, tx, a)
	if err != nil {
		return err
	}
	bs, err := t.load(ctx, tx, b)
	if err != nil {
		return err
	}
	return mergeByName(as, bs, func(o, n *Entry) error {
		switch {
		case n == nil:
			return t.entryTotals(ctx, tx, *o, d, -1)
		case o == nil:
			return t.entryTotals(ctx, tx, *n, d, 1)
		case *o == *n:
			return nil
		case o.Kind == KindDir && n.Kind == KindDir:
			return t.totalsDelta(ctx, tx, o.Hash, n.Hash, d)
		}
		if err := t.entryTotals(ctx, tx, *o, d, -1); err != nil {
			return err
		}
		return t.entryTotals(ctx, tx, *n, d, 1)
	})
}

// entryTotals adds (sign 1) or takes away (sign -1) the entry e: a file,
// or a directory with all it holds.
func (t *Trees) entryTotals(ctx context.Context, tx *index.Tx, e Entry, d *Totals, sign int64) error {
	var n Totals
	count := func(_ Path, e Entry) error {
		if e.Kind == KindDir {
			n.Dirs++
		} else {
			n.Files++
			n.Bytes += e.Size
		}
		return nil
	}
	_ = count(Path{}, e)
	if e.Kind == KindDir {
		if err := t.walk(ctx, tx, Root(), e.Hash, -1, Path{}, count); err != nil {
			return err
		}
	}
	if sign < 0 {
		*d = d.minus(n)
	} else {
		*d = d.Plus(n)
	}
	return nil
}
