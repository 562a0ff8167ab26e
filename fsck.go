package wsstore

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// Problem is one thing Fsck found wrong.
type Problem struct {
	// Kind is "blob" or "chunk" (stored bytes do not decode or hash to
	// their address), "tree" (a tree row does not hash to its address or
	// does not decode), "reference" (something names an object or run that
	// does not exist) or "sqlite" (SQLite's own checks).
	Kind string `json:"kind"`
	// Ref is the object's hash, for a missing object the missing hash, or
	// the run id of rows that name a missing run.
	Ref    string `json:"ref"`
	Detail string `json:"detail"`
}

func (p Problem) String() string {
	if p.Ref == "" {
		return p.Kind + ": " + p.Detail
	}
	return p.Kind + " " + p.Ref + ": " + p.Detail
}

// FsckReport counts what Fsck checked and lists every problem found.
type FsckReport struct {
	Blobs       int       `json:"blobs"`
	Chunks      int       `json:"chunks"`
	Trees       int       `json:"trees"`
	Runs        int       `json:"runs"`
	Checkpoints int       `json:"checkpoints"`
	Problems    []Problem `json:"problems"`
}

// OK reports whether Fsck found no problem.
func (r FsckReport) OK() bool { return len(r.Problems) == 0 }

// Fsck checks the whole store and reports every problem, never stopping at
// the first:
//
//   - SQLite's integrity and foreign-key checks;
//   - every blob and chunk is re-read and re-hashed (cas.Store.Verify);
//   - every tree row hashes to its address and decodes;
//   - every reference resolves: each root (run roots and persist bases,
//     checkpoint roots, chat persist roots) is a stored tree, each entry of
//     a reachable tree names a stored blob or tree, each chunked blob's
//     chunks and each delta blob's base are stored, and every checkpoint and
//     event belongs to an existing run.
//
// Entries of trees no root reaches are not checked: such trees are
// garbage for GC, never corruption.
//
// progress, if not nil, is called with the phase ("sqlite", "blobs",
// "trees", "references"), the work done and the total. The error is only
// for a check that cannot run (a cancelled ctx, an I/O failure); what the
// checks find, including SQLite reporting corruption, is in the report.
func (s *Store) Fsck(ctx context.Context, progress func(phase string, done, total int)) (FsckReport, error) {
	if progress == nil {
		progress = func(string, int, int) {}
	}
	f := &fsck{rep: FsckReport{Problems: []Problem{}}}

	progress("sqlite", 0, 1)
	if err := f.phase("sqlite", s.DB.IntegrityCheck(ctx)); err != nil {
		return f.rep, err
	}
	progress("sqlite", 1, 1)

	progress("blobs", 0, 0)
	vr, err := s.Blobs.Verify(ctx, func(done, total int) { progress("blobs", done, total) })
	if err := f.phase("blobs", err); err != nil {
		return f.rep, err
	}
	f.rep.Blobs, f.rep.Chunks = vr.Blobs, vr.Chunks
	for _, p := range vr.Problems {
		f.add(p.Kind, p.Hash.String(), "%s", p.Err)
	}

	// Trees and references are read in one snapshot, so a concurrent
	// writer cannot make a reference look dangling.
	err = s.DB.View(ctx, func(tx *index.Tx) error {
		bad, err := f.trees(ctx, tx, progress)
		if err != nil {
			return err
		}
		return f.references(ctx, tx, bad, progress)
	})
	if err := f.phase("trees and references", err); err != nil {
		return f.rep, err
	}
	return f.rep, nil
}

type fsck struct {
	rep FsckReport
}

func (f *fsck) add(kind, ref, format string, args ...any) {
	f.rep.Problems = append(f.rep.Problems, Problem{Kind: kind, Ref: ref, Detail: fmt.Sprintf(format, args...)})
}

// phase turns an error that says the store is corrupt into a problem, so
// the other checks still run, and returns any other error.
func (f *fsck) phase(name string, err error) error {
	switch {
	case err == nil:
		return nil
	case wserr.Is(err, wserr.Corrupt):
		f.add("sqlite", "", "%s: %s", name, wserr.MessageOf(err))
		return nil
	}
	return fmt.Errorf("fsck: %s: %w", name, err)
}

