package wsstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/maint"
	"github.com/wsstore/wsstore/wserr"
)

// ProfileMobile is the Options.Profile of a store on a phone: the
// retention policy runs.MobilePolicy applies under the store's own, and a
// run that finishes, fails or is cancelled prunes its chat and reclaims the
// space right after.
const ProfileMobile = "mobile"

// DefaultVacuumPages is how many free pages one step of Reclaim gives back
// to the file system.
const DefaultVacuumPages = 256

// ReclaimReport says what Reclaim freed.
type ReclaimReport struct {
	GC maint.GCReport `json:"gc"`
	// FileBytesBefore and FileBytesAfter are the database file plus its
	// write-ahead log around the reclaim.
	FileBytesBefore int64 `json:"fileBytesBefore"`
	FileBytesAfter  int64 `json:"fileBytesAfter"`
	// Marked is true when the collection had to mark the whole store
	// (maint.ErrNeedsMark: a blob tier that cannot look references up);
	// false when it checked only the candidates operations left
	// (maint.Maintainer.CollectCandidates), Checked of them.
	Marked  bool `json:"marked"`
	Checked int  `json:"checked"`
	// AutoVacuum is false for a store created before incremental vacuum:
	// its free pages are reused but not given back until a Vacuum, which
	// switches it on.
	AutoVacuum bool `json:"autoVacuum"`
}

// DefaultReclaimIdle is how long a store must begin no write transaction
// before it takes a step of its queue of gc candidates in the background
// (Options.ReclaimIdle).
const DefaultReclaimIdle = time.Second

// drainRetry is how long, on the store's clock, the background collection
// waits after a step failed for another reason than another process's
// write lock before it looks at the queue again.
const drainRetry = time.Minute

// reclaimer is the runs.Reclaimer Open wires in: gc in bounded steps, then
// free pages back to the file system in bounded steps.
type reclaimer struct {
	db    *index.DB
	m     *maint.Maintainer
	grace time.Duration
}

