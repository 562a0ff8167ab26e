package maint

import (
	"context"
	"fmt"

	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
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
	// transaction; 0 means DefaultStepObjects, negative is
	// workspace.invalid_argument. A store with more than
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
// step that fails deletes nothing, and the steps before it stay done: the
// report of them is returned with the error.
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
	n, err := stepObjects("gc", opt)
	if err != nil {
		return GCReport{}, err
	}
	now, grace := m.clock(opt.Now), Grace(opt.Grace)
	cutoff := m.cutoff(now().UnixNano(), grace)
	progress := orNoProgress(opt.Progress)
	progress("mark", 0, 0)
	w := newWork(ctx)
	defer w.close()
	var plan *gcPlan
	var order *objList
	err = m.p.DB.View(ctx, func(tx *index.Tx) error {
		var err error
		if plan, err = m.markGC(ctx, tx, w, cutoff, func(string, int, int) {}); err != nil {
			return err
		}
		if opt.DryRun {
			return nil
		}
		order, err = plan.referrersFirst(ctx, m, tx)
		return err
	})
	if err != nil {
		return GCReport{}, fmt.Errorf("gc: mark: %w", err)
	}
	if opt.DryRun {
		return plan.dryRun(), nil
	}
	n = max(n, plan.roots/RootsPerStepObject)
	total := GCReport{Reachable: plan.reachable, Kept: plan.keptCount}
	all := order.len()
	steps := all / n // rounded up below: all+n-1 may be past any int
	if all%n != 0 {
		steps++
	}
	for start, done := 0, 0; start < all; start += n {
		garbage := w.newMap()
		for i := start; i < min(start+n, all); i++ {
			o, err := order.at(i)
			if err != nil {
				return total, fmt.Errorf("gc: sweep: %w", err)
			}
			kept, err := plan.kept.has(o)
			if err != nil {
				return total, fmt.Errorf("gc: sweep: %w", err)
			}
			if kept {
				total.Kept.add(o.kind)
				continue
			}
			gen, _, err := plan.garbage.get(o)
			if err == nil {
				_, err = garbage.add(o, gen)
			}
			if err != nil {
				return total, fmt.Errorf("gc: sweep: %w", err)
			}
		}
		var rep GCReport
		err := m.p.DB.Update(ctx, func(tx *index.Tx) error {
			var err error
			rep, err = m.sweep(ctx, tx, plan, garbage, func(string, int, int) {})
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
		done++
		progress("step", done, steps)
	}
	return total, nil
}

// referrersFirst returns the garbage in an order where every object comes
// before the garbage objects it references (Kahn's algorithm over the
// references among garbage), reading each garbage object's references in
// tx, twice, rather than holding them: its work sets spill to disk like
// the plan's.
func (p *gcPlan) referrersFirst(ctx context.Context, m *Maintainer, tx *index.Tx) (*objList, error) {
	g, err := m.newGraph(ctx, tx)
	if err != nil {
		return nil, err
	}
	defer g.close()
	// refs calls fn once with each garbage object o references.
	refs := func(o object, fn func(r object) error) error {
		var out []object
		switch o.kind {
		case objTree:
			es, base, _, err := g.entries(o.hash)
			if err != nil {
				return nil // an undecodable garbage tree names nothing we keep
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
			if seen[r] {
				continue
			}
			seen[r] = true
			if in, err := p.garbage.has(r); err != nil || !in {
				if err != nil {
					return err
				}
				continue
			}
			if err := fn(r); err != nil {
				return err
			}
		}
		return nil
	}
	indeg := p.w.newMap()
	err = p.garbage.each(func(o object, _ int64) error {
		return refs(o, func(r object) error {
			d, _, err := indeg.get(r)
			if err != nil {
				return err
			}
			return indeg.set(r, d+1)
		})
	})
	if err != nil {
		return nil, err
	}
	order := p.w.newList()
	err = p.garbage.each(func(o object, _ int64) error { // in sweep order: a stable start
		if d, _, err := indeg.get(o); err != nil || d > 0 {
			return err
		}
		return order.push(o)
	})
	if err != nil {
		return nil, err
	}
	for i := 0; i < order.len(); i++ {
		o, err := order.at(i)
		if err != nil {
			return nil, err
		}
		err = refs(o, func(r object) error {
			d, _, err := indeg.get(r)
			if err != nil {
				return err
			}
			if err := indeg.set(r, d-1); err != nil {
				return err
			}
			if d == 1 {
				return order.push(r)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return order, nil
}

// stepObjects is opt.Objects, DefaultStepObjects for 0; a negative one is
// workspace.invalid_argument.
func stepObjects(op string, opt StepOptions) (int, error) {
	switch {
	case opt.Objects < 0:
		return 0, wserr.New(wserr.InvalidArgument, op, "", "step objects %d is negative (0: %d)", opt.Objects, DefaultStepObjects)
	case opt.Objects == 0:
		return DefaultStepObjects, nil
	}
	return opt.Objects, nil
}
