package vfs

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/wserr"
)

// What maintenance (gc, fsck, stats, du) needs of the tree rows: an
// inventory, each tree's references read from its row (never from Trees'
// cache, so a damaged row is seen as damaged), a sweep, a check of every
// row and totals. Every method reads or writes in the caller's transaction.

// TreeRecord is a tree row as maintenance sees it, without its bytes.
type TreeRecord struct {
	Hash   cas.Hash
	Stored int64 // length of the stored encoding or patch
	// Created is the row's created time in Unix nanoseconds; Put refreshes
	// it whenever it re-uses the row.
	Created int64
}

// EachTreeRecord calls fn with every tree row in tx, in no set order. The
// error is fn's or a failed read.
func (t *Trees) EachTreeRecord(ctx context.Context, tx *index.Tx, fn func(TreeRecord) error) error {
	rows, err := tx.QueryxContext(ctx, `SELECT hash, length(data), created FROM trees`)
	if err != nil {
		return fmt.Errorf("read trees: %w", index.Translate(err))
	}
	defer rows.Close()
	for rows.Next() {
		var r TreeRecord
		if err := rows.Scan(&r.Hash, &r.Stored, &r.Created); err != nil {
			return fmt.Errorf("read trees: %w", index.Translate(err))
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read trees: %w", index.Translate(err))
	}
	return nil
}

// TreeUsage returns how many tree rows tx holds and their stored bytes.
func (t *Trees) TreeUsage(ctx context.Context, tx *index.Tx) (rows, stored int64, err error) {
	if err := tx.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(length(data)), 0) FROM trees`).Scan(&rows, &stored); err != nil {
		return 0, 0, fmt.Errorf("tree usage: %w", index.Translate(err))
	}
	return rows, stored, nil
}

// rowMemoMax bounds RowReader's memo of decoded patch bases, in trees and
// in the entries they hold together (a few hundred bytes each, so a store
// of large directories costs tens of megabytes, not a copy of every
// version); past either the memo starts again, which costs re-reads,
// never correctness.
const (
	rowMemoMax        = 4096
	rowMemoEntriesMax = 1 << 17
)

// rowTree is a tree read through its patch chain: its entries, the tree
// its patch is against and its patch number (0 when stored whole).
type rowTree struct {
	entries []Entry
	base    cas.Hash
	seq     int
}

// RowReader reads trees from their rows in one transaction, following
// patch chains, for walks over the whole store. It remembers the trees
// patches rest on, so a walk through a chain decodes each once. Close it
// before the transaction ends; it is not safe for concurrent use.
type RowReader struct {
	ctx           context.Context
	tree, created *sqlx.Stmt
	decoded       map[cas.Hash]rowTree
	memoEntries   int // entries the trees in decoded hold
}

// OpenRowReader returns a RowReader reading in tx.
func (t *Trees) OpenRowReader(ctx context.Context, tx *index.Tx) (*RowReader, error) {
	r := &RowReader{ctx: ctx, decoded: map[cas.Hash]rowTree{}}
	var err error
	if r.tree, err = tx.PreparexContext(ctx, `SELECT data, base FROM trees WHERE hash = ?`); err != nil {
		return nil, fmt.Errorf("prepare: %w", index.Translate(err))
	}
	if r.created, err = tx.PreparexContext(ctx, `SELECT created FROM trees WHERE hash = ?`); err != nil {
		r.Close()
		return nil, fmt.Errorf("prepare: %w", index.Translate(err))
	}
	return r, nil
}

// Close releases the reader's statements.
func (r *RowReader) Close() {
	for _, st := range []*sqlx.Stmt{r.tree, r.created} {
		if st != nil {
			_ = st.Close()
		}
	}
}

// Created returns tree h's created time (Unix nanoseconds) and whether
// its row is stored.
func (r *RowReader) Created(h cas.Hash) (int64, bool, error) {
	var c int64
	err := r.created.QueryRowContext(r.ctx, h).Scan(&c)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("read tree %s: %w", h.Short(), index.Translate(err))
	}
	return c, true, nil
}

// Refs returns the entries of tree h, the tree its row is a patch against
// (the zero Hash for a whole tree) and whether it is stored. EmptyTree is
// always there, with or without a row. A tree that does not decode, or
// whose patch chain does not, fails with wserr.Corrupt naming it.
func (r *RowReader) Refs(h cas.Hash) ([]Entry, cas.Hash, bool, error) {
	t, ok, err := r.treeAt(h, 0)
	return t.entries, t.base, ok, err
}

func (r *RowReader) treeAt(h cas.Hash, level int) (rowTree, bool, error) {
	var data, base []byte
	err := r.tree.QueryRowContext(r.ctx, h).Scan(&data, &base)
	if errors.Is(err, sql.ErrNoRows) {
		return rowTree{}, h == EmptyTree, nil
	}
	if err != nil {
		return rowTree{}, false, fmt.Errorf("read tree %s: %w", h.Short(), index.Translate(err))
	}
	if base == nil {
		es, _, err := decodeTreeRow(h, data, false, nil, 0)
		if err != nil {
			return rowTree{}, true, fmt.Errorf("tree %s: %w", h, err)
		}
		return rowTree{entries: es}, true, nil
	}
	if len(base) != hashLen {
		return rowTree{}, true, wserr.New(wserr.Corrupt, "read tree", "", "tree %s: bad patch base", h)
	}
	t := rowTree{base: cas.Hash(base)}
	under, ok := r.decoded[t.base]
	if !ok {
		if level >= maxPatchChain {
			return t, true, wserr.New(wserr.Corrupt, "read tree", "", "tree %s: patch chain longer than any store writes: a cycle", h)
		}
		var stored bool
		under, stored, err = r.treeAt(t.base, level+1)
		switch {
		case err != nil && !wserr.Is(err, wserr.Corrupt):
			// Not the store's doing (a cancelled ctx, a failed read): say
			// so rather than call the tree corrupt.
			return t, true, fmt.Errorf("read tree %s: patch base %s: %w", h.Short(), t.base.Short(), err)
		case err != nil:
			return t, true, wserr.New(wserr.Corrupt, "read tree", "", "tree %s: patch base %s: %s", h, t.base, wserr.MessageOf(err))
		case !stored:
			return t, true, wserr.New(wserr.Corrupt, "read tree", "", "tree %s: patch base %s is missing", h, t.base)
		}
		if len(r.decoded) >= rowMemoMax || r.memoEntries+len(under.entries) > rowMemoEntriesMax {
			clear(r.decoded)
			r.memoEntries = 0
		}
		r.decoded[t.base] = under
		r.memoEntries += len(under.entries)
	}
	if t.entries, t.seq, err = decodeTreeRow(h, data, true, under.entries, under.seq); err != nil {
		return t, true, fmt.Errorf("tree %s: %w", h, err)
	}
	return t, true, nil
}

// SweepTrees deletes, in tx (a write transaction), each tree of hs whose
// row was created before cutoff (Unix nanoseconds), and calls fn with its
// position in hs, the stored bytes freed and whether it was deleted; a
// tree kept is one refreshed since, or not stored.
func (t *Trees) SweepTrees(ctx context.Context, tx *index.Tx, hs []cas.Hash, cutoff int64, fn func(i int, freed int64, deleted bool) error) error {
	if len(hs) == 0 {
		return nil
	}
	st, err := tx.PreparexContext(ctx, `DELETE FROM trees WHERE hash = ? AND created < ? RETURNING data, base`)
	if err != nil {
		return fmt.Errorf("prepare: %w", index.Translate(err))
	}
	defer st.Close()
	for i, h := range hs {
		var data, base []byte
		err := st.QueryRowContext(ctx, h, cutoff).Scan(&data, &base)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("delete tree %s: %w", h.Short(), index.Translate(err))
		}
		if err == nil {
			if _, err := deleteRefs(ctx, tx, h, data, base); err != nil {
				return err
			}
		}
		if err := fn(i, int64(len(data)), err == nil); err != nil {
			return err
		}
	}
	return nil
}

// VerifyTreeRows checks that every tree row in tx decodes (a patch,
// through its chain of bases) and hashes to its address, calling problem
// for each that does not, and returns how many rows it checked. Once the
// lists are filled in (RefsReady) it also checks that tree_refs lists
// each sound row under everything the row names, calling unlisted for
// each object it does not: a collection after a deletion takes a lookup
// that finds no list as proof that nothing names the object, and would
// delete it. progress,
// if not nil, is called with the rows done and the total, first with 0
// done. The error is only for a check that cannot run (a cancelled ctx, a
// failed read); what the check finds goes to problem.
func (t *Trees) VerifyTreeRows(ctx context.Context, tx *index.Tx, progress func(done, total int), problem, unlisted func(h cas.Hash, detail string)) (int, error) {
	if progress == nil {
		progress = func(int, int) {}
	}
	var total int
	if err := tx.GetContext(ctx, &total, `SELECT count(*) FROM trees`); err != nil {
		return 0, index.Translate(err)
	}
	progress(0, total)
	ready, err := t.RefsReady(ctx, tx)
	if err != nil {
		return 0, err
	}
	rr, err := t.OpenRowReader(ctx, tx)
	if err != nil {
		return 0, err
	}
	defer rr.Close()
	listed, err := tx.PreparexContext(ctx, `SELECT EXISTS (SELECT 1 FROM tree_refs WHERE child = ? AND parent = ?)`)
	if err != nil {
		return 0, fmt.Errorf("prepare: %w", index.Translate(err))
	}
	defer listed.Close()
	rows, err := tx.QueryxContext(ctx, `SELECT hash, data, base FROM trees`)
	if err != nil {
		return 0, index.Translate(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var h cas.Hash
		var data, base []byte
		if err := rows.Scan(&h, &data, &base); err != nil {
			return n, index.Translate(err)
		}
		n++
		sound := true
		if base != nil {
			if _, _, _, err := rr.Refs(h); err != nil {
				if !wserr.Is(err, wserr.Corrupt) {
					return n, err
				}
				problem(h, "does not decode: "+wserr.MessageOf(err))
				sound = false
			}
		} else {
			switch _, err := DecodeTree(data); {
			case TreeHash(data) != h:
				problem(h, fmt.Sprintf("does not hash to its address (it hashes to %s)", TreeHash(data)))
				sound = false
			case err != nil:
				problem(h, "does not decode: "+wserr.MessageOf(err))
				sound = false
			}
		}
		if sound && ready {
			if err := checkListed(ctx, listed, h, data, base, unlisted); err != nil {
				return n, err
			}
		}
		progress(n, total)
		if err := ctx.Err(); err != nil {
			return n, err
		}
	}
	return n, index.Translate(rows.Err())
}

// checkListed calls unlisted for each object tree row h (data, base)
// names that tree_refs does not list under h.
func checkListed(ctx context.Context, listed *sqlx.Stmt, h cas.Hash, data, base []byte, unlisted func(h cas.Hash, detail string)) error {
	refs, err := rowRefs(data, base)
	if err != nil {
		return nil // reported as not decoding
	}
	seen := make(map[int64]bool, len(refs))
	for _, r := range refs {
		k := refKey(r.Hash)
		if seen[k] {
			continue
		}
		seen[k] = true
		var ok bool
		if err := listed.QueryRowContext(ctx, k, h[:]).Scan(&ok); err != nil {
			return fmt.Errorf("tree refs: %w", index.Translate(err))
		}
		if !ok {
			kind := "blob"
			if r.Kind == CandidateTree {
				kind = "tree"
			}
			unlisted(h, fmt.Sprintf("names %s %s, which tree_refs does not list under it (a collection after a deletion could delete it)", kind, r.Hash))
		}
	}
	return nil
}