// startDrain collects the queue of gc candidates in the background while
// the store is idle, so a backlog the reclaims after deletions leave (each
// takes at most maint.DefaultBacklog of it) does not wait for Reclaim or
// GC: once no write transaction began for idle, it takes one step
// (maint.Maintainer.CollectStep: at most maint.DefaultStepObjects
// candidates, one write transaction), and the next at once only if no
// write began meanwhile. It looks at the queue at the start, after writes
// of this process (which may have queued candidates) and when the earliest
// candidate it saw falls due, so an idle store with nothing due runs no
// statement. A step makes one attempt at the write lock: another
// process's write ends the round. A store whose parts cannot check single
// candidates (a remote blob tier) is left to Reclaim and GC. stop ends the
// collection, a step under way rolled back, and waits for it.
func (r *reclaimer) startDrain(idle time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(idle)
		defer t.Stop()
		opt := maint.StepOptions{GCOptions: maint.GCOptions{Grace: r.grace}}
		seen := r.db.Writes()
		look := true       // a write may have queued candidates since the last look
		var due int64 = -1 // when the earliest candidate seen queued is due; -1: none
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if w := r.db.Writes(); w != seen {
				seen, look = w, true // not idle: wait a whole quiet period
				continue
			}
			if !look && (due < 0 || r.m.Now().UnixNano() < due) {
				continue
			}
			for {
				rep, next, queued, err := r.m.CollectStep(index.WithoutWaiting(ctx), opt)
				if err != nil {
					switch {
					case errors.Is(err, maint.ErrNeedsMark) || ctx.Err() != nil:
						return
					case wserr.Is(err, wserr.Busy):
						look = true // another process writes: its next quiet period
					default:
						look, due = false, r.m.Now().Add(drainRetry).UnixNano()
					}
					seen = r.db.Writes()
					break
				}
				look, due = false, -1
				if queued {
					due = next
				}
				seen += uint64(rep.Steps) // the step's own write transaction
				if rep.Steps == 0 || !queued || next > r.m.Now().UnixNano() || r.db.Writes() != seen {
					break
				}
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// CandidatesEnd is runs.Reclaimer's: where the queue of candidates ends
// now (maint.Maintainer.CandidatesEnd).
func (r *reclaimer) CandidatesEnd(ctx context.Context) (int64, error) {
	return r.m.CandidatesEnd(ctx)
}

// Reclaim is runs.Reclaimer's: the candidates recorded after place after,
// and at most maint.DefaultBacklog others.
func (r *reclaimer) Reclaim(ctx context.Context, after int64) (int64, error) {
	rep, err := reclaim(ctx, r.db, r.m, r.grace, true, false, &after)
	return rep.GC.FreedBytes, err
}

// ReclaimCandidates is runs.CandidateReclaimer: Reclaim unless the store
// would need a full mark; after < 0 takes the whole queue.
func (r *reclaimer) ReclaimCandidates(ctx context.Context, after int64) (int64, bool, error) {
	var from *int64
	if after >= 0 {
		from = &after
	}
	rep, err := reclaim(ctx, r.db, r.m, r.grace, false, false, from)
	if errors.Is(err, maint.ErrNeedsMark) {
		return 0, false, nil
	}
	return rep.GC.FreedBytes, true, err
}

// reclaim collects (marking the store only if mark and the parts need it)
// and gives free pages back: always if vacuum, else only when the
// collection freed something. It takes every candidate queued when after
// is nil, else those after place *after and at most maint.DefaultBacklog
// others. A failure returns, with the error, the report of the steps
// that committed before it, FileBytesAfter the file's size then (0 if it
// cannot be read).
func reclaim(ctx context.Context, db *index.DB, m *maint.Maintainer, grace time.Duration, mark, vacuum bool, after *int64) (rep ReclaimReport, err error) {
	if rep.FileBytesBefore, err = db.FileBytes(); err != nil {
		return rep, fmt.Errorf("reclaim: %w", err)
	}
	defer func() {
		if err != nil {
			rep.FileBytesAfter, _ = db.FileBytes()
		}
	}()
	opt := maint.StepOptions{GCOptions: maint.GCOptions{Grace: grace}}
	var cr maint.CandidateReport
	if after == nil {
		cr, err = m.CollectCandidates(ctx, opt)
	} else {
		cr, err = m.CollectAfter(ctx, opt, *after, maint.DefaultBacklog)
	}
	rep.GC, rep.Checked = cr.GCReport, cr.Checked
	switch {
	case errors.Is(err, maint.ErrNeedsMark) && mark:
		// Every candidate due before the mark, and queued before it
		// began, is judged by it.
		start := m.Now()
		upto, err := m.CandidatesEnd(ctx)
		if err != nil {
			return rep, fmt.Errorf("reclaim: %w", err)
		}
		rep.Marked = true
		if rep.GC, err = m.CollectSteps(ctx, opt); err != nil {
			return rep, fmt.Errorf("reclaim: %w", err)
		}
		if err := m.DropCandidatesDue(ctx, start, upto); err != nil {
			return rep, fmt.Errorf("reclaim: %w", err)
		}
	case err != nil:
		return rep, fmt.Errorf("reclaim: %w", err)
	}
	if rep.AutoVacuum, err = db.AutoVacuum(ctx); err != nil {
		return rep, fmt.Errorf("reclaim: %w", err)
	}
	// After a deletion, a collection that freed nothing left no pages to
	// give back; those others freed wait for the next that frees some.
	if rep.AutoVacuum && (vacuum || rep.Marked || rep.GC.FreedBytes > 0) {
		// Each step is one short write; a store with many free pages
		// gives them back a step at a time, writers between steps.
		if err := db.IncrementalVacuumAll(ctx, DefaultVacuumPages); err != nil {
			return rep, fmt.Errorf("reclaim: %w", err)
		}
		// A reader holding an old snapshot may keep the log from being
		// folded now; the next reclaim or Close folds it.
		_ = db.Checkpoint(ctx)
	}
	if rep.FileBytesAfter, err = db.FileBytes(); err != nil {
		return rep, fmt.Errorf("reclaim: %w", err)
	}
	return rep, nil
}

// Reclaim collects the garbage deletions left, in bounded steps: it checks
// only the objects deleted rows referenced, and what those named in turn
// (maint.Maintainer.CollectCandidates with Options.ReclaimGrace), so it
// costs what the deletions left, not the store; over a blob tier that
// cannot look references up it marks the store instead
// (maint.Maintainer.CollectSteps). Garbage no deletion recorded (a live
// tree replaced without a checkpoint, an older file version that only a
// patch base still names) waits for GC. It gives the
// free pages back to the file system a step at a time (incremental
// vacuum), without the stop-the-world pass of GC plus Vacuum. It takes
// the whole queue of candidates, a step at a time: deleting a run or chat,
// pruning and a run's end reclaim on their own, but each takes only the
// candidates it recorded and at most maint.DefaultBacklog of those others
// left (rollbacks, record operations, checkpoints a run's caps prune,
// actor space gc and, without automatic pruning, a run's end record
// candidates and collect none), so the rest waits for this, GC, the next
// of them, or the store's background collection once it is idle
// (Options.ReclaimIdle). A host calls it after deleting by other means, or as
// maintenance. It fails as GC does, and with store.read_only on a store
// opened read-only; the steps before a failure stay done, and the report
// of them is returned with the error.
func (s *Store) Reclaim(ctx context.Context) (ReclaimReport, error) {
	return reclaim(ctx, s.DB, s.maint, s.reclaimGrace, true, true, nil)
}
