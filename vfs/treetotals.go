package vfs

import (
	"context"
	"strings"

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
	// Merge the two sorted lists by name.
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
		switch {
		case c < 0:
			err = t.entryTotals(ctx, tx, as[0], d, -1)
			as = as[1:]
		case c > 0:
			err = t.entryTotals(ctx, tx, bs[0], d, 1)
			bs = bs[1:]
		case as[0] == bs[0]:
			as, bs = as[1:], bs[1:]
		case as[0].Kind == KindDir && bs[0].Kind == KindDir:
			err = t.totalsDelta(ctx, tx, as[0].Hash, bs[0].Hash, d)
			as, bs = as[1:], bs[1:]
		default:
			if err = t.entryTotals(ctx, tx, as[0], d, -1); err == nil {
				err = t.entryTotals(ctx, tx, bs[0], d, 1)
			}
			as, bs = as[1:], bs[1:]
		}
		if err != nil {
			return err
		}
	}
	return nil
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
