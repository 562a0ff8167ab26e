package wsstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/wsstore/wsstore/actors"
	"github.com/wsstore/wsstore/archive"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/checkpoint"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/mkdirs"
	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/maint"
	"github.com/wsstore/wsstore/remote"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/tokens"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// DBName is the name of the database file inside a store directory.
const DBName = "wsstore.db"

// Options configure Open. The zero value means every package's defaults.
type Options struct {
	Index index.Options
	// CAS configures the content store. Its Now is ignored: Open sets it
	// to the store's clock.
	CAS cas.Options
	// Runs configures the run service. Its Now is ignored: Open sets it
	// to the store's clock. A nil Virtual means Open mounts none, and
	// Store.Virtual is the empty set the service sees.
	Runs runs.Options
	// Now is the store's one clock, default time.Now. Every part reads
	// it: blob and tree rows, runs, chats, checkpoints and journal events
	// are stamped with it, and gc measures its grace on it, so rows are
	// never judged by a clock other than the one that wrote them.
	// While it reads a time a store cannot hold (before 1677-09-21 or
	// after 2262-04-11: times are kept as int64 nanoseconds), every write
	// fails with store.invalid_options and changes nothing.
	Now func() time.Time
	// Profile is "" (a desktop or server store) or ProfileMobile.
	Profile string
	// Blobs, when set, is the s3:// URL of a remote blob tier (see
	// remote.ParseURL): blobs and chunks are then kept on that object
	// store, in packs, with their index and a cache in this database, in
	// place of CAS.Storage. The store records the URL (a meta row), so
	// later opens may leave Blobs empty; a URL of another bucket or
	// prefix than the recorded one is refused (store.invalid_options):
	// objects of one tier are not seen through another. So is a URL for
	// a store that holds file contents in its own tables: a tier is
	// chosen with the store (export and import to move one onto a tier).
	Blobs string
	// Remote configures the remote tier Blobs names. Its Now is ignored:
	// Open sets it to the store's clock.
	Remote remote.Options
	// ReclaimGrace is the grace of the collection that follows deletions
	// (see GCOptions.Grace), and of the background one ReclaimIdle
	// starts: zero means DefaultGCGrace, negative none, for a store
	// nothing else writes to while it runs.
	ReclaimGrace time.Duration
	// ReclaimIdle is how long the store must begin no write transaction
	// before it collects a step of its queue of gc candidates in the
	// background (what rollbacks, record operations, the checkpoints a
	// run's caps prune and the like queue, and what the reclaims after
	// deletions leave queued past their bound): zero means
	// DefaultReclaimIdle, negative never, leaving the queue to those
	// reclaims, Reclaim and GC. A store opened read-only, or over a
	// remote blob tier, collects nothing in the background.
	ReclaimIdle time.Duration
	// TreeCacheEntries bounds the decoded Merkle trees the store keeps in
	// memory, in directory entries (about 100 bytes each; a tree counts
	// one more than its entries): 0 means vfs.DefaultTreeCacheEntries
	// (16,384, about 1.6 MB), negative is refused. A lower bound costs a
	// tree read from the index where the cache would have answered.
	TreeCacheEntries int
}

// Store is an open store directory: the parts Open built over its one
// database, wired together. Callers use the parts directly (the journal
// to page events, the checkpoint store to list checkpoints); every change
// to a run goes through Runs.
type Store struct {
	Dir         string
	DB          *index.DB
	Blobs       *cas.Store
	Trees       *vfs.Trees
	Journal     *journal.Journal
	Checkpoints *checkpoint.Store
	Runs        *runs.Service
	// Virtual holds the virtual resources every run sees.
	Virtual *vfs.Virtual
	// Actors holds the per-actor artifact spaces (seed 004's
	// workspace/{actor}/), in the same content and tree stores.
	Actors *actors.Spaces
	// Tokens holds the bearer tokens the HTTP API accepts.
	Tokens *tokens.Store
	// Archive exports and imports archives of runs, chats, actor spaces
	// and the whole store (docs/archive.md).
	Archive *archive.Archiver
	// Remote is the remote blob tier when Options.Blobs named one, else
	// nil: Push uploads what is pending, Pull takes in other devices'
	// objects.
	Remote *remote.Storage

	maint        *maint.Maintainer
	reclaimGrace time.Duration
	now          func() time.Time
	// stopReencoder ends the background re-encoding of older versions
	// (cas.Store.StartReencoder); nil on a read-only store. It is set
	// once, by Open: calls in flight read it as Close runs.
	stopReencoder func()
	// stopDrain ends the background collection of the gc candidates
	// (reclaimer.startDrain); nil on a read-only store or with
	// Options.ReclaimIdle negative. Set once, by Open.
	stopDrain func()
	closing   sync.Mutex // held by Close
	closed    bool       // Close has stopped and drained; guarded by closing
}

