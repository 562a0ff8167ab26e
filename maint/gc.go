package maint

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
)

// DefaultGCGrace is how old an unreachable row must be before GC deletes
// it when GCOptions.Grace is zero. It is far longer than any write
// transaction, so a writer that has stored a blob but not yet committed the
// tree that references it never loses the blob.
const DefaultGCGrace = 15 * time.Minute

// GCOptions configure GC. The zero value is a real collection with the
// default grace on the wall clock.
type GCOptions struct {
	// DryRun computes the report and deletes nothing.
	DryRun bool
	// Grace keeps unreachable rows younger than this (by their created
	// time, which writers refresh whenever they re-use a row). Zero means
	// DefaultGCGrace; negative means no grace, for tests and for a store
	// nothing else writes to.
	Grace time.Duration
	// Now is the clock the grace is measured on; default the store's
	// clock (Parts.Now, else time.Now).
	Now func() time.Time
	// Progress, if not nil, is called as work proceeds with the phase
	// ("mark", then "sweep" unless DryRun), the work done and the total.
	// The first call of each phase (done 0) is made before that phase's
	// transaction begins; later calls are made inside it, so Progress must
	// not write to the store.
	Progress func(phase string, done, total int)
}

// ObjectCounts counts stored objects by kind.
type ObjectCounts struct {
	Blobs  int `json:"blobs"`
	Chunks int `json:"chunks"`
	Trees  int `json:"trees"`
}

func (c *ObjectCounts) add(k objKind) {
	switch k {
	case objBlob:
		c.Blobs++
	case objChunk:
		c.Chunks++
	case objTree:
		c.Trees++
	}
}

// GCReport says what GC found and what it deleted (or, in a dry run, would
// delete).
type GCReport struct {
	DryRun bool `json:"dryRun"`
	// Reachable counts the stored objects reachable from a root.
	Reachable ObjectCounts `json:"reachable"`
	// Freed counts the rows deleted.
	Freed ObjectCounts `json:"freed"`
	// FreedBytes is the stored size of the deleted rows: blobs.stored,
	// chunks.stored and the length of trees.data.
	FreedBytes int64 `json:"freedBytes"`
	// Kept counts unreachable rows kept because they are younger than the
	// grace, or referenced by such a row (a young tree keeps its children,
	// so no surviving row ever names a deleted one).
	Kept ObjectCounts `json:"keptYoung"`
}

// Grace is the grace a collection gives objects younger than it: g, with
// 0 meaning DefaultGCGrace and a negative g none at all.
func Grace(g time.Duration) time.Duration {
	switch {
	case g == 0:
		return DefaultGCGrace
	case g < 0:
		return 0
	}
	return g
}

// clock is the clock a collection reads: now, or m's when now is nil.
func (m *Maintainer) clock(now func() time.Time) func() time.Time {
	if now == nil {
		return m.p.Now
	}
	return now
}

// orNoProgress is progress, or a callback that reports nothing for nil.
func orNoProgress(progress func(string, int, int)) func(string, int, int) {
	if progress == nil {
		return func(string, int, int) {}
	}
	return progress
}

