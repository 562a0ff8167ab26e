package maint

import (
	"context"
	"errors"
	"fmt"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// Problem is one thing Fsck found wrong.
type Problem struct {
	// Kind is "blob" or "chunk" (stored bytes do not decode or hash to
	// their address), "tree" (a tree row does not hash to its address or
	// does not decode, or tree_refs, which the collection after a
	// deletion trusts, does not list it under an object it names),
	// "dict" (a listed dictionary that is not one), "size" (a size
	// recorded for content that hashes to its address is not the
	// content's: a blob's or chunk's plain or stored size, a chunk
	// list's offset, a dictionary's listed size, or the size a reachable
	// tree's file entry records; Ref is the blob, chunk, dictionary or
	// tree, and Detail names the entry and both sizes), "reference"
	// (something names an object or run that does not exist), "event" (a
	// journal payload that does not decode; Ref is run#seq), "run",
	// "checkpoint" or "commit" (a run's head, a checkpoint's parent or a
	// commit's checkpoint names no checkpoint of its run; Ref is the run
	// id, run#seq or the commit id), "actor" (an actor space's row counts
	// other versions than its journal holds, or keeps totals of its live
	// tree, files, directories and bytes, that are not the tree's; Ref is
	// the actor) or
	// "sqlite" (SQLite's own checks, and a database that is not a store).
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
	Events      int       `json:"events"`
	Problems    []Problem `json:"problems"`
}

// OK reports whether Fsck found no problem.
func (r FsckReport) OK() bool { return len(r.Problems) == 0 }

// Fsck checks the whole store and reports every problem, never stopping at
// the first:
//
//   - SQLite's integrity and foreign-key checks;
//   - every blob and chunk is re-read and re-hashed (the content store's
//     Verify), and the sizes its row records (plain and stored sizes,
//     chunk offsets, a dictionary's listed size) are compared with the
//     content that read found;
//   - every tree row hashes to its address and decodes;
//   - every reference resolves: each root (run roots and persist bases,
//     checkpoint roots, chat persist roots) is a stored tree, each entry of
//     a reachable tree names a stored blob or tree, each chunked blob's
//     chunks and each delta blob's base are stored, and every checkpoint and
//     event belongs to an existing run;
//   - the size each file entry of a reachable tree records is its blob's
//     plain size, the content's where the blob's row records another;
//   - each actor space's row counts the versions its journal holds, and
//     keeps its live tree's totals: the files, directories and bytes the
//     tree's entries record below its root (a row that keeps none yet
//     is not held to them), counted from the trees the references phase
//     reads, reading none again.
//
// Before anything it checks the database is a wsstore store; everything
// after SQLite's checks is read in one snapshot, so a concurrent gc or
// writer never produces a report. It also decodes every journal payload.
//
// Entries of trees no root reaches are not checked: such trees are
// garbage for GC, never corruption.
//
// progress, if not nil, is called with the phase ("sqlite", "blobs",
// "trees", "references", "journal"), the work done and the total. The error is only
// for a check that cannot run (a cancelled ctx, an I/O failure); what the
// checks find, including SQLite reporting corruption, is in the report.
func (m *Maintainer) Fsck(ctx context.Context, progress func(phase string, done, total int)) (FsckReport, error) {
	if progress == nil {
		progress = func(string, int, int) {}
	}
	f := &fsck{m: m, rep: FsckReport{Problems: []Problem{}}, plain: map[cas.Hash]int64{}}

	// A database that is not a store has nothing else to check.
	if err := m.p.DB.CheckStore(ctx); err != nil {
		if wserr.Is(err, wserr.NotAStore) || wserr.Is(err, wserr.Corrupt) {
			f.add("sqlite", "", "%s", wserr.MessageOf(err))
			return f.rep, nil
		}
		return f.rep, fmt.Errorf("fsck: %w", err)
	}

	progress("sqlite", 0, 1)
	if err := f.phase("sqlite", m.p.DB.IntegrityCheck(ctx)); err != nil {
		return f.rep, err
	}
	f.damaged = len(f.rep.Problems) > 0
	progress("sqlite", 1, 1)

	// Blobs, trees, references and the journal are read in one snapshot,
	// so neither a concurrent writer nor gc can make an object look
	// missing or a reference dangling: what fsck reports is wrong in the
	// committed state it read.
	w := newWork(ctx)
	defer w.close()
	err := m.p.DB.View(ctx, func(tx *index.Tx) error {
		progress("blobs", 0, 0)
		vr, err := m.p.Blobs.VerifyTx(ctx, tx, func(done, total int) { progress("blobs", done, total) })
		if err := f.phase("blobs", err); err != nil {
			return err
		}
		f.rep.Blobs, f.rep.Chunks = vr.Blobs, vr.Chunks
		for _, p := range vr.Problems {
			switch {
			case p.Size != nil:
				f.add("size", p.Hash.String(), "%s", p.Err)
				if p.Kind == "blob" && p.Size.Field == "size" {
					f.plain[p.Hash] = p.Size.Actual
				}
			default:
				f.add(p.Kind, p.Hash.String(), "%s", p.Err)
				if p.Kind == "blob" {
					f.plain[p.Hash] = -1
				}
			}
		}
		bad, err := f.trees(ctx, tx, w, progress)
		if err := f.phase("trees", err); err != nil {
			return err
		}
		if err := f.phase("references", f.references(ctx, tx, w, bad, progress)); err != nil {
			return err
		}
		progress("journal", 0, 0)
		n, err := m.p.Events.VerifyPayloads(ctx, tx, func(runID string, seq int64, detail string) error {
			f.add("event", fmt.Sprintf("%s#%d", runID, seq), "%s", detail)
			return nil
		})
		f.rep.Events = n
		if err := f.phase("journal", err); err != nil {
			return err
		}
		progress("rows", 0, 0)
		return f.phase("rows", f.rows(ctx, tx))
	})
	if err != nil {
		return f.rep, err
	}
	return f.rep, nil
}

type fsck struct {
	m   *Maintainer
	rep FsckReport
	// damaged: SQLite's own check found the file damaged.
	damaged bool
	// plain holds the blobs whose row does not tell their plain size, as
	// the blobs phase found them: the content's length where the row
	// records another, -1 where the content does not verify. It holds no
	// more than the problems the report lists.
	plain map[cas.Hash]int64
	// spaces totals the trees the walks from the actor spaces' roots
	// follow, for the rows phase to hold the spaces' rows to; nil
	// when the actor spaces keep no totals.
	spaces *treeTotals
}

// plainSize returns the plain size of blob h, whose row records
// recorded, and whether it is known: it is not for content that does
// not verify.
func (f *fsck) plainSize(h cas.Hash, recorded int64) (int64, bool) {
	if n, ok := f.plain[h]; ok {
		return n, n >= 0
	}
	return recorded, true
}

// rows reports the references to checkpoints that no foreign key holds
// and that name none of their run's: a run's head, a commit's checkpoint
// (each looked up by key) and a checkpoint's parent; and the actor spaces
// whose count of versions is not their journal's, or whose totals are not
// their live tree's.
func (f *fsck) rows(ctx context.Context, tx *index.Tx) error {
	err := f.m.p.Runs.EachCheckpointRef(ctx, tx, func(kind, ref, runID string, seq int64) error {
		ok, err := f.m.p.Checkpoints.Has(ctx, tx, runID, seq)
		if err == nil && !ok {
			f.add(kind, ref, "names checkpoint %d, which its run does not hold", seq)
		}
		return err
	})
	if err != nil {
		return err
	}
	err = f.m.p.Checkpoints.EachDanglingParent(ctx, tx, func(runID string, seq, parent int64) error {
		f.add("checkpoint", fmt.Sprintf("%s#%d", runID, seq), "names checkpoint %d, which its run does not hold", parent)
		return nil
	})
	if err != nil {
		return err
	}
	ac, ok := f.m.p.Actors.(ActorCounts)
	if !ok {
		return nil
	}
	err = ac.EachMiscounted(ctx, tx, func(actor string, kept, counted int64) error {
		f.add("actor", actor, "its row counts %d versions, its journal holds %d", kept, counted)
		return nil
	})
	if err != nil {
		return err
	}
	at, ok := f.m.p.Actors.(ActorTotals)
	if !ok || f.spaces == nil {
		return nil
	}
	return at.EachSpaceTotals(ctx, tx, func(actor string, root cas.Hash, kept vfs.Totals) error {
		// A tree with something missing or damaged below it has no
		// totals: that was reported already.
		n, ok, err := f.spaces.get(root)
		if err == nil && ok && n != kept {
			f.add("actor", actor, "its row counts %s, its tree holds %s", totalsText(kept), totalsText(n))
		}
		return err
	})
}

func totalsText(t vfs.Totals) string {
	return fmt.Sprintf("%d files, %d directories and %d bytes", t.Files, t.Dirs, t.Bytes)
}

func (f *fsck) add(kind, ref, format string, args ...any) {
	f.rep.Problems = append(f.rep.Problems, Problem{Kind: kind, Ref: ref, Detail: fmt.Sprintf(format, args...)})
}

// phase turns an error that says the store is corrupt into a problem, so
// the other checks still run, and returns any other error. Once SQLite's
// own check found the file damaged, an error of a later phase is taken as
// that damage showing, and recorded too, unless it says why else it
// failed (an ended context, a closed, busy, full or read-only store).
func (f *fsck) phase(name string, err error) error {
	switch {
	case err == nil:
		return nil
	case wserr.Is(err, wserr.Corrupt):
		f.add("sqlite", "", "%s: %s", name, wserr.MessageOf(err))
		return nil
	case f.damaged && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) &&
		!wserr.Is(err, wserr.Canceled) && !wserr.Is(err, wserr.Closed) && !wserr.Is(err, wserr.Busy) &&
		!wserr.Is(err, wserr.DiskFull) && !wserr.Is(err, wserr.ReadOnly):
		f.add("sqlite", "", "%s: %v", name, err)
		return nil
	}
	return fmt.Errorf("fsck: %s: %w", name, err)
}

