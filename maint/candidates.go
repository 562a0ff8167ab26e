package maint

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/vfs"
)

// ErrNeedsMark is CollectCandidates' error when a part cannot answer its
// questions through an index (a blob storage without
// cas.ReferenceStorage, a root owner without HoldsTree): the store must be
// marked whole (CollectSteps) instead.
var ErrNeedsMark = errors.New("gc: the store's parts cannot check single objects; mark the whole store")

// TreeHolder is the ability of a root owner (runs, checkpoints, actor
// spaces) to say whether its rows hold tree h as a root, through an index.
type TreeHolder interface {
	HoldsTree(ctx context.Context, tx *index.Tx, h cas.Hash) (bool, error)
}

// TreeCandidates is the tree store's side of collecting after deletions:
// the candidates deletions recorded, whether a stored tree names an
// object, and deleting one tree with the list of what it named;
// *vfs.Trees implements it.
type TreeCandidates interface {
	RefsReady(ctx context.Context, tx *index.Tx) (bool, error)
	BackfillRefs(ctx context.Context, tx *index.Tx, limit int) (bool, error)
	TreeNamed(ctx context.Context, tx *index.Tx, h cas.Hash) (bool, error)
	TreeCreated(ctx context.Context, tx *index.Tx, h cas.Hash) (int64, bool, error)
	DeleteTree(ctx context.Context, tx *index.Tx, h cas.Hash, cutoff int64) (int64, []vfs.Candidate, bool, error)
	AddCandidates(ctx context.Context, tx *index.Tx, cs []vfs.Candidate, due int64) error
	CandidatesEnd(ctx context.Context, tx *index.Tx) (int64, error)
	TakeCandidates(ctx context.Context, tx *index.Tx, now int64, limit int) ([]vfs.Candidate, error)
	TakeCandidatesIn(ctx context.Context, tx *index.Tx, span vfs.QueueSpan, now int64, limit int) ([]vfs.Candidate, error)
	CandidatesDue(ctx context.Context, tx *index.Tx, now int64) (bool, error)
	NextCandidateDue(ctx context.Context, tx *index.Tx) (int64, bool, error)
	DropCandidatesDue(ctx context.Context, tx *index.Tx, due, upto int64) error
}

// BlobReferrers is the content store's side: whether a stored blob names
// a blob (delta base) or chunk, and deleting one object; *cas.Store
// implements it.
type BlobReferrers interface {
	TellsReferences() bool
	Referenced(ctx context.Context, tx *index.Tx, kind cas.Kind, h cas.Hash) (bool, error)
	DeleteObject(ctx context.Context, tx *index.Tx, kind cas.Kind, h cas.Hash, cutoff int64) (int64, bool, error)
}

// CandidateReport says what CollectCandidates did.
type CandidateReport struct {
	GCReport
	// Checked counts the candidates examined, Deferred those kept for
	// their age (checked again once the grace has passed), Steps the
	// write transactions.
	Checked  int `json:"checked"`
	Deferred int `json:"deferred"`
	Steps    int `json:"steps"`
	// Backlog counts, for CollectAfter, the candidates examined that
	// operations before the one it follows had recorded; BacklogLeft
	// says whether it stopped at its bound with candidates still due
	// queued (not when the bound took the last of them).
	Backlog     int  `json:"backlog,omitempty"`
	BacklogLeft bool `json:"backlogLeft,omitempty"`
}

// DefaultBacklog is how many candidates recorded before an operation the
// collection after it (CollectAfter) examines besides the operation's
// own: one step's worth. Record operations, rollbacks, checkpoints a
// run's caps prune, actor space gc and (without automatic pruning) a
// run's end record candidates and collect nothing, so a store's backlog
// grows with its use; the collection after each deletion or run
// end takes this much of it, a few thousand statements at most, and
// the store's background collection while it is idle (CollectStep), gc
// or Reclaim takes the rest.
const DefaultBacklog = DefaultStepObjects