// GC deletes the blobs, chunks and trees that no root reaches: mark and
// sweep. The roots are every run's live root and persist base, every
// checkpoint's root and every chat's persist root. Mark reads one consistent
// snapshot; sweep runs in one write transaction, so a GC either deletes
// everything it reports or nothing.
//
// GC never deletes what a concurrent writer needs: sweep deletes only rows
// unreachable in the snapshot, older than the grace, and still unreachable
// from the roots as they are once sweep holds the write lock (whatever the
// writers' clocks say); every row it keeps keeps what it references. The
// grace covers rows a writer committed on their own and will reference
// later (a large Put streams its chunks in transactions of their own), so
// with no grace GC is safe only while nothing writes that way in another
// process: the Puts streaming in this one are kept (Streams).
//
// GC fails with store.corrupt, deleting nothing, if an object reachable
// from a root is missing or a reachable tree does not decode: the walk
// could not know what lies below it. Fsck names every such problem.
func (m *Maintainer) GC(ctx context.Context, opt GCOptions) (GCReport, error) {
	now, grace := m.clock(opt.Now), Grace(opt.Grace)
	progress := orNoProgress(opt.Progress)
	cutoff := m.cutoff(now().UnixNano(), grace)

	progress("mark", 0, 0)
	w := newWork(ctx)
	defer w.close()
	var plan *gcPlan
	err := m.p.DB.View(ctx, func(tx *index.Tx) error {
		var err error
		plan, err = m.markGC(ctx, tx, w, cutoff, progress)
		return err
	})
	if err != nil {
		return GCReport{}, fmt.Errorf("gc: mark: %w", err)
	}
	if opt.DryRun {
		return plan.dryRun(), nil
	}
	var rep GCReport
	progress("sweep", 0, plan.candidates())
	err = m.p.DB.Update(ctx, func(tx *index.Tx) error {
		var err error
		rep, err = m.sweep(ctx, tx, plan, plan.garbage, progress)
		return err
	})
	if err != nil {
		return GCReport{}, fmt.Errorf("gc: sweep: %w", err)
	}
	return rep, nil
}

// gcPlan is what mark found: what to keep and what to delete. Its sets
// are work sets (objMap), in memory up to a bound and on disk beyond, so a
// collection's memory does not grow with the store.
type gcPlan struct {
	w      *work
	cutoff int64
	// marked is everything reachable from the roots in the snapshot; kept
	// is everything unreachable but young, with what it references.
	marked, kept *objMap
	// garbage holds the unreachable old objects, each with its number in
	// its version history as the snapshot saw it (blobs; 0 for others),
	// in delete order: blobs, chunks, trees.
	garbage   *objMap
	nGarbage  int
	reachable ObjectCounts
	keptCount ObjectCounts
	// freed and freedBytes are what deleting the garbage would free.
	freed      ObjectCounts
	freedBytes int64
	// due holds the trees marked only as patch bases: their entries were
	// not followed, and must be if a root or a young row turns out to
	// need the tree itself.
	due map[cas.Hash]bool
	// roots is how many roots the snapshot held.
	roots int
}