// trees checks that every tree row decodes (a patch, through its chain of
// bases) and hashes to its address, and returns the trees that do not. A
// sound row that tree_refs does not list under what it names is reported
// too, but still followed: what it names may be whole.
func (f *fsck) trees(ctx context.Context, tx *index.Tx, w *work, progress func(string, int, int)) (*objMap, error) {
	bad := w.newMap()
	var err error
	n, verr := f.m.p.Trees.VerifyTreeRows(ctx, tx, func(done, total int) { progress("trees", done, total) },
		func(h cas.Hash, detail string) {
			f.add("tree", h.String(), "%s", detail)
			if _, aerr := bad.addNew(object{objTree, h}); aerr != nil && err == nil {
				err = aerr
			}
		},
		func(h cas.Hash, detail string) { f.add("tree", h.String(), "%s", detail) })
	f.rep.Trees = n
	if verr != nil {
		return bad, verr
	}
	return bad, err
}

// references checks that every root and every reference of a reachable
// object resolves, and that checkpoints and events name existing runs.
// Trees in bad were reported already and are not followed.
func (f *fsck) references(ctx context.Context, tx *index.Tx, w *work, bad *objMap, progress func(string, int, int)) error {
	count, err := f.m.countRoots(ctx, tx)
	if err != nil {
		return err
	}
	g, err := f.m.newGraph(ctx, tx)
	if err != nil {
		return err
	}
	defer g.close()

	seen := w.newMap()
	missing := w.newMap()
	visit := func(o object) (bool, error) {
		if isBad, err := bad.has(o); err != nil || isBad {
			return false, err
		}
		return seen.addNew(o)
	}
	report := func(o object, r ref, err error) error {
		if err != nil {
			// Not expected: the trees phase put every tree that does not
			// decode in bad, and both phases read one snapshot.
			f.add("tree", o.hash.String(), "does not decode: %s", wserr.MessageOf(err))
			return nil
		}
		added, err := missing.addNew(o)
		if added {
			f.add("reference", o.hash.String(), "%s is missing (referenced by %s)", o.kind, r)
		}
		return err
	}
	// Trees are read as the walk reaches them, blobs in the pass over
	// their rows below. A blob a file entry names is marked with the size
	// the first such entry records (plus one: 0 marks a blob reached as a
	// dictionary); one whose entries disagree is in doubt.
	doubt := w.newMap()
	g.leafBlobs = true
	g.fileEntry = func(_ object, e vfs.Entry) error {
		// Looked up first: most entries name a blob an earlier tree did.
		o := object{objBlob, e.Hash}
		v, ok, err := seen.get(o)
		switch {
		case err != nil:
			return err
		case !ok:
			_, err = seen.add(o, e.Size+1)
		case v == 0:
			err = seen.set(o, e.Size+1)
		case v != e.Size+1:
			_, err = doubt.addNew(o)
		}
		return err
	}
	// The walks from the actor spaces' roots total each tree they follow,
	// for the rows phase. Those roots sort first (they have no chat or
	// run), so every tree below a space is followed in them.
	if _, ok := f.m.p.Actors.(ActorTotals); ok {
		f.spaces = w.newTreeTotals()
	}
	progress("references", 0, count.roots)
	done := 0
	err = f.m.eachRoot(ctx, tx, func(r *rootRef) error {
		g.treeDone = nil
		if f.spaces != nil && r.Kind == "actor" {
			g.treeDone = f.spaces.close
		}
		if err := g.walk([]step{r.step()}, visit, report); err != nil {
			return err
		}
		done++
		progress("references", done, count.roots)
		return nil
	})
	if err != nil {
		return err
	}
	g.leafBlobs, g.fileEntry, g.treeDone = false, nil, nil

	// Chunk lists and delta bases of every blob, reachable or not: a blob
	// that exists must be readable. What the pass finds is reported after
	// the reachable blobs that are missing, as a walk reading every blob
	// would have found those first.
	type missingRef struct {
		o object
		r ref
	}
	var later []missingRef
	passMissing := w.newMap()
	reportLater := func(o object, r ref) error {
		added, err := passMissing.addNew(o)
		if added {
			later = append(later, missingRef{o, r})
		}
		return err
	}
	stored := 0
	err = f.m.p.Blobs.EachBlobRecord(ctx, tx, func(r cas.BlobRecord) error {
		blob := object{objBlob, r.Hash}
		if entry, ok, err := seen.get(blob); err != nil || ok {
			if err != nil {
				return err
			}
			stored++
			// An entry's size that is not the blob's puts it in doubt.
			if n, known := f.plainSize(r.Hash, r.Size); entry > 0 && known && entry-1 != n {
				if _, err := doubt.addNew(blob); err != nil {
					return err
				}
			}
		}
		for i, c := range r.Chunks {
			ok, err := g.hasChunk(c)
			if err != nil {
				return err
			}
			if !ok {
				if err := reportLater(object{objChunk, c}, ref{from: blob, name: fmt.Sprintf("chunk %d", i)}); err != nil {
					return err
				}
			}
		}
		if !r.Base.IsZero() {
			_, _, _, ok, err := g.blobRefs(r.Base)
			if err != nil {
				return err
			}
			name := "delta base"
			if r.Codec == cas.CodecZstd {
				name = "dictionary"
			}
			if !ok {
				return reportLater(object{objBlob, r.Base}, ref{from: blob, name: name})
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	// A blob the walk reached that the rows do not hold is missing: walk
	// again, reading every blob, to name it and what refers to it.
	if stored != seen.added.Blobs {
		again := w.newMap()
		visit := func(o object) (bool, error) {
			if isBad, err := bad.has(o); err != nil || isBad {
				return false, err
			}
			return again.addNew(o)
		}
		err := f.m.eachRoot(ctx, tx, func(r *rootRef) error {
			return g.walk([]step{r.step()}, visit, report)
		})
		if err != nil {
			return err
		}
	}
	for _, m := range later {
		if err := report(m.o, m.r, nil); err != nil {
			return err
		}
	}
	if doubt.added.Blobs > 0 {
		if err := f.entrySizes(ctx, tx, g, w, bad, doubt); err != nil {
			return err
		}
	}
	// Rows of runs that do not exist: checkpoints first, then events, each
	// by run id.
	gone := func(what string) func(runID string, n int64) error {
		return func(runID string, n int64) error {
			f.add("reference", runID, "%d %s belong to run %s, which does not exist", n, what, runID)
			return nil
		}
	}
	if _, err := f.m.eachGoneRun(ctx, tx, gone("checkpoints")); err != nil {
		return err
	}
	goneEvents := gone("events")
	err = f.m.p.Events.EachRunEvents(ctx, tx, func(runID string, n int64) error {
		ok, err := f.m.p.Runs.HasRun(ctx, tx, runID)
		if err != nil || ok {
			return err
		}
		return goneEvents(runID, n)
	})
	if err != nil {
		return err
	}
	f.rep.Runs = count.runs
	f.rep.Checkpoints = int(count.checkpoints)
	return nil
}

// entrySizes walks from every root again, as the first walk did, and
// reports each file entry that names a blob in doubt and records a size
// that is not the blob's. It runs only when the first walk and the pass
// over the blob rows found a size in doubt, as a store's damage does.
func (f *fsck) entrySizes(ctx context.Context, tx *index.Tx, g *graph, w *work, bad, doubt *objMap) error {
	again := w.newMap()
	visit := func(o object) (bool, error) {
		if isBad, err := bad.has(o); err != nil || isBad {
			return false, err
		}
		return again.addNew(o)
	}
	g.leafBlobs = true
	g.fileEntry = func(tree object, e vfs.Entry) error {
		if ok, err := doubt.has(object{objBlob, e.Hash}); err != nil || !ok {
			return err
		}
		rec, ok, err := g.recs.Blob(e.Hash)
		if err != nil || !ok {
			return err
		}
		if n, known := f.plainSize(e.Hash, rec.Size); known && n != e.Size {
			f.add("size", tree.hash.String(), "entry %q records %d bytes; blob %s has %d", e.Name, e.Size, e.Hash, n)
		}
		return nil
	}
	defer func() { g.leafBlobs, g.fileEntry = false, nil }()
	// What the walk cannot reach was reported by the first one.
	return f.m.eachRoot(ctx, tx, func(r *rootRef) error {
		return g.walk([]step{r.step()}, visit, skipBad)
	})
}

// treeTotals holds the totals (vfs.Totals) of trees a walk followed and
// closed (graph.treeDone), each count in a work set of its own: the files
// and directories below the tree and the bytes its file entries record.
// A tree below which the walk did not follow something (missing, or not
// decoding) has none.
type treeTotals struct {
	files, dirs, bytes *objMap
}

func (w *work) newTreeTotals() *treeTotals {
	return &treeTotals{files: w.newMap(), dirs: w.newMap(), bytes: w.newMap()}
}

// close totals tree from its entries and the totals of the trees they
// name, closed before it.
func (t *treeTotals) close(tree object, es []vfs.Entry) error {
	var n vfs.Totals
	for _, e := range es {
		if e.Kind != vfs.KindDir {
			n.Files++
			n.Bytes += e.Size
			continue
		}
		sub, ok, err := t.get(e.Hash)
		if err != nil || !ok {
			return err
		}
		n.Dirs++
		n = n.Plus(sub)
	}
	for _, c := range []struct {
		m *objMap
		v int64
	}{{t.files, n.Files}, {t.dirs, n.Dirs}, {t.bytes, n.Bytes}} {
		if _, err := c.m.add(tree, c.v); err != nil {
			return err
		}
	}
	return nil
}

// get returns the totals of tree h and whether it has them.
func (t *treeTotals) get(h cas.Hash) (vfs.Totals, bool, error) {
	o := object{objTree, h}
	var n vfs.Totals
	for _, c := range []struct {
		m *objMap
		v *int64
	}{{t.files, &n.Files}, {t.dirs, &n.Dirs}, {t.bytes, &n.Bytes}} {
		v, ok, err := c.m.get(o)
		if err != nil || !ok {
			return vfs.Totals{}, false, err
		}
		*c.v = v
	}
	return n, true, nil
}
