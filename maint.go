package wsstore

import (
	"context"
	"fmt"

	"github.com/wsstore/wsstore/maint"
)

// The maintenance API hosts call; package maint does the work over the
// owners' interfaces.

// DefaultGCGrace is how old an unreachable row must be before GC deletes
// it when GCOptions.Grace is zero (maint.DefaultGCGrace).
const DefaultGCGrace = maint.DefaultGCGrace

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
)

// GC deletes the blobs, chunks and trees no root reaches, never what a
// root or a concurrent writer needs (maint.Maintainer.GC). It fails with
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
	return s.maint.GC(ctx, opt)
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

// DU reports space by chat workspace and run (maint.Maintainer.DU). It
// fails with store.corrupt if a reachable object is missing or a tree
// does not decode.
func (s *Store) DU(ctx context.Context) ([]Usage, error) {
	return s.maint.DU(ctx)
}