// candidateParts returns the parts CollectCandidates composes, or
// ErrNeedsMark.
func (m *Maintainer) candidateParts() (TreeCandidates, BlobReferrers, []TreeHolder, error) {
	tc, ok := m.p.Trees.(TreeCandidates)
	if !ok {
		return nil, nil, nil, ErrNeedsMark
	}
	br, ok := m.p.Blobs.(BlobReferrers)
	if !ok || !br.TellsReferences() {
		return nil, nil, nil, ErrNeedsMark
	}
	var holders []TreeHolder
	for _, p := range []any{m.p.Runs, m.p.Checkpoints} {
		h, ok := p.(TreeHolder)
		if !ok {
			return nil, nil, nil, ErrNeedsMark
		}
		holders = append(holders, h)
	}
	if m.p.Actors != nil {
		h, ok := m.p.Actors.(TreeHolder)
		if !ok {
			return nil, nil, nil, ErrNeedsMark
		}
		holders = append(holders, h)
	}
	return tc, br, holders, nil
}

// CollectCandidates is the collection that follows deletions: it checks
// the objects the deleting transactions recorded as candidates (the
// trees their rows held) and, for each it deletes, what that object named,
// so its cost grows with what the deletions left unreferenced, not with
// the store. Each candidate is checked against every possible referrer by
// an index lookup: the root owners (TreeHolder), the tree rows (a tree row
// lists what it names), the blobs (delta bases, chunk lists). One that is
// referenced is dropped (whoever drops that reference later records it
// again); one younger than the grace waits until the grace has passed; the
// rest are deleted. It works in steps of at most opt.Objects candidates,
// each one write transaction that checks, deletes and records the next
// candidates together, so a crash leaves the queue as the last committed
// step did, and writers go on between steps. Since every check runs under
// the write lock, it sees whatever writers committed before it, a blob
// that became a delta base included. It takes every candidate due, the
// whole queue; CollectAfter takes one operation's.
//
// A store created before the lists of what trees name has them filled in
// first, in steps of opt.Objects trees (once). It fails with ErrNeedsMark
// when a part cannot answer through an index, and as GC does otherwise; a
// step that fails deletes nothing, and the steps before it stay done: the
// report of them is returned with the error.
func (m *Maintainer) CollectCandidates(ctx context.Context, opt StepOptions) (CandidateReport, error) {
	return m.collect(ctx, opt, nil, 0)
}

// CollectAfter is CollectCandidates after one operation: it takes the
// candidates recorded after place after (CandidatesEnd before the
// operation began) up to the queue's end as it starts, with what those
// lead to, and then at most backlog of the candidates other operations
// left (the earliest due first), so its cost grows with what the
// operation changed, not with what the store's use left queued. What it
// does not take stays queued, in SQLite, for the next collection; a
// negative backlog takes none. It fails as CollectCandidates does.
func (m *Maintainer) CollectAfter(ctx context.Context, opt StepOptions, after int64, backlog int) (CandidateReport, error) {
	return m.collect(ctx, opt, &after, max(backlog, 0))
}

