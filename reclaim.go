package wsstore

import (
	"context"
	"fmt"
	"time"

	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/maint"
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
	// AutoVacuum is false for a store created before incremental vacuum:
	// its free pages are reused but not given back until a Vacuum, which
	// switches it on.
	AutoVacuum bool `json:"autoVacuum"`
}

// reclaimer is the runs.Reclaimer Open wires in: gc in bounded steps, then
// free pages back to the file system in bounded steps.
type reclaimer struct {
	db    *index.DB
	m     *maint.Maintainer
	grace time.Duration
}

func (r *reclaimer) Reclaim(ctx context.Context) (int64, error) {
	rep, err := reclaim(ctx, r.db, r.m, r.grace)
	return rep.GC.FreedBytes, err
}

func reclaim(ctx context.Context, db *index.DB, m *maint.Maintainer, grace time.Duration) (ReclaimReport, error) {
	var rep ReclaimReport
	var err error
	if rep.FileBytesBefore, err = db.FileBytes(); err != nil {
		return rep, fmt.Errorf("reclaim: %w", err)
	}
	if rep.GC, err = m.CollectSteps(ctx, maint.StepOptions{GCOptions: maint.GCOptions{Grace: grace}}); err != nil {
		return rep, fmt.Errorf("reclaim: %w", err)
	}
	if rep.AutoVacuum, err = db.AutoVacuum(ctx); err != nil {
		return rep, fmt.Errorf("reclaim: %w", err)
	}
	if rep.AutoVacuum {
		// Each step is one short write; a store with many free pages
		// gives them back a step at a time, writers between steps.
		for {
			left, err := db.IncrementalVacuum(ctx, DefaultVacuumPages)
			if err != nil {
				return rep, fmt.Errorf("reclaim: %w", err)
			}
			if left == 0 {
				break
			}
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

// Reclaim collects the garbage deletions left, in bounded steps
// (maint.Maintainer.CollectSteps with Options.ReclaimGrace), and gives the
// free pages back to the file system a step at a time (incremental
// vacuum), without the stop-the-world pass of GC plus Vacuum. Deleting a
// run or chat and pruning call it on their own; a host calls it after
// deleting by other means. It fails as GC does, and with store.read_only
// on a store opened read-only.
func (s *Store) Reclaim(ctx context.Context) (ReclaimReport, error) {
	return reclaim(ctx, s.DB, s.maint, s.reclaimGrace)
}