func (m *Maintainer) markGC(ctx context.Context, tx *index.Tx, w *work, cutoff int64, progress func(string, int, int)) (*gcPlan, error) {
	count, err := m.countRoots(ctx, tx)
	if err != nil {
		return nil, err
	}
	g, err := m.newGraph(ctx, tx)
	if err != nil {
		return nil, err
	}
	defer g.close()

	p := &gcPlan{w: w, cutoff: cutoff, marked: w.newMap(), kept: w.newMap(), garbage: w.newMap(), roots: count.roots}
	// Trees are read as the walk reaches them; blobs only in the pass
	// over their rows below, which follows the delta bases and chunks of
	// those marked.
	g.leafBlobs = true
	done := 0
	err = m.eachRoot(ctx, tx, func(r *rootRef) error {
		if err := g.walk([]step{r.step()}, p.marked.addNew, badIsCorrupt("gc")); err != nil {
			return err
		}
		done++
		progress("mark", done, count.roots)
		return nil
	})
	if err != nil {
		return nil, err
	}
	g.leafBlobs = false

	// Unreachable rows younger than the cutoff stay, and so does all they
	// reference: a writer may be about to reference them, and a surviving
	// tree or blob must never name a deleted row.
	visitKept := func(o object) (bool, error) {
		if marked, err := p.marked.has(o); err != nil || marked {
			return false, err
		}
		return p.kept.addNew(o)
	}
	err = m.eachRow(ctx, tx, func(o object, r rowMeta, rec *cas.BlobRecord) error {
		marked, err := p.marked.has(o)
		switch {
		case err != nil:
			return err
		case marked:
			if rec != nil {
				return followBlob(g, rec, p.marked.addNew, badIsCorrupt("gc"))
			}
		case r.created >= cutoff:
			return g.walk([]step{{o: o}}, visitKept, skipBad)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// A tree marked only as a patch base but written again since the
	// cutoff may be about to be referenced as a tree: what it names stays.
	due, err := youngDue(g, cutoff)
	if err != nil {
		return nil, err
	}
	if err := g.walk(due, visitKept, skipBad); err != nil {
		return nil, err
	}
	p.due = maps.Clone(g.entriesDue)
	// Marking is complete now (a delta base of an earlier hash is marked
	// after the pass has met its row): count and sort the rows.
	err = m.eachRow(ctx, tx, func(o object, r rowMeta, _ *cas.BlobRecord) error {
		if marked, err := p.marked.has(o); err != nil || marked {
			if marked {
				p.reachable.add(o.kind)
			}
			return err
		}
		kept, err := p.kept.has(o)
		switch {
		case err != nil:
			return err
		case kept:
			p.keptCount.add(o.kind)
			return nil
		case r.created >= cutoff:
			return nil
		}
		var gen int64
		if o.kind == objBlob {
			if gen, err = g.blobGen(o.hash); err != nil {
				return err
			}
		}
		if _, err := p.garbage.add(o, gen); err != nil {
			return err
		}
		p.nGarbage++
		p.freed.add(o.kind)
		p.freedBytes += r.stored
		return nil
	})
	if err != nil {
		return nil, err
	}
	// A marked blob or chunk the rows do not hold is missing: walk again,
	// reading every blob, to name it.
	if p.marked.added.Blobs != p.reachable.Blobs || p.marked.added.Chunks != p.reachable.Chunks {
		return nil, m.missingReachable(ctx, tx, g, "gc")
	}
	return p, nil
}

func (p *gcPlan) candidates() int { return p.nGarbage }

func (p *gcPlan) dryRun() GCReport {
	return GCReport{DryRun: true, Reachable: p.reachable, Kept: p.keptCount, Freed: p.freed, FreedBytes: p.freedBytes}
}

// protected reports whether the snapshot marked o or kept it (with what
// an earlier step kept since).
func (p *gcPlan) protected(o object) (bool, error) {
	if ok, err := p.marked.has(o); err != nil || ok {
		return ok, err
	}
	return p.kept.has(o)
}

// sweepBatch is how many rows sweep hands an owner's sweep at a time.
const sweepBatch = 1024

// sweep deletes the garbage in tx, the write transaction, after checking
// it against the store as it is now: writers may have committed since the
// snapshot. Everything reachable from the current roots, and everything a
// refreshed row references, is kept.
func (m *Maintainer) sweep(ctx context.Context, tx *index.Tx, p *gcPlan, garbage *objMap, progress func(string, int, int)) (GCReport, error) {
	rep := GCReport{Reachable: p.reachable, Kept: p.keptCount}
	g, err := m.newGraph(ctx, tx)
	if err != nil {
		return rep, err
	}
	defer g.close()
	g.entriesDue = maps.Clone(p.due)
	// reached is what the current roots reach beyond the snapshot's
	// marks; young is what rows re-used since the snapshot reference.
	reached, young := p.w.newMap(), p.w.newMap()
	protect := func(set *objMap) func(o object) (bool, error) {
		return func(o object) (bool, error) {
			if ok, err := p.protected(o); err != nil || ok {
				return false, err
			}
			if ok, err := reached.has(o); err != nil || ok {
				return false, err
			}
			return set.addNew(o)
		}
	}
	err = m.eachRoot(ctx, tx, func(r *rootRef) error {
		return g.walk([]step{r.step()}, protect(reached), badIsCorrupt("gc"))
	})
	if err != nil {
		return rep, err
	}

	// A row re-used since the snapshot is young again: keep it and what it
	// references.
	var refreshed []step
	total := 0
	err = garbage.each(func(o object, snapGen int64) error {
		total++
		if ok, err := reached.has(o); err != nil || ok {
			return err
		}
		c, ok, err := g.created(o)
		if err != nil {
			return err
		}
		if ok && c >= p.cutoff {
			refreshed = append(refreshed, step{o: o})
			return nil
		}
		// A blob stored before may have become the newest version of a
		// history since (cas: PutVersion), and the versions it replaced,
		// reachable or not, may now be deltas against it. Its number is
		// what says so, whatever the writer's clock.
		if ok && o.kind == objBlob {
			gen, err := g.blobGen(o.hash)
			if err != nil {
				return err
			}
			if gen != snapGen {
				refreshed = append(refreshed, step{o: o})
			}
		}
		return nil
	})
	if err != nil {
		return rep, err
	}
	due, err := youngDue(g, p.cutoff)
	if err != nil {
		return rep, err
	}
	refreshed = append(refreshed, due...)
	if err := g.walk(refreshed, protect(young), skipBad); err != nil {
		return rep, err
	}

	// The owners' sweeps check age and, for chunks, references again; a
	// row they keep was refreshed or is listed by a blob written since
	// the snapshot. Kinds go in the garbage's order: blobs, chunks, trees.
	sweeps := map[objKind]func(ctx context.Context, tx *index.Tx, hs []cas.Hash, cutoff int64, fn func(int, int64, bool) error) error{
		objBlob: m.p.Blobs.SweepBlobs, objChunk: m.p.Blobs.SweepChunks, objTree: m.p.Trees.SweepTrees,
	}
	done := 0
	var kind objKind
	var doomed []cas.Hash
	flush := func() error {
		k := kind
		err := sweeps[k](ctx, tx, doomed, p.cutoff, func(_ int, n int64, deleted bool) error {
			if deleted {
				rep.Freed.add(k)
				rep.FreedBytes += n
			} else {
				rep.Kept.add(k)
			}
			done++
			progress("sweep", done, total)
			return nil
		})
		doomed = doomed[:0]
		return err
	}
	err = garbage.each(func(o object, _ int64) error {
		if len(doomed) > 0 && (o.kind != kind || len(doomed) == sweepBatch) {
			if err := flush(); err != nil {
				return err
			}
		}
		kind = o.kind
		if ok, err := reached.has(o); err != nil || ok {
			if ok {
				rep.Reachable.add(o.kind)
				done++
				progress("sweep", done, total)
			}
			return err
		}
		if ok, err := young.has(o); err != nil || ok {
			if ok {
				rep.Kept.add(o.kind)
				done++
				progress("sweep", done, total)
			}
			return err
		}
		doomed = append(doomed, o.hash)
		return nil
	})
	if err == nil && len(doomed) > 0 {
		err = flush()
	}
	if err != nil {
		return rep, err
	}
	// What this sweep kept, and all it references, stays kept in the
	// steps after (CollectSteps).
	for _, set := range []*objMap{reached, young} {
		if err := set.each(func(o object, _ int64) error {
			_, err := p.kept.addNew(o)
			return err
		}); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// segments yields the runs of objects of one kind in objs.
func segments(objs []object) func(yield func([]object) bool) {
	return func(yield func([]object) bool) {
		for start := 0; start < len(objs); {
			end := start + 1
			for end < len(objs) && objs[end].kind == objs[start].kind {
				end++
			}
			if !yield(objs[start:end]) {
				return
			}
			start = end
		}
	}
}

// youngDue returns, as steps to walk as trees, the trees g has reached only
// as patch bases that were written at or after cutoff.
func youngDue(g *graph, cutoff int64) ([]step, error) {
	var out []step
	for h := range g.entriesDue {
		o := object{objTree, h}
		c, ok, err := g.created(o)
		if err != nil {
			return nil, err
		}
		if ok && c >= cutoff {
			out = append(out, step{o: o})
		}
	}
	return out, nil
}
