package maint

import (
	"context"
	"time"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/vfs"
)

// The parts maintenance composes, each implemented by the package that owns
// the tables behind it. Methods that take a *index.Tx read or write in the
// caller's transaction, so one phase of gc or fsck sees one snapshot.

// DB runs the transactions a phase works in and checks the database as a
// whole; *index.DB implements it.
type DB interface {
	View(ctx context.Context, fn func(tx *index.Tx) error) error
	Update(ctx context.Context, fn func(tx *index.Tx) error) error
	IntegrityCheck(ctx context.Context) error
	CheckStore(ctx context.Context) error
	FileBytes() (int64, error)
}

// RunRoots lists the trees runs and chat workspaces hold on to: each
// chat's persist root, each run's live root, persist base and records
// tree, in chat and run order; *runs.Service implements it.
type RunRoots interface {
	EachWorkspaceRoot(ctx context.Context, tx *index.Tx, fn func(chatID, runID string, root, persistBase, records cas.Hash) error) error
	// HasRun finds the runs checkpoints and events name.
	HasRun(ctx context.Context, tx *index.Tx, runID string) (bool, error)
	// EachCheckpointRef lists each run's head checkpoint (kind "run") and
	// each commit's (kind "commit"), for fsck to look up.
	EachCheckpointRef(ctx context.Context, tx *index.Tx, fn func(kind, ref, runID string, seq int64) error) error
}

// CheckpointRoots lists the root trees of a run's checkpoints, counts
// checkpoints by run (runs that are gone too), and finds checkpoints;
// *checkpoint.Store implements it.
type CheckpointRoots interface {
	EachRootOf(ctx context.Context, tx *index.Tx, runID string, fn func(seq int64, root cas.Hash) error) error
	EachRunCount(ctx context.Context, tx *index.Tx, fn func(runID string, n int64) error) error
	Count(ctx context.Context, tx *index.Tx, runID string) (int64, error)
	// Has and EachDanglingParent let fsck check the references to
	// checkpoints: from runs and commits, and from checkpoints to their
	// parents.
	Has(ctx context.Context, tx *index.Tx, runID string, seq int64) (bool, error)
	EachDanglingParent(ctx context.Context, tx *index.Tx, fn func(runID string, seq, parent int64) error) error
}

// ActorRoots lists the trees actor spaces hold on to: each space's live
// root and each version not pruned; *actors.Spaces implements it.
type ActorRoots interface {
	EachActorRoot(ctx context.Context, tx *index.Tx, fn func(actor string, seq int64, root cas.Hash) error) error
}

// ActorCounts is the optional ability of an ActorRoots to find the spaces
// whose row's count of versions is not their journal's, for fsck;
// *actors.Spaces has it.
type ActorCounts interface {
	EachMiscounted(ctx context.Context, tx *index.Tx, fn func(actor string, kept, counted int64) error) error
}

// ActorTotals is the optional ability of an ActorRoots to list the
// totals each space's row keeps of its live tree (vfs.Totals), for fsck
// to hold to the tree; *actors.Spaces has it.
type ActorTotals interface {
	EachSpaceTotals(ctx context.Context, tx *index.Tx, fn func(actor string, root cas.Hash, kept vfs.Totals) error) error
}

// EventRuns counts the journal's events by run, so fsck can find events of
// runs that do not exist, and decodes every payload; *journal.Journal
// implements it.
type EventRuns interface {
	EachRunEvents(ctx context.Context, tx *index.Tx, fn func(runID string, events int64) error) error
	// VerifyPayloads calls bad for each event whose payload does not
	// decode, and returns how many events it read.
	VerifyPayloads(ctx context.Context, tx *index.Tx, bad func(runID string, seq int64, detail string) error) (int, error)
}

// BlobInventory lists every blob and chunk row with its size, created time
// and references, and totals them.
type BlobInventory interface {
	EachBlobRecord(ctx context.Context, tx *index.Tx, fn func(cas.BlobRecord) error) error
	EachChunkRecord(ctx context.Context, tx *index.Tx, fn func(cas.ChunkRecord) error) error
	Usage(ctx context.Context, tx *index.Tx) (cas.Usage, error)
}

// BlobReferences reads single blob and chunk rows as the transaction sees
// them: a blob's chunks, delta base and number in its version history.
type BlobReferences interface {
	OpenRecords(ctx context.Context, tx *index.Tx) (*cas.Records, error)
}

