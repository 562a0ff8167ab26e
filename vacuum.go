package wsstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/wserr"
)

// VacuumOptions configure Vacuum. The zero value gives free pages back in
// steps of DefaultVacuumPages, rebuilding the file only where the store
// cannot give pages back in steps.
type VacuumOptions struct {
	// Full rebuilds the database file without free pages (SQLite VACUUM)
	// even on a store that can give them back in steps. A rebuild also
	// packs half-empty pages together, which steps do not, but it is one
	// statement that holds the write lock throughout and writes a copy of
	// the whole database through the write-ahead log (so the store needs
	// about its own size again in free disk space while it runs).
	Full bool
	// Pages is how many free pages one step gives back; 0 means
	// DefaultVacuumPages, negative is workspace.invalid_argument.
	Pages int
	// Progress, if not nil, is called after each step of an incremental
	// vacuum has committed, with the steps done and the free pages left,
	// outside any transaction: it may write to the store.
	Progress func(steps int, freePages int64)
}

// Vacuum modes, as VacuumReport.Mode names them.
const (
	VacuumIncremental = "incremental"
	VacuumFull        = "full"
)

// VacuumReport gives the size of the database file plus its write-ahead
// log before and after Vacuum, and how the space was given back.
type VacuumReport struct {
	BeforeBytes int64 `json:"beforeBytes"`
	AfterBytes  int64 `json:"afterBytes"`
	// Mode is VacuumIncremental (free pages given back in steps) or
	// VacuumFull (the file rebuilt).
	Mode string `json:"mode"`
	// Steps counts the write transactions an incremental vacuum took; 0
	// for a rebuild.
	Steps int `json:"steps"`
	// FreePagesBefore and FreePagesAfter count the database's free pages
	// around the vacuum.
	FreePagesBefore int64 `json:"freePagesBefore"`
	FreePagesAfter  int64 `json:"freePagesAfter"`
	// LogBytes is the part of AfterBytes the write-ahead log holds: 0
	// once the log is folded into the file. A read still open on an
	// older snapshot (another process's fsck or export, say) keeps the
	// log from being folded, so the pages given back stay in it, and the
	// file does not shrink, until that read ends and the log is folded:
	// at the next vacuum, or as the store closes.
	LogBytes int64 `json:"logBytes"`
}

// Vacuum gives the space of deleted rows back to the file system with the
// default options: GC frees pages inside the database file, which SQLite
// reuses but never returns on its own. See VacuumWith.
func (s *Store) Vacuum(ctx context.Context) (VacuumReport, error) {
	return s.VacuumWith(ctx, VacuumOptions{})
}

// VacuumWith gives free pages back to the file system. On a store made
// with auto_vacuum = INCREMENTAL (every store this build creates) it does
// so in steps, each one short write transaction giving back at most
// opt.Pages pages (PRAGMA incremental_vacuum), and pauses between steps
// for about as long as the step took, so writers of this and other
// processes wait for a step at a time, never for the whole vacuum. Then
// it folds the write-ahead log into the database, which shrinks the file.
//
// With opt.Full, or on a store created before incremental vacuum existed,
// it rebuilds the file instead: it folds the log, rebuilds the database
// without free pages (VACUUM) and folds the log again, since in WAL mode
// VACUUM writes the rebuilt pages through the log. The rebuild switches an
// older store to auto_vacuum = INCREMENTAL (SQLite can only change that
// setting by rebuilding the file), so its later vacuums go in steps. It
// holds the write connection throughout, so writers wait; readers go on.
//
// It fails with store.read_only on a store opened read-only and with
// store.busy if another process holds the write lock for longer than the
// busy timeout.
func (s *Store) VacuumWith(ctx context.Context, opt VacuumOptions) (VacuumReport, error) {
	rep := VacuumReport{Mode: VacuumIncremental}
	if opt.Pages < 0 {
		return rep, wserr.New(wserr.InvalidArgument, "vacuum", "", "pages %d is negative (0: %d)", opt.Pages, DefaultVacuumPages)
	}
	var err error
	if rep.BeforeBytes, err = s.DB.FileBytes(); err != nil {
		return rep, fmt.Errorf("vacuum: %w", err)
	}
	if rep.FreePagesBefore, err = s.DB.FreePages(ctx); err != nil {
		return rep, fmt.Errorf("vacuum: %w", err)
	}
	auto, err := s.DB.AutoVacuum(ctx)
	if err != nil {
		return rep, fmt.Errorf("vacuum: %w", err)
	}
	if opt.Full || !auto {
		rep.Mode = VacuumFull
		stmts := []string{`PRAGMA wal_checkpoint(TRUNCATE)`, `VACUUM`, `PRAGMA wal_checkpoint(TRUNCATE)`}
		if !auto {
			// Only the rebuild writes the setting. On a store that has it
			// already the pragma would commit page 1 again on its own,
			// before a VACUUM that may yet fail on a damaged page.
			stmts = slices.Insert(stmts, 1, `PRAGMA auto_vacuum = INCREMENTAL`)
		}
		for _, stmt := range stmts {
			if err := s.DB.Exec(ctx, stmt); err != nil {
				return rep, fmt.Errorf("vacuum: %w", err)
			}
		}
	} else if err := s.vacuumSteps(ctx, opt, &rep); err != nil {
		return rep, fmt.Errorf("vacuum: %w", err)
	}
	if rep.FreePagesAfter, err = s.DB.FreePages(ctx); err != nil {
		return rep, fmt.Errorf("vacuum: %w", err)
	}
	if rep.AfterBytes, err = s.DB.FileBytes(); err != nil {
		return rep, fmt.Errorf("vacuum: %w", err)
	}
	if rep.LogBytes, err = s.DB.LogBytes(); err != nil {
		return rep, fmt.Errorf("vacuum: %w", err)
	}
	return rep, nil
}

// vacuumPauseMax bounds the pause between two steps of an incremental
// vacuum.
const vacuumPauseMax = 20 * time.Millisecond

// vacuumSteps gives free pages back a step at a time, then folds the log.
func (s *Store) vacuumSteps(ctx context.Context, opt VacuumOptions, rep *VacuumReport) error {
	pages := opt.Pages
	if pages <= 0 {
		pages = DefaultVacuumPages
	}
	// Folding the log first also refuses a read-only store when there is
	// nothing to give back.
	if err := s.DB.Checkpoint(ctx); err != nil {
		return err
	}
	steps := s.DB.VacuumSteps(pages)
	for left := rep.FreePagesBefore; left > 0; {
		start := time.Now()
		now, err := steps.Step(ctx)
		if err != nil {
			return err
		}
		rep.Steps++
		if opt.Progress != nil {
			opt.Progress(rep.Steps, now)
		}
		if now == 0 || now >= left {
			break // done, or pages freed by writers as fast as it goes
		}
		left = now
		// Another process waiting for the lock polls for it; a pause as
		// long as the step leaves it as much time with the lock free as
		// the vacuum holds it.
		select {
		case <-ctx.Done():
			return index.Translate(ctx.Err())
		case <-time.After(min(max(time.Since(start), time.Millisecond), vacuumPauseMax)):
		}
	}
	return s.DB.Checkpoint(ctx)
}