// Open opens the store in dir, creating the directory and the database if
// needed and applying pending migrations, and builds every part over it:
// it is the one place they are made, so each part sees the same database
// and the same clock. It fails with store.newer_format for a store written
// by a newer build. An Open that created the store and then fails (its
// context ended, say) removes what it created, the directory and its parents
// too if it made them, unless another opener may have begun to use the store
// meanwhile: it is left when another connection, in this process or
// another, has it open, or when any of its tables but the settings holds
// rows a new store does not (index.DB.Discard): settings another opener
// noted meanwhile go with it.
func Open(ctx context.Context, dir string, opts Options) (*Store, error) {
	if err := opts.Validate(dir); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, index.Translate(err)
	}
	// The directories this call makes (the store's and missing parents)
	// are removed again if no store could be opened in them.
	var made []string
	if !opts.Index.ReadOnly {
		_, statErr := os.Stat(dir)
		if errors.Is(statErr, fs.ErrNotExist) {
			made = mkdirs.Missing(filepath.Clean(dir))
		}
		if errors.Is(statErr, syscall.ELOOP) || errors.Is(statErr, syscall.ENAMETOOLONG) {
			return nil, wserr.Wrap(wserr.InvalidOptions, "open store", dir, fmt.Errorf("no store can be at this path: %w", statErr))
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			fault := wserr.FSFault("open store", dir, err)
			switch {
			case errors.Is(err, syscall.ENOTDIR) || errors.Is(err, fs.ErrExist):
				return nil, wserr.Wrap(wserr.InvalidOptions, "open store", dir, fmt.Errorf("it or a parent is a file, not a directory: %w", err))
			case fault != err:
				return nil, fault // a full disk, a read-only file system
			}
			// A name no directory can have, one under a parent that
			// cannot hold directories, one the user may not make.
			return nil, wserr.Wrap(wserr.InvalidOptions, "open store", dir, fmt.Errorf("cannot make the store's directory: %w", err))
		}
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	// A reading outside the times a store holds fails every write until
	// the clock is right again, rather than stamp a time wrapped around.
	clock := index.NewClock(now)
	now = clock.Now
	opts.Now, opts.CAS.Now, opts.Runs.Now = now, now, now
	if opts.Runs.Virtual == nil {
		opts.Runs.Virtual = vfs.NewVirtual()
	}
	db, err := index.Open(ctx, filepath.Join(dir, DBName), opts.Index)
	if err != nil {
		mkdirs.RemoveEmpty(made) // empty unless another process filled them meanwhile
		return nil, err
	}
	db.SetClock(clock)
	// A store this call created and could not go on opening is removed
	// again, unless another opener may have begun to use it
	// (index.DB.Discard); then the directory and its parents, those this
	// call made, while they are empty.
	discard := func() {
		db.Discard()
		mkdirs.RemoveEmpty(made)
	}
	rem, err := openTier(ctx, db, dir, opts)
	if err != nil {
		discard()
		return nil, err
	}
	if rem != nil {
		opts.CAS.Storage = rem
	}
	// The content store's own work keeps to the runs' cap; the service
	// that reads it is made after the content store it uses.
	var svc *runs.Service
	opts.CAS.Cap = func(ctx context.Context, tx *index.Tx) (int64, error) { return svc.StoreCap(ctx, tx) }
	blobs, err := cas.New(db, opts.CAS)
	if err != nil {
		discard()
		return nil, err
	}
	trees := vfs.NewTreesCache(db, blobs, now, opts.TreeCacheEntries)
	j := journal.New(db, now)
	cps := checkpoint.New(db, trees, blobs, j, now)
	if opts.Profile == ProfileMobile {
		opts.Runs.Mobile = true
	}
	// The service reclaims space after deletions through maintenance,
	// which lists the service's roots: the reclaimer is filled in once
	// both exist.
	rec := &reclaimer{db: db, grace: opts.ReclaimGrace}
	svc = runs.New(runs.Deps{DB: db, Blobs: blobs, Trees: trees, Journal: j, Checkpoints: cps, Reclaim: rec}, opts.Runs)
	sp := actors.New(db, blobs, trees, svc, now)
	m := maint.New(maint.Parts{DB: db, Blobs: blobs, Trees: trees, Runs: svc, Checkpoints: cps, Events: j, Actors: sp, Now: now})
	rec.m = m
	arc := archive.New(archive.Parts{DB: db, Blobs: blobs, Trees: trees, Runs: svc, Checkpoints: cps, Journal: j, Actors: sp, Now: now})
	st := &Store{Dir: dir, DB: db, Blobs: blobs, Trees: trees, Journal: j, Checkpoints: cps,
		Runs: svc, Virtual: opts.Runs.Virtual, Actors: sp, Tokens: tokens.New(db, now), Archive: arc, Remote: rem,
		maint: m, reclaimGrace: opts.ReclaimGrace, now: now}
	if !opts.Index.ReadOnly {
		// Before anything is deleted: a tombstone names its run by the
		// first event its sync item records.
		if err := remote.FillFirst(ctx, db, st.itemFirst); err != nil {
			discard()
			return nil, err
		}
		st.stopReencoder = blobs.StartReencoder()
		if idle := opts.ReclaimIdle; idle >= 0 {
			if idle == 0 {
				idle = DefaultReclaimIdle
			}
			st.stopDrain = rec.startDrain(idle)
		}
	}
	return st, nil
}