// BlobSweeper deletes given blobs and chunks older than a cutoff.
type BlobSweeper interface {
	SweepBlobs(ctx context.Context, tx *index.Tx, hs []cas.Hash, cutoff int64, fn func(i int, freed int64, deleted bool) error) error
	SweepChunks(ctx context.Context, tx *index.Tx, hs []cas.Hash, cutoff int64, fn func(i int, freed int64, deleted bool) error) error
}

// BlobVerifier re-reads and re-hashes every stored blob and chunk.
type BlobVerifier interface {
	VerifyTx(ctx context.Context, tx *index.Tx, progress func(done, total int)) (cas.VerifyReport, error)
}

// DictRoots is the optional ability of Blobs to list the dictionaries it
// keeps as roots: each is a blob no other root may reach yet, kept while
// listed; *cas.Store implements it.
type DictRoots interface {
	EachDict(ctx context.Context, tx *index.Tx, fn func(cas.DictInfo) error) error
}

// Blobs is what maintenance needs of the content store; *cas.Store
// implements it.
type Blobs interface {
	BlobInventory
	BlobReferences
	BlobSweeper
	BlobVerifier
}

// TreeInventory lists every tree row with its size and created time, and
// totals them.
type TreeInventory interface {
	EachTreeRecord(ctx context.Context, tx *index.Tx, fn func(vfs.TreeRecord) error) error
	TreeUsage(ctx context.Context, tx *index.Tx) (rows, stored int64, err error)
}

// TreeReferences reads trees from their rows: entries and patch base.
type TreeReferences interface {
	OpenRowReader(ctx context.Context, tx *index.Tx) (*vfs.RowReader, error)
}

// TreeSweeper deletes given trees older than a cutoff.
type TreeSweeper interface {
	SweepTrees(ctx context.Context, tx *index.Tx, hs []cas.Hash, cutoff int64, fn func(i int, freed int64, deleted bool) error) error
}

// TreeVerifier checks that every tree row decodes and hashes to its
// address, and that the list of what each names is whole.
type TreeVerifier interface {
	VerifyTreeRows(ctx context.Context, tx *index.Tx, progress func(done, total int), problem, unlisted func(h cas.Hash, detail string)) (int, error)
}

// Trees is what maintenance needs of the tree store; *vfs.Trees implements
// it.
type Trees interface {
	TreeInventory
	TreeReferences
	TreeSweeper
	TreeVerifier
}

// Parts are the owners a Maintainer composes. Every field is required but
// Actors (nil: a store without actor spaces) and Now, which defaults to
// time.Now.
type Parts struct {
	DB          DB
	Blobs       Blobs
	Trees       Trees
	Runs        RunRoots
	Checkpoints CheckpointRoots
	Events      EventRuns
	Actors      ActorRoots
	// Now is the clock GC's grace is measured on when GCOptions.Now is
	// nil: the clock that stamps the rows.
	Now func() time.Time
}

// Streams is an ability a Blobs part may have: the earliest created time
// a row written by a write still in progress in this process may carry
// (cas.Store.OldestStream). A large Put commits its chunks before the
// blob that lists them; a collection keeps rows at least that young,
// whatever its grace.
type Streams interface {
	OldestStream() (int64, bool)
}

// cutoff is the created time (nanoseconds) below which a collection at
// now may delete an unreachable row: now less the grace, or earlier, to
// keep the rows of a write still streaming in this process.
func (m *Maintainer) cutoff(now int64, grace time.Duration) int64 {
	c := now - int64(grace)
	if s, ok := m.p.Blobs.(Streams); ok {
		if t, ok := s.OldestStream(); ok && t < c {
			c = t
		}
	}
	return c
}

// Maintainer runs gc, fsck, stats and du over one store. It holds no state
// of its own, so it is safe for concurrent use as far as its parts are.
type Maintainer struct {
	p Parts
}

// Now returns the time on the Maintainer's clock (Parts.Now).
func (m *Maintainer) Now() time.Time { return m.p.Now() }

// New returns a Maintainer over p.
func New(p Parts) *Maintainer {
	if p.Now == nil {
		p.Now = time.Now
	}
	return &Maintainer{p: p}
}
