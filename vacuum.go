package wsstore

import (
	"context"
	"fmt"
)

// VacuumReport gives the size of the database file plus its write-ahead
// log before and after Vacuum.
type VacuumReport struct {
	BeforeBytes int64 `json:"beforeBytes"`
	AfterBytes  int64 `json:"afterBytes"`
}

// Vacuum gives the space of deleted rows back to the file system: GC frees
// pages inside the database file, which SQLite reuses but never returns on
// its own. Vacuum folds the write-ahead log into the database, rebuilds
// the database file without free pages (VACUUM) and folds the log again,
// since in WAL mode VACUUM writes the rebuilt pages through the log. A
// store created before incremental vacuum existed is switched to
// auto_vacuum = INCREMENTAL by it (SQLite can only change that setting by
// rebuilding the file), so from then on Reclaim gives space back without
// another Vacuum. It
// holds the write connection throughout, so writers wait; readers go on.
// It fails with store.read_only on a store opened read-only and with
// store.busy if another process holds the write lock for longer than the
// busy timeout.
func (s *Store) Vacuum(ctx context.Context) (VacuumReport, error) {
	var rep VacuumReport
	var err error
	if rep.BeforeBytes, err = s.DB.FileBytes(); err != nil {
		return rep, fmt.Errorf("vacuum: %w", err)
	}
	for _, stmt := range []string{`PRAGMA wal_checkpoint(TRUNCATE)`, `PRAGMA auto_vacuum = INCREMENTAL`, `VACUUM`, `PRAGMA wal_checkpoint(TRUNCATE)`} {
		if err := s.DB.Exec(ctx, stmt); err != nil {
			return rep, fmt.Errorf("vacuum: %w", err)
		}
	}
	if rep.AfterBytes, err = s.DB.FileBytes(); err != nil {
		return rep, fmt.Errorf("vacuum: %w", err)
	}
	return rep, nil
}