// CollectStep is one step of CollectCandidates, for a collection that
// takes the queue a step at a time while the store is idle: at most one
// write transaction, which checks up to opt.Objects of the candidates due
// (the earliest due first) and deletes and records as CollectCandidates'
// steps do, or, on a store whose lists of what trees name are not filled
// in yet, fills in opt.Objects trees' lists. It writes nothing when no
// candidate is due and the lists are whole (rep.Steps is 0 then, else 1).
// It returns when the earliest candidate queued after it is due (Unix
// nanoseconds on the clock the grace is measured on) and whether any is
// queued. It fails as CollectCandidates does; a step that fails changes
// nothing.
func (m *Maintainer) CollectStep(ctx context.Context, opt StepOptions) (rep CandidateReport, next int64, queued bool, err error) {
	tc, br, holders, err := m.candidateParts()
	if err != nil {
		return rep, 0, false, err
	}
	n, err := stepObjects("gc step", opt)
	if err != nil {
		return rep, 0, false, err
	}
	now := m.clock(opt.Now)
	// A read first: an idle store with nothing due takes no write lock.
	ready := false
	err = m.p.DB.View(ctx, func(tx *index.Tx) error {
		var err error
		if ready, err = tc.RefsReady(ctx, tx); err != nil {
			return err
		}
		next, queued, err = tc.NextCandidateDue(ctx, tx)
		return err
	})
	if err != nil {
		return rep, 0, false, fmt.Errorf("gc: collect candidates: %w", err)
	}
	if ready && (!queued || next > now().UnixNano()) {
		return rep, next, queued, nil
	}
	c := collector{m: m, tc: tc, br: br, holders: holders, grace: Grace(opt.Grace)}
	err = m.p.DB.Update(ctx, func(tx *index.Tx) error {
		c.rep = CandidateReport{}
		if ready, err := tc.RefsReady(ctx, tx); err != nil || !ready {
			if err == nil {
				_, err = tc.BackfillRefs(ctx, tx, n)
			}
			next, queued = now().UnixNano(), true // the candidates wait for the lists
			return err
		}
		if _, err := c.step(ctx, tx, now().UnixNano(), n, func(tx *index.Tx, now int64, limit int) ([]vfs.Candidate, error) {
			return tc.TakeCandidates(ctx, tx, now, limit)
		}); err != nil {
			return err
		}
		var err error
		next, queued, err = tc.NextCandidateDue(ctx, tx)
		return err
	})
	if err != nil {
		return CandidateReport{}, 0, false, fmt.Errorf("gc: collect candidates: %w", err)
	}
	c.rep.Steps = 1
	return c.rep, next, queued, nil
}

// CandidatesEnd returns the place of the last candidate recorded so far,
// for CollectAfter and DropCandidatesDue; 0 when the tree store keeps no
// queue.
func (m *Maintainer) CandidatesEnd(ctx context.Context) (int64, error) {
	tc, ok := m.p.Trees.(TreeCandidates)
	if !ok {
		return 0, nil
	}
	var end int64
	err := m.p.DB.View(ctx, func(tx *index.Tx) error {
		var err error
		end, err = tc.CandidatesEnd(ctx, tx)
		return err
	})
	return end, err
}

// collect takes the whole queue (after nil), or the candidates after
// *after and at most backlog others.
func (m *Maintainer) collect(ctx context.Context, opt StepOptions, after *int64, backlog int) (CandidateReport, error) {
	var rep CandidateReport
	tc, br, holders, err := m.candidateParts()
	if err != nil {
		return rep, err
	}
	n, err := stepObjects("gc candidates", opt)
	if err != nil {
		return rep, err
	}
	now, grace := m.clock(opt.Now), Grace(opt.Grace)
	progress := orNoProgress(opt.Progress)
	var ready bool
	var end int64
	if err := m.p.DB.View(ctx, func(tx *index.Tx) error {
		var err error
		if ready, err = tc.RefsReady(ctx, tx); err != nil || after == nil {
			return err
		}
		end, err = tc.CandidatesEnd(ctx, tx)
		return err
	}); err != nil {
		return rep, fmt.Errorf("gc: tree refs: %w", err)
	}
	for !ready {
		if err := m.p.DB.Update(ctx, func(tx *index.Tx) error {
			var err error
			ready, err = tc.BackfillRefs(ctx, tx, n)
			return err
		}); err != nil {
			return rep, fmt.Errorf("gc: tree refs: %w", err)
		}
	}
	c := collector{m: m, tc: tc, br: br, holders: holders, grace: grace}
	all := func(tx *index.Tx, now int64, limit int) ([]vfs.Candidate, error) {
		return tc.TakeCandidates(ctx, tx, now, limit)
	}
	if after == nil {
		_, err := c.steps(ctx, n, -1, progress, now, all)
		return c.rep, err
	}
	span := vfs.QueueSpan{After: *after, Upto: end}
	if _, err := c.steps(ctx, n, -1, progress, now, func(tx *index.Tx, now int64, limit int) ([]vfs.Candidate, error) {
		return tc.TakeCandidatesIn(ctx, tx, span, now, limit)
	}); err != nil {
		return c.rep, err
	}
	own := c.rep.Checked
	left, err := c.steps(ctx, n, backlog, progress, now, all)
	c.rep.Backlog, c.rep.BacklogLeft = c.rep.Checked-own, left
	return c.rep, err
}

