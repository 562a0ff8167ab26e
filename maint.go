package wsstore

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/wsstore/wsstore/maint"
)

// The maintenance API hosts call; package maint does the work over the
// owners' interfaces.

// DefaultGCGrace is how old an unreachable row must be before GC deletes
// it when GCOptions.Grace is zero (maint.DefaultGCGrace).
const DefaultGCGrace = maint.DefaultGCGrace

// DefaultDUPage and MaxDUPage are the default and the largest limit of a
// DUPage (maint.DefaultUsagePage, maint.MaxUsagePage).
const (
	DefaultDUPage = maint.DefaultUsagePage
	MaxDUPage     = maint.MaxUsagePage
)

type (
	// GCOptions configure GC; see maint.GCOptions.
	GCOptions = maint.GCOptions
	// GCReport says what GC found and freed; see maint.GCReport.
	GCReport = maint.GCReport
	// ObjectCounts counts stored objects by kind.
	ObjectCounts = maint.ObjectCounts
	// FsckReport counts what Fsck checked and lists every problem.
	FsckReport = maint.FsckReport
	// Problem is one thing Fsck found wrong.
	Problem = maint.Problem
	// Stats describes a store's size.
	Stats = maint.Stats
	// Usage is the space one run, or one chat's persist layer, takes.
	Usage = maint.Usage
	// UsageKey names a row of DU; see maint.UsageKey.
	UsageKey = maint.UsageKey
	// StepOptions configure a collection in steps; see maint.StepOptions.
	StepOptions = maint.StepOptions
	// CandidateReport says what CollectCandidates did; see
	// maint.CandidateReport.
	CandidateReport = maint.CandidateReport
)

// CollectCandidates collects, in steps, only what deletions recorded as
// candidates (maint.Maintainer.CollectCandidates): what Reclaim does
// before it gives pages back. opt.Progress is called with "step" after
// each step has committed, outside any transaction. It fails with
// maint.ErrNeedsMark over a blob tier that cannot look references up.
func (s *Store) CollectCandidates(ctx context.Context, opt StepOptions) (CandidateReport, error) {
	return s.maint.CollectCandidates(ctx, opt)
}

// GC deletes the blobs, chunks and trees no root reaches, never what a
// root or a concurrent writer needs (maint.Maintainer.GC), and forgets the
// candidates deletions recorded a grace before it began, which its mark
// judged. It fails with
// store.corrupt, deleting nothing, if a reachable object is missing or
// does not decode.
func (s *Store) GC(ctx context.Context, opt GCOptions) (GCReport, error) {
	if !opt.DryRun && s.stopReencoder != nil {
		// Queued re-encodings first: what they free is the space a
		// collection is run for, and the gc after them sees the final
		// chains.
		if _, err := s.Blobs.Reencode(ctx, 0); err != nil {
			return GCReport{}, fmt.Errorf("gc: %w", err)
		}
	}
	return s.forgettingJudged(ctx, opt, func() (GCReport, error) { return s.maint.GC(ctx, opt) })
}

// forgettingJudged runs collect, a collection of the whole store with
// opt's clock, grace and DryRun, and then forgets the candidates its mark
// judged: those recorded a grace before it began and committed before it
// did (at a place up to the queue's end read first), what they name old
// enough to go. Without a grace that is every candidate committed before
// it began, one an earlier collection deferred for its own grace (due
// once that has passed, not when it was recorded) included.
func (s *Store) forgettingJudged(ctx context.Context, opt GCOptions, collect func() (GCReport, error)) (GCReport, error) {
	now := s.maint.Now
	if opt.Now != nil {
		now = opt.Now
	}
	start := now().Add(-maint.Grace(opt.Grace))
	if maint.Grace(opt.Grace) == 0 {
		start = time.Unix(0, math.MaxInt64)
	}
	upto, err := s.maint.CandidatesEnd(ctx)
	if err != nil {
		return GCReport{}, fmt.Errorf("gc: %w", err)
	}
	rep, err := collect()
	if err != nil || opt.DryRun {
		return rep, err
	}
	return rep, s.maint.DropCandidatesDue(ctx, start, upto)
}

// GCStepOptions configure CollectSteps; see maint.StepOptions.
type GCStepOptions = maint.StepOptions

// CollectSteps is GC in bounded steps (maint.Maintainer.CollectSteps):
// mark reads one snapshot without blocking writers, then each step is one
// short write transaction deleting at most opt.Objects rows, so writers
// wait for a step, never for the whole sweep. Once the last step is done
// it forgets the candidates its mark judged, as GC does. It fails as GC
// does; the steps before a failed one stay done, and the report of them is
// returned with the error.
func (s *Store) CollectSteps(ctx context.Context, opt GCStepOptions) (GCReport, error) {
	return s.forgettingJudged(ctx, opt.GCOptions, func() (GCReport, error) { return s.maint.CollectSteps(ctx, opt) })
}

// Fsck checks the whole store and reports every problem, never stopping at
// the first (maint.Maintainer.Fsck). The error is only for a check that
// cannot run.
func (s *Store) Fsck(ctx context.Context, progress func(phase string, done, total int)) (FsckReport, error) {
	return s.maint.Fsck(ctx, progress)
}

// Stats counts the store's rows and bytes (maint.Maintainer.Stats). It
// fails with store.corrupt if a root tree is missing or does not decode.
func (s *Store) Stats(ctx context.Context) (Stats, error) {
	return s.maint.Stats(ctx)
}

// DU reports space by chat workspace and run, handing fn each row as it
// is counted (maint.Maintainer.DU), so it holds no list of them. It fails
// with store.corrupt if a reachable object is missing or a tree does not
// decode, and with fn's error, which ends it.
func (s *Store) DU(ctx context.Context, fn func(Usage) error) error {
	return s.maint.DU(ctx, fn)
}

// DUPage is DU a page at a time (maint.Maintainer.DUPage): the first
// limit rows (0: maint.DefaultUsagePage, at most maint.MaxUsagePage)
// after the row after names (the zero UsageKey: from the first), and
// whether rows follow them. Each page walks the store as DU does. It
// fails as DU does, and with workspace.invalid_argument for a limit out
// of range.
func (s *Store) DUPage(ctx context.Context, after UsageKey, limit int) ([]Usage, bool, error) {
	return s.maint.DUPage(ctx, after, limit)
}