// trees checks that every tree row decodes (a patch, through its chain of
// bases) and hashes to its address, and returns the trees that do not.
func (f *fsck) trees(ctx context.Context, tx *index.Tx, progress func(string, int, int)) (objSet, error) {
	var total int
	if err := tx.GetContext(ctx, &total, `SELECT count(*) FROM trees`); err != nil {
		return nil, index.Translate(err)
	}
	progress("trees", 0, total)
	g, err := newGraph(ctx, tx, nil)
	if err != nil {
		return nil, err
	}
	defer g.close()
	bad := objSet{}
	err = scanRows(ctx, tx, `SELECT hash, data, base IS NOT NULL FROM trees`, func(rows *sqlx.Rows) error {
		var h cas.Hash
		var data []byte
		var patched bool
		if err := rows.Scan(&h, &data, &patched); err != nil {
			return err
		}
		f.rep.Trees++
		if patched {
			if _, _, _, err := g.entries(h); err != nil {
				if !wserr.Is(err, wserr.Corrupt) {
					return err
				}
				f.add("tree", h.String(), "does not decode: %s", wserr.MessageOf(err))
				bad.addNew(object{objTree, h})
			}
		} else {
			switch _, err := vfs.DecodeTree(data); {
			case vfs.TreeHash(data) != h:
				f.add("tree", h.String(), "does not hash to its address (it hashes to %s)", vfs.TreeHash(data))
				bad.addNew(object{objTree, h})
			case err != nil:
				f.add("tree", h.String(), "does not decode: %s", wserr.MessageOf(err))
				bad.addNew(object{objTree, h})
			}
		}
		progress("trees", f.rep.Trees, total)
		return ctx.Err()
	})
	return bad, err
}

// references checks that every root and every reference of a reachable
// object resolves, and that checkpoints and events name existing runs.
// Trees in bad were reported already and are not followed.
func (f *fsck) references(ctx context.Context, tx *index.Tx, bad objSet, progress func(string, int, int)) error {
	inv, roots, g, err := openGraph(ctx, tx)
	if err != nil {
		return err
	}
	defer g.close()

	seen := objSet{}
	missing := objSet{}
	visit := func(o object) bool { return !bad.has(o) && seen.addNew(o) }
	report := func(o object, r ref, err error) error {
		switch {
		case err != nil:
			// Not expected: the trees phase put every tree that does not
			// decode in bad, and both phases read one snapshot.
			f.add("tree", o.hash.String(), "does not decode: %s", wserr.MessageOf(err))
		case missing.addNew(o):
			f.add("reference", o.hash.String(), "%s is missing (referenced by %s)", o.kind, r)
		}
		return nil
	}
	progress("references", 0, len(roots))
	for i, r := range roots {
		if err := g.walk([]step{r.step()}, visit, report); err != nil {
			return err
		}
		progress("references", i+1, len(roots))
	}

	// Chunk lists and delta bases of every blob, reachable or not: a blob
	// that exists must be readable.
	for h, m := range inv.blobs {
		blob := object{objBlob, h}
		for i, c := range inv.blobChunks[h] {
			if _, ok := inv.chunks[c]; !ok {
				_ = report(object{objChunk, c}, ref{from: blob, name: fmt.Sprintf("chunk %d", i)}, nil)
			}
		}
		if !m.base.IsZero() {
			if _, ok := inv.blobs[m.base]; !ok {
				_ = report(object{objBlob, m.base}, ref{from: blob, name: "delta base"}, nil)
			}
		}
	}

	var orphans []struct {
		What  string `db:"what"`
		RunID string `db:"run_id"`
		N     int    `db:"n"`
	}
	if err := tx.SelectContext(ctx, &orphans, `
		SELECT 'checkpoints' AS what, run_id, count(*) AS n FROM checkpoints
			WHERE run_id NOT IN (SELECT id FROM runs) GROUP BY run_id
		UNION ALL SELECT 'events', run_id, count(*) FROM events
			WHERE run_id NOT IN (SELECT id FROM runs) GROUP BY run_id
		ORDER BY 1, 2`); err != nil {
		return index.Translate(err)
	}
	for _, o := range orphans {
		f.add("reference", o.RunID, "%d %s belong to run %s, which does not exist", o.N, o.What, o.RunID)
	}
	if err := tx.GetContext(ctx, &f.rep.Runs, `SELECT count(*) FROM runs`); err != nil {
		return index.Translate(err)
	}
	return index.Translate(tx.GetContext(ctx, &f.rep.Checkpoints, `SELECT count(*) FROM checkpoints`))
}