// takeFunc removes and returns, in tx, up to limit candidates due at now.
type takeFunc func(tx *index.Tx, now int64, limit int) ([]vfs.Candidate, error)

// steps runs steps of at most n candidates that take returns, each one
// write transaction, until one finds no more due or, for a budget not
// negative, budget candidates have been checked; it reports whether it
// stopped at the budget with candidates still due in the queue.
func (c *collector) steps(ctx context.Context, n, budget int, progress func(string, int, int), now func() time.Time, take takeFunc) (bool, error) {
	start := c.rep.Checked
	for {
		limit := n
		if budget >= 0 {
			if limit = min(n, budget-(c.rep.Checked-start)); limit <= 0 {
				return c.due(ctx, now().UnixNano())
			}
		}
		more := false
		done := c.rep
		err := c.m.p.DB.Update(ctx, func(tx *index.Tx) error {
			c.rep = done
			var err error
			more, err = c.step(ctx, tx, now().UnixNano(), limit, take)
			return err
		})
		if err != nil {
			// The step rolled back, whether it failed or its commit
			// did: the report is of the steps before it.
			c.rep = done
			return false, fmt.Errorf("gc: collect candidates: %w", err)
		}
		if c.rep.Checked > 0 || more {
			c.rep.Steps++
			progress("step", c.rep.Steps, 0)
		}
		if !more {
			return false, nil
		}
	}
}