// Validate refuses, with store.invalid_options, what Open would refuse
// later on: Open checks it before anything is created, so a bad option
// leaves no directory or database behind; a caller may check it before
// it looks at the directory at all.
func (opts Options) Validate(dir string) error {
	const op = "open store"
	if dir == "" {
		return wserr.New(wserr.InvalidOptions, op, "", "empty directory")
	}
	if err := opts.Index.Validate(); err != nil {
		return err
	}
	if err := opts.CAS.Validate(); err != nil {
		return err
	}
	if opts.Profile != "" && opts.Profile != ProfileMobile {
		return wserr.New(wserr.InvalidOptions, op, "", "unknown profile %q (want %q or none)", opts.Profile, ProfileMobile)
	}
	if opts.Runs.MaxStoreBytes < 0 {
		return wserr.New(wserr.InvalidOptions, op, "", "max store bytes %d is negative (0: the store policy's maxStoreBytes, if any)", opts.Runs.MaxStoreBytes)
	}
	if opts.TreeCacheEntries < 0 {
		return wserr.New(wserr.InvalidOptions, op, "", "tree cache entries %d is negative (0: vfs.DefaultTreeCacheEntries)", opts.TreeCacheEntries)
	}
	if opts.Blobs != "" {
		if _, err := remote.ParseURL(opts.Blobs); err != nil {
			return err
		}
	}
	return opts.Remote.Validate()
}

// openTier opens the remote blob tier the store uses: the one opts.Blobs
// names, recorded in the store (when it can write, and once it opens) so that later opens
// need no URL, else the one the store recorded, else none. A URL of
// another tier than the recorded one, or a store with objects on a tier
// it recorded no URL of, fails with store.invalid_options. Opening does
// not contact the object store: a device offline still opens its store.
func openTier(ctx context.Context, db *index.DB, dir string, opts Options) (*remote.Storage, error) {
	recorded, err := remote.Recorded(ctx, db)
	if err != nil {
		return nil, err
	}
	url := opts.Blobs
	if url != "" && recorded == "" {
		// A tier is chosen with the store: the contents it holds in its
		// own tables would look missing through one, and a sync would
		// announce objects no other device can fetch.
		held, err := cas.HoldsObjects(ctx, db)
		if err != nil {
			return nil, err
		}
		if held {
			return nil, wserr.New(wserr.InvalidOptions, "open store", dir,
				"the store holds file contents of its own, so no remote blob tier can be given to it now: export it and import the archive into a new store opened with the tier's URL")
		}
	}
	record := false
	switch {
	case url != "" && !opts.Index.ReadOnly:
		record = true // once the tier opens: a refused URL is not kept
	case url != "" && recorded != "":
		loc, err := remote.ParseURL(url)
		if err != nil {
			return nil, err
		}
		if err := remote.SameTier(recorded, loc); err != nil {
			return nil, err
		}
	case url == "" && recorded != "":
		url = recorded
	case url == "":
		inUse, err := remote.InUse(ctx, db)
		if err == nil && inUse {
			err = wserr.New(wserr.InvalidOptions, "open store", dir, "the store keeps its file contents on a remote blob tier: open it with that tier's URL (Options.Blobs, wsctl --blobs)")
		}
		return nil, err
	}
	o := opts.Remote
	o.Now = opts.Now
	rem, err := remote.Open(ctx, url, o)
	if err != nil {
		return nil, err
	}
	if record {
		if err := remote.Record(ctx, db, url); err != nil {
			return nil, err
		}
	}
	return rem, nil
}

// Close stops the background collection of gc candidates (a step under
// way is rolled back; the queue stays for the next open, Reclaim or GC)
// and the background re-encoding of older versions, runs what is
// still queued (at most cas.Options.MaxPending writes' worth, a batch of
// them per transaction; a failure, or another process holding the write
// lock, leaves the rest queued for the next Open: Close makes one short
// attempt at the lock, never waiting out the busy timeout), gives the
// database's free pages
// back to the file system in short steps (the pages the replaced forms
// held are most of them), and closes the database.
func (s *Store) Close() error {
	// Two Closes at once (a signal handler and a deferred Close) stop and
	// drain once: the second waits for the first.
	s.closing.Lock()
	defer s.closing.Unlock()
	if s.stopReencoder != nil && !s.closed {
		s.closed = true
		if s.stopDrain != nil {
			s.stopDrain()
		}
		s.stopReencoder()
		// Best effort: what another process's write lock keeps from
		// running now stays queued for the next open, rather than
		// holding the Close up for the busy timeout.
		ctx := index.WithoutWaiting(context.Background())
		_, _ = s.Blobs.Drain(ctx)
		// What re-encoding freed, here or in the background, goes back
		// to the file system: nothing of this Store writes after this to
		// fill the pages again.
		if free, err := s.DB.FreePages(ctx); err == nil && free > 0 {
			_ = s.DB.IncrementalVacuumAll(ctx, DefaultVacuumPages)
		}
	}
	return s.DB.Close()
}
