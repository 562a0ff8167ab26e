package maint

import (
	"context"
	"fmt"
	"maps"
	"slices"
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
// with no grace GC is safe only while nothing writes that way.
//
// GC fails with store.corrupt, deleting nothing, if an object reachable
// from a root is missing or a reachable tree does not decode: the walk
// could not know what lies below it. Fsck names every such problem.
func (m *Maintainer) GC(ctx context.Context, opt GCOptions) (GCReport, error) {
	now, grace := m.clock(opt.Now), Grace(opt.Grace)
	progress := orNoProgress(opt.Progress)
	cutoff := now().Add(-grace).UnixNano()

	progress("mark", 0, 0)
	var plan *gcPlan
	err := m.p.DB.View(ctx, func(tx *index.Tx) error {
		var err error
		plan, err = m.markGC(ctx, tx, cutoff, progress)
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
		rep, err = m.sweep(ctx, tx, plan, progress)
		return err
	})
	if err != nil {
		return GCReport{}, fmt.Errorf("gc: sweep: %w", err)
	}
	return rep, nil
}

// gcPlan is what mark found: what to keep and what to delete.
type gcPlan struct {
	cutoff int64
	inv    *inventory
	// marked is everything reachable from the roots in the snapshot; kept
	// is everything unreachable but young, with what it references.
	marked, kept objSet
	// garbage lists the unreachable old objects, in delete order: blobs,
	// chunks, trees.
	garbage   []object
	reachable ObjectCounts
	keptCount ObjectCounts
	// due holds the trees marked only as patch bases: their entries were
	// not followed, and must be if a root or a young row turns out to
	// need the tree itself.
	due map[cas.Hash]bool
	// gens holds each garbage blob's number in its version history as
	// the snapshot saw it.
	gens map[cas.Hash]int64
	// keep is what sweep found reachable or refreshed beyond the marks,
	// with all it references: the rows a later step must keep too.
	keep objSet
	// roots is how many roots the snapshot held.
	roots int
}

func (m *Maintainer) markGC(ctx context.Context, tx *index.Tx, cutoff int64, progress func(string, int, int)) (*gcPlan, error) {
	inv, rs, g, err := m.openGraph(ctx, tx)
	if err != nil {
		return nil, err
	}
	defer g.close()

	p := &gcPlan{cutoff: cutoff, inv: inv, marked: objSet{}, kept: objSet{}, gens: map[cas.Hash]int64{}, roots: len(rs.roots)}
	for i := range rs.roots {
		if err := g.walk([]step{rs.roots[i].step()}, p.marked.addNew, badIsCorrupt("gc")); err != nil {
			return nil, err
		}
		progress("mark", i+1, len(rs.roots))
	}
	for o := range p.marked {
		if inv.has(o) {
			p.reachable.add(o.kind)
		}
	}

	// Unreachable rows younger than the cutoff stay, and so does all they
	// reference: a writer may be about to reference them, and a surviving
	// tree or blob must never name a deleted row.
	var young, old []step
	for o := range inv.all() {
		if p.marked.has(o) {
			continue
		}
		c, ok, err := g.created(o)
		if err != nil {
			return nil, err
		}
		switch {
		case !ok:
		case c >= cutoff:
			young = append(young, step{o: o})
		default:
			old = append(old, step{o: o})
			if o.kind == objBlob {
				if p.gens[o.hash], err = g.blobGen(o.hash); err != nil {
					return nil, err
				}
			}
		}
	}
	// A tree marked only as a patch base but written again since the
	// cutoff may be about to be referenced as a tree: what it names stays.
	due, err := youngDue(g, cutoff)
	if err != nil {
		return nil, err
	}
	visitKept := func(o object) bool { return !p.marked.has(o) && p.kept.addNew(o) }
	if err := g.walk(append(young, due...), visitKept, skipBad); err != nil {
		return nil, err
	}
	p.due = maps.Clone(g.entriesDue)
	for o := range p.kept {
		if inv.has(o) {
			p.keptCount.add(o.kind)
		}
	}
	for _, st := range old {
		if !p.kept.has(st.o) {
			p.garbage = append(p.garbage, st.o)
		}
	}
	sortForSweep(p.garbage)
	return p, nil
}

// sortForSweep orders objects blobs first, then chunks, then trees: a blob
// row's deletion cascades to its chunk list, which must be gone before the
// chunks it names can go.
func sortForSweep(objs []object) {
	rank := map[objKind]int{objBlob: 0, objChunk: 1, objTree: 2}
	slices.SortFunc(objs, func(a, b object) int {
		if r := rank[a.kind] - rank[b.kind]; r != 0 {
			return r
		}
		return slices.Compare(a.hash[:], b.hash[:])
	})
}

func (p *gcPlan) candidates() int { return len(p.garbage) }

func (p *gcPlan) dryRun() GCReport {
	rep := GCReport{DryRun: true, Reachable: p.reachable, Kept: p.keptCount}
	for _, o := range p.garbage {
		rep.Freed.add(o.kind)
		rep.FreedBytes += p.inv.stored(o)
	}
	return rep
}

// sweep deletes the garbage in tx, the write transaction, after checking
// it against the store as it is now: writers may have committed since the
// snapshot. Everything reachable from the current roots, and everything a
// refreshed row references, is kept.
func (m *Maintainer) sweep(ctx context.Context, tx *index.Tx, p *gcPlan, progress func(string, int, int)) (GCReport, error) {
	rep := GCReport{Reachable: p.reachable, Kept: p.keptCount}
	g, err := m.newGraph(ctx, tx, nil)
	if err != nil {
		return rep, err
	}
	defer g.close()
	g.entriesDue = maps.Clone(p.due)
	// reached is what the current roots reach beyond the snapshot's
	// marks; young is what rows re-used since the snapshot reference.
	reached, young := objSet{}, objSet{}
	protect := func(set objSet) func(o object) bool {
		return func(o object) bool {
			return !p.marked.has(o) && !p.kept.has(o) && !reached.has(o) && set.addNew(o)
		}
	}
	rs, err := m.loadRoots(ctx, tx)
	if err != nil {
		return rep, err
	}
	for i := range rs.roots {
		if err := g.walk([]step{rs.roots[i].step()}, protect(reached), badIsCorrupt("gc")); err != nil {
			return rep, err
		}
	}

	// A row re-used since the snapshot is young again: keep it and what it
	// references.
	var refreshed []step
	for _, o := range p.garbage {
		if reached.has(o) {
			continue
		}
		c, ok, err := g.created(o)
		if err != nil {
			return rep, err
		}
		if ok && c >= p.cutoff {
			refreshed = append(refreshed, step{o: o})
			continue
		}
		// A blob stored before may have become the newest version of a
		// history since (cas: PutVersion), and the versions it replaced,
		// reachable or not, may now be deltas against it. Its number is
		// what says so, whatever the writer's clock.
		if ok && o.kind == objBlob {
			gen, err := g.blobGen(o.hash)
			if err != nil {
				return rep, err
			}
			if gen != p.gens[o.hash] {
				refreshed = append(refreshed, step{o: o})
			}
		}
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
	for seg := range segments(p.garbage) {
		kind := seg[0].kind
		var doomed []cas.Hash
		for _, o := range seg {
			switch {
			case reached.has(o):
				rep.Reachable.add(o.kind)
			case young.has(o):
				rep.Kept.add(o.kind)
			default:
				doomed = append(doomed, o.hash)
				continue
			}
			done++
			progress("sweep", done, len(p.garbage))
		}
		err := sweeps[kind](ctx, tx, doomed, p.cutoff, func(_ int, n int64, deleted bool) error {
			if deleted {
				rep.Freed.add(kind)
				rep.FreedBytes += n
			} else {
				rep.Kept.add(kind)
			}
			done++
			progress("sweep", done, len(p.garbage))
			return nil
		})
		if err != nil {
			return rep, err
		}
	}
	p.keep = objSet{}
	maps.Copy(p.keep, reached)
	maps.Copy(p.keep, young)
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
