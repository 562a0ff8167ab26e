package wsstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/runs"
)

// DBName is the name of the database file inside a store directory.
const DBName = "wsstore.db"

// Options configure Open. The zero value means every package's defaults.
type Options struct {
	Index index.Options
	CAS   cas.Options
	Runs  runs.Options
	// Now is the clock shared by every package; default time.Now. It
	// overrides CAS.Now and Runs.Now when set.
	Now func() time.Time
}

// Store is an open store directory.
type Store struct {
	Dir   string
	DB    *index.DB
	Blobs *cas.Store
	Runs  *runs.Service

	now func() time.Time
}

// Open opens the store in dir, creating the directory and the database if
// needed and applying pending migrations. It fails with store.newer_format
// for a store written by a newer build.
func Open(ctx context.Context, dir string, opts Options) (*Store, error) {
	if dir == "" {
		return nil, errors.New("open store: empty directory")
	}
	if !opts.Index.ReadOnly {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("open store: %w", err)
		}
	}
	// One clock for every package, so gc's grace is measured on the clock
	// that stamped the rows.
	if opts.Now == nil && opts.Runs.Now != nil {
		opts.Now = opts.Runs.Now
	}
	if opts.Now == nil && opts.CAS.Now != nil {
		opts.Now = opts.CAS.Now
	}
	if opts.Now != nil {
		opts.CAS.Now, opts.Runs.Now = opts.Now, opts.Now
	}
	db, err := index.Open(ctx, filepath.Join(dir, DBName), opts.Index)
	if err != nil {
		return nil, err
	}
	blobs, err := cas.New(db, opts.CAS)
	if err != nil {
		db.Close()
		return nil, err
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	return &Store{Dir: dir, DB: db, Blobs: blobs, Runs: runs.New(db, blobs, opts.Runs), now: now}, nil
}

// Close closes the database.
func (s *Store) Close() error { return s.DB.Close() }
