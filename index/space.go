package index

import (
	"context"
	"fmt"

	"github.com/wsstore/wsstore/wserr"
)

// UsedBytes returns the bytes of the database's pages that hold data:
// page_count less the free pages, times the page size, as tx sees them.
// Unlike FileBytes it drops as soon as a deletion commits, before any page
// is given back to the file system, so a cap measured on it never refuses
// a change that shrinks the store.
func (tx *Tx) UsedBytes(ctx context.Context) (int64, error) {
	var pages, free, size int64
	for _, q := range []struct {
		sql string
		dst *int64
	}{{`PRAGMA page_count`, &pages}, {`PRAGMA freelist_count`, &free}, {`PRAGMA page_size`, &size}} {
		if err := tx.GetContext(ctx, q.dst, q.sql); err != nil {
			return 0, fmt.Errorf("used bytes: %w", Translate(err))
		}
	}
	return (pages - free) * size, nil
}

// UsedBytes is Tx.UsedBytes on a read snapshot of the latest commit.
func (db *DB) UsedBytes(ctx context.Context) (int64, error) {
	var n int64
	err := db.View(ctx, func(tx *Tx) error {
		var err error
		n, err = tx.UsedBytes(ctx)
		return err
	})
	return n, err
}

// FreePages returns how many of the database's pages are free, as the
// latest commit left them.
func (db *DB) FreePages(ctx context.Context) (int64, error) {
	var free int64
	err := db.View(ctx, func(tx *Tx) error {
		return tx.GetContext(ctx, &free, `PRAGMA freelist_count`)
	})
	if err != nil {
		return 0, fmt.Errorf("free pages: %w", Translate(err))
	}
	return free, nil
}

// AutoVacuum reports whether the database gives free pages back with
// IncrementalVacuum (auto_vacuum = INCREMENTAL). A store created before
// the setting existed has it off until its next VACUUM.
func (db *DB) AutoVacuum(ctx context.Context) (bool, error) {
	var mode int
	err := db.View(ctx, func(tx *Tx) error {
		return tx.GetContext(ctx, &mode, `PRAGMA auto_vacuum`)
	})
	if err != nil {
		return false, fmt.Errorf("auto vacuum: %w", Translate(err))
	}
	return mode == 2, nil
}

// IncrementalVacuum gives up to pages free pages back to the file system
// in one short write (PRAGMA incremental_vacuum(pages)) and returns how
// many free pages are left. On a database without auto_vacuum =
// INCREMENTAL it does nothing. The file shrinks when the write-ahead log
// is next folded in (Checkpoint). It fails with store.read_only on a
// read-only DB and store.busy as Update does.
func (db *DB) IncrementalVacuum(ctx context.Context, pages int) (int64, error) {
	var left int64
	err := db.Update(ctx, func(tx *Tx) error {
		rows, err := tx.QueryContext(ctx, fmt.Sprintf(`PRAGMA incremental_vacuum(%d)`, max(pages, 1)))
		if err != nil {
			return Translate(err)
		}
		for rows.Next() {
		}
		// A step that fails (a full disk) ends the rows with its error.
		err = rows.Err()
		if cerr := rows.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return Translate(err)
		}
		return tx.GetContext(ctx, &left, `PRAGMA freelist_count`)
	})
	if err != nil {
		return 0, fmt.Errorf("incremental vacuum: %w", err)
	}
	return left, nil
}

// IncrementalVacuumAll gives every free page back, pages at a time, each
// step a short write of its own so writers get the lock between steps.
// It stops when none is left or a step frees nothing: a database without
// auto_vacuum = INCREMENTAL keeps its free pages, and writers may free
// pages as fast as it goes. Errors are IncrementalVacuum's.
func (db *DB) IncrementalVacuumAll(ctx context.Context, pages int) error {
	steps := db.VacuumSteps(pages)
	for free := int64(-1); ; {
		left, err := steps.Step(ctx)
		if err != nil || left == 0 || free >= 0 && left >= free {
			return err
		}
		free = left
	}
}

// minVacuumPages is the smallest step VacuumSteps shrinks to.
const minVacuumPages = 4

// VacuumSteps gives free pages back a step at a time (Step), pages a
// step, fitting its steps to a nearly full disk.
type VacuumSteps struct {
	db    *DB
	pages int
	tight bool // a step did not fit: steps are smaller, the log folded after each
}

// VacuumSteps returns steps of pages pages over db.
func (db *DB) VacuumSteps(pages int) *VacuumSteps {
	return &VacuumSteps{db: db, pages: max(pages, 1)}
}

// Step is IncrementalVacuum. A step's pages pass through the write-ahead
// log before the file shrinks, so on a nearly full disk a step may not
// fit (store.disk_full) though giving pages back is what would make room:
// Step then folds the log in, so the file shrinks by what earlier steps
// gave back, and tries a step a quarter the size, down to a few pages;
// from then on it folds the log after each step. It returns the free pages
// left, and the disk_full error when not even the smallest step fits.
func (v *VacuumSteps) Step(ctx context.Context) (int64, error) {
	for {
		left, err := v.db.IncrementalVacuum(ctx, v.pages)
		if wserr.CodeOf(err) == wserr.DiskFull && v.pages > minVacuumPages {
			if cerr := v.db.Checkpoint(ctx); cerr != nil {
				return 0, err
			}
			v.pages, v.tight = max(v.pages/4, minVacuumPages), true
			continue
		}
		if err == nil && v.tight {
			err = v.db.Checkpoint(ctx)
		}
		return left, err
	}
}

// Checkpoint folds the write-ahead log into the database file and
// truncates the log (PRAGMA wal_checkpoint(TRUNCATE)), so pages given back
// by IncrementalVacuum leave the file. Readers holding old snapshots may
// keep part of the log; it is then folded on a later call.
func (db *DB) Checkpoint(ctx context.Context) error {
	return db.Exec(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`)
}
