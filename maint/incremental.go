package maint

import (
	"context"
	"fmt"
	"maps"

	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/vfs"
)

// DefaultStepObjects is how many rows one step of CollectSteps deletes
// when StepOptions.Objects is zero.
const DefaultStepObjects = 256

// RootsPerStepObject bounds how many steps a CollectSteps takes for the
// roots it has: a step deletes at least one row for every
// RootsPerStepObject roots (see CollectSteps).
const RootsPerStepObject = 4

// StepOptions configure CollectSteps.
type StepOptions struct {
	GCOptions
	// Objects is the most rows one step deletes, in one write
	// transaction; 0 means DefaultStepObjects. A store with more than
	// RootsPerStepObject × Objects roots deletes up to one row per
	// RootsPerStepObject roots a step instead.
	Objects int
}

// CollectSteps is GC in bounded steps, for running after deletions while
// the store is in use: mark reads one snapshot on the read pool (writers go
// on), then the garbage is swept a step at a time, each step one short
// write transaction deleting at most opt.Objects rows with GC's safety
// checks (current roots, rows refreshed since the snapshot, blob history
// numbers). Garbage goes referrers first (a tree before what it names, a
// delta before its base, a blob before its chunks), so between two steps
// no row left names a deleted one and a writer that re-uses a row by its
// hash finds all it needs. A row a step keeps protects what it references
// in the steps after. The report sums the steps'. It fails as GC does; a
// step that fails deletes nothing, and the steps before it stay done.
//
// Mark walks the whole graph once. Each step then reads the current roots
// again (a writer may have added one that reaches a row of the step), but
// descends only into what the snapshot did not mark, so a step costs its
// rows plus one read per root. So that a full collection does not cost
// steps × roots, a step deletes at least roots/RootsPerStepObject rows:
// with g garbage rows and r roots, the steps read at most
// g×RootsPerStepObject + r root rows in all, linear in the store, and no
// step's write transaction costs more than a few times its own root read.
//
// opt.Progress, if set, is called with the phase "mark" before mark, and
// "step" with the steps done and their number after each step has
// committed, outside any transaction: it may write (a host showing
// progress, or a test writing between steps).
func (m *Maintainer) CollectSteps(ctx context.Context, opt StepOptions) (GCReport, error) {
	n := opt.Objects
	if n <= 0 {
		n = DefaultStepObjects
	}
	now, grace := m.clock(opt.Now), Grace(opt.Grace)
	cutoff := now().Add(-grace).UnixNano()
	progress := orNoProgress(opt.Progress)
	progress("mark", 0, 0)
	var plan *gcPlan
	err := m.p.DB.View(ctx, func(tx *index.Tx) error {
		var err error
		if plan, err = m.markGC(ctx, tx, cutoff, func(string, int, int) {}); err != nil {
			return err
		}
		return plan.referrersFirst(ctx, m, tx)
	})
	if err != nil {
		return GCReport{}, fmt.Errorf("gc: mark: %w", err)
	}
	if opt.DryRun {
		return plan.dryRun(), nil
	}
	n = max(n, plan.roots/RootsPerStepObject)
	total := GCReport{Reachable: plan.reachable, Kept: plan.keptCount}
	all := plan.garbage
	steps := (len(all) + n - 1) / n
	for start, done := 0, 0; start < len(all); start += n {
		step := *plan
		step.garbage = nil
		for _, o := range all[start:min(start+n, len(all))] {
			if plan.kept.has(o) {
				total.Kept.add(o.kind)
				continue
			}
			step.garbage = append(step.garbage, o)
		}
		var rep GCReport
		err := m.p.DB.Update(ctx, func(tx *index.Tx) error {
			var err error
			rep, err = m.sweep(ctx, tx, &step, func(string, int, int) {})
			return err
		})
		if err != nil {
			return total, fmt.Errorf("gc: sweep: %w", err)
		}
		total.Freed.Blobs += rep.Freed.Blobs
		total.Freed.Chunks += rep.Freed.Chunks
		total.Freed.Trees += rep.Freed.Trees
		total.FreedBytes += rep.FreedBytes
		total.Kept.Blobs += rep.Kept.Blobs - plan.keptCount.Blobs
		total.Kept.Chunks += rep.Kept.Chunks - plan.keptCount.Chunks
		total.Kept.Trees += rep.Kept.Trees - plan.keptCount.Trees
		// What this step kept, and all it references, stays kept in
		// the steps after.
		maps.Copy(plan.kept, step.keep)
		done++
		progress("step", done, steps)
	}
	return total, nil
}

// referrersFirst orders p.garbage so that every object comes before the
// garbage objects it references (Kahn's algorithm over the references
// among garbage), reading each garbage object's references in tx.
func (p *gcPlan) referrersFirst(ctx context.Context, m *Maintainer, tx *index.Tx) error {
	g, err := m.newGraph(ctx, tx, p.inv)
	if err != nil {
		return err
	}
	defer g.close()
	in := make(map[object]bool, len(p.garbage))
	for _, o := range p.garbage {
		in[o] = true
	}
	refs := make(map[object][]object, len(p.garbage))
	indeg := make(map[object]int, len(p.garbage))
	for _, o := range p.garbage {
		var out []object
		switch o.kind {
		case objTree:
			es, base, _, err := g.entries(o.hash)
			if err != nil {
				continue // an undecodable garbage tree names nothing we keep
			}
			if !base.IsZero() {
				out = append(out, object{objTree, base})
			}
			for _, e := range es {
				k := objBlob
				if e.Kind == vfs.KindDir {
					k = objTree
				}
				out = append(out, object{k, e.Hash})
			}
		case objBlob:
			_, base, chunks, _, err := g.blobRefs(o.hash)
			if err != nil {
				return err
			}
			if !base.IsZero() {
				out = append(out, object{objBlob, base})
			}
			for _, c := range chunks {
				out = append(out, object{objChunk, c})
			}
		}
		seen := map[object]bool{}
		for _, r := range out {
			if in[r] && !seen[r] {
				seen[r] = true
				refs[o] = append(refs[o], r)
				indeg[r]++
			}
		}
	}
	order := make([]object, 0, len(p.garbage))
	var queue []object
	for _, o := range p.garbage { // sorted for sweep: a stable start
		if indeg[o] == 0 {
			queue = append(queue, o)
		}
	}
	for len(queue) > 0 {
		o := queue[0]
		queue = queue[1:]
		order = append(order, o)
		for _, r := range refs[o] {
			if indeg[r]--; indeg[r] == 0 {
				queue = append(queue, r)
			}
		}
	}
	p.garbage = order
	return nil
}