// due reports whether candidates due at now remain queued.
func (c *collector) due(ctx context.Context, now int64) (bool, error) {
	var due bool
	err := c.m.p.DB.View(ctx, func(tx *index.Tx) error {
		var err error
		due, err = c.tc.CandidatesDue(ctx, tx, now)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("gc: collect candidates: %w", err)
	}
	return due, nil
}

type collector struct {
	m       *Maintainer
	tc      TreeCandidates
	br      BlobReferrers
	holders []TreeHolder
	grace   time.Duration
	rep     CandidateReport
	added   bool // the step recorded new candidates
}

// step checks up to n due candidates take returns in tx and reports
// whether more may be due: the step was full, or it recorded new
// candidates.
func (c *collector) step(ctx context.Context, tx *index.Tx, now int64, n int, take takeFunc) (bool, error) {
	cs, err := take(tx, now, n)
	if err != nil || len(cs) == 0 {
		return false, err
	}
	c.added = false
	recs, err := c.m.p.Blobs.OpenRecords(ctx, tx)
	if err != nil {
		return false, err
	}
	defer recs.Close()
	cutoff := c.m.cutoff(now, c.grace)
	for _, cand := range cs {
		c.rep.Checked++
		if cand.Kind == vfs.CandidateTree && cand.Hash == vfs.EmptyTree {
			continue // always there, row or not
		}
		held, err := c.held(ctx, tx, cand)
		if err != nil {
			return false, err
		}
		if held {
			continue
		}
		// Delete checks the age itself; only a row it kept needs its
		// created time, to wait out the grace.
		deleted, err := c.delete(ctx, tx, recs, cand, cutoff, now)
		if err != nil || deleted {
			if err != nil {
				return false, err
			}
			continue
		}
		created, stored, err := c.created(ctx, tx, recs, cand)
		if err != nil {
			return false, err
		}
		if stored && created >= cutoff {
			c.rep.Deferred++
			c.rep.Kept.add(objOf(cand.Kind))
			// Due once the grace has passed; one kept for a write still
			// streaming waits for a later collection, not this one's
			// next step.
			due := created + int64(c.grace)
			if due <= now {
				due = now + int64(time.Second)
			}
			if err := c.tc.AddCandidates(ctx, tx, []vfs.Candidate{cand}, due); err != nil {
				return false, err
			}
		}
	}
	return len(cs) == n || c.added, nil
}

func objOf(k vfs.CandidateKind) objKind {
	switch k {
	case vfs.CandidateTree:
		return objTree
	case vfs.CandidateBlob:
		return objBlob
	}
	return objChunk
}

// created returns the candidate's created time and whether it is stored.
func (c *collector) created(ctx context.Context, tx *index.Tx, recs *cas.Records, cand vfs.Candidate) (int64, bool, error) {
	switch cand.Kind {
	case vfs.CandidateTree:
		if cand.Hash == vfs.EmptyTree {
			return 0, false, nil // always there, row or not
		}
		return c.tc.TreeCreated(ctx, tx, cand.Hash)
	case vfs.CandidateBlob:
		r, ok, err := recs.Blob(cand.Hash)
		return r.Created, ok, err
	case vfs.CandidateChunk:
		r, ok, err := recs.Chunk(cand.Hash)
		return r.Created, ok, err
	}
	return 0, false, nil
}

// held reports whether anything stored references the candidate.
func (c *collector) held(ctx context.Context, tx *index.Tx, cand vfs.Candidate) (bool, error) {
	switch cand.Kind {
	case vfs.CandidateTree:
		for _, h := range c.holders {
			if ok, err := h.HoldsTree(ctx, tx, cand.Hash); err != nil || ok {
				return ok, err
			}
		}
		return c.tc.TreeNamed(ctx, tx, cand.Hash)
	case vfs.CandidateBlob:
		if ok, err := c.tc.TreeNamed(ctx, tx, cand.Hash); err != nil || ok {
			return ok, err
		}
		return c.br.Referenced(ctx, tx, cas.KindBlob, cand.Hash)
	case vfs.CandidateChunk:
		return c.br.Referenced(ctx, tx, cas.KindChunk, cand.Hash)
	}
	return true, nil
}

// delete deletes the unreferenced candidate if it is stored and older
// than cutoff, records what it named as the next candidates, due now, and
// reports whether it went.
func (c *collector) delete(ctx context.Context, tx *index.Tx, recs *cas.Records, cand vfs.Candidate, cutoff, now int64) (bool, error) {
	var next []vfs.Candidate
	var freed int64
	var deleted bool
	var err error
	switch cand.Kind {
	case vfs.CandidateTree:
		freed, next, deleted, err = c.tc.DeleteTree(ctx, tx, cand.Hash, cutoff)
	case vfs.CandidateBlob:
		r, ok, err := recs.Blob(cand.Hash)
		if err != nil || !ok || r.Created >= cutoff {
			return false, err
		}
		if freed, deleted, err = c.br.DeleteObject(ctx, tx, cas.KindBlob, cand.Hash, cutoff); err != nil {
			return false, err
		}
		if !r.Base.IsZero() {
			next = append(next, vfs.Candidate{Kind: vfs.CandidateBlob, Hash: r.Base})
		}
		for _, ch := range r.Chunks {
			next = append(next, vfs.Candidate{Kind: vfs.CandidateChunk, Hash: ch})
		}
	case vfs.CandidateChunk:
		freed, deleted, err = c.br.DeleteObject(ctx, tx, cas.KindChunk, cand.Hash, cutoff)
	}
	if err != nil || !deleted {
		return false, err
	}
	c.rep.Freed.add(objOf(cand.Kind))
	c.rep.FreedBytes += freed
	c.added = c.added || len(next) > 0
	// What it named belongs to the same operation's stretch of the queue.
	for i := range next {
		next[i].Seq = cand.Seq
	}
	return true, c.tc.AddCandidates(ctx, tx, next, now)
}

// DropCandidatesDue forgets every candidate due at or before due and at a
// place up to upto, after a full collection that marked the store later
// than that, and began after the queue ended at upto (CandidatesEnd), has
// judged them. A candidate a change recorded while the mark read the store
// from before it stays queued.
func (m *Maintainer) DropCandidatesDue(ctx context.Context, due time.Time, upto int64) error {
	tc, ok := m.p.Trees.(TreeCandidates)
	if !ok {
		return nil
	}
	return m.p.DB.Update(ctx, func(tx *index.Tx) error {
		return tc.DropCandidatesDue(ctx, tx, due.UnixNano(), upto)
	})
}
