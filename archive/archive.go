package archive

import (
	"cmp"
	"context"
	"errors"
	"io"
	"time"

	"github.com/wsstore/wsstore/actors"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/checkpoint"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

// The parts an archive reads and writes through, each implemented by the
// package that owns the tables behind it.

// DB runs transactions; *index.DB implements it.
type DB interface {
	View(ctx context.Context, fn func(tx *index.Tx) error) error
	Update(ctx context.Context, fn func(tx *index.Tx) error) error
}

// Blobs streams file contents out and in; *cas.Store implements it.
type Blobs interface {
	Get(ctx context.Context, h cas.Hash) (io.ReadCloser, error)
	Put(ctx context.Context, r io.Reader) (cas.Hash, error)
	Has(ctx context.Context, h cas.Hash) (bool, error)
	// Size returns blob h's plain size, and an error cas.ErrNotFound
	// matches if there is none.
	Size(ctx context.Context, h cas.Hash) (int64, error)
	// HasIn is Has as tx sees it.
	HasIn(ctx context.Context, tx *index.Tx, h cas.Hash) (bool, error)
	// Touch refreshes the created time of blob h in tx, so a gc keeps it
	// its grace longer, and fails with a store.busy (cas.Collected) if a
	// gc took it.
	Touch(ctx context.Context, tx *index.Tx, h cas.Hash) (bool, error)
}

// Trees reads and stores Merkle trees; *vfs.Trees implements it.
type Trees interface {
	Entries(ctx context.Context, tx *index.Tx, h cas.Hash) ([]vfs.Entry, error)
	Put(ctx context.Context, tx *index.Tx, entries []vfs.Entry) (cas.Hash, error)
	// TreeCreated reports whether tree h is stored, and its created time.
	TreeCreated(ctx context.Context, tx *index.Tx, h cas.Hash) (int64, bool, error)
}

// Runs exports and imports chat, run and commit rows; *runs.Service
// implements it.
type Runs interface {
	ExportChat(ctx context.Context, tx *index.Tx, id string) (runs.ChatRecord, error)
	EachChatRecord(ctx context.Context, tx *index.Tx, fn func(runs.ChatRecord) error) error
	ExportRun(ctx context.Context, tx *index.Tx, id string) (runs.RunRecord, error)
	EachRunRecord(ctx context.Context, tx *index.Tx, chatID string, fn func(runs.RunRecord) error) error
	EachCommitRow(ctx context.Context, tx *index.Tx, runID string, fn func(runs.CommitRow) error) error
	ImportChat(ctx context.Context, tx *index.Tx, c runs.ChatRecord) (bool, error)
	ImportRun(ctx context.Context, tx *index.Tx, r runs.RunRecord) (bool, error)
	ImportCommit(ctx context.Context, tx *index.Tx, c runs.CommitRow) error
	MergeRun(ctx context.Context, tx *index.Tx, r runs.RunRecord) error
	MergeCommits(ctx context.Context, tx *index.Tx, runID string, incoming []runs.CommitRow) error
	HasCommit(ctx context.Context, tx *index.Tx, runID, id string) (bool, error)
	MergePersist(ctx context.Context, tx *index.Tx, from, to runs.ChatRecord) error
}

// Holder is an ability the Blobs part may have: keeping what the import
// commits from a gc in this process until the rows that reference it
// commit too, whatever the gc's grace (cas.Store.Hold).
type Holder interface {
	Hold() (release func())
}

// Room is an ability the Runs part may have: the bytes left under the
// store's cap, and whether there is one (runs.Service.StoreRoom). Import
// keeps to it, and fails if it cannot be read.
type Room interface {
	StoreRoom(ctx context.Context) (int64, bool, error)
}

// Checkpoints exports and imports checkpoint rows; *checkpoint.Store
// implements it.
type Checkpoints interface {
	Get(ctx context.Context, tx *index.Tx, runID string, seq int64) (checkpoint.Checkpoint, error)
	EachExportRecord(ctx context.Context, tx *index.Tx, runID string, fn func(checkpoint.Record) error) error
	ImportRecord(ctx context.Context, tx *index.Tx, r checkpoint.Record) error
	DeleteRecords(ctx context.Context, tx *index.Tx, runID string, seqs []int64) error
}

// Journal exports and imports events; *journal.Journal implements it.
type Journal interface {
	ExportEventsAfter(ctx context.Context, tx *index.Tx, runID string, after int64, fn func(journal.Event) error) error
	ImportEvent(ctx context.Context, tx *index.Tx, e journal.Event) error
	Last(ctx context.Context, tx *index.Tx, runID string) (int64, error)
}

// Actors exports and imports actor spaces and their journals;
// *actors.Spaces implements it.
type Actors interface {
	ExportSpace(ctx context.Context, tx *index.Tx, actor string) (actors.SpaceRecord, bool, error)
	EachSpaceRecord(ctx context.Context, tx *index.Tx, fn func(actors.SpaceRecord) error) error
	EachExportChange(ctx context.Context, tx *index.Tx, actor string, after int64, fn func(actors.ChangeRecord) error) error
	ImportSpace(ctx context.Context, tx *index.Tx, r actors.SpaceRecord) (bool, error)
	ImportChange(ctx context.Context, tx *index.Tx, c actors.ChangeRecord) error
	MergeSpace(ctx context.Context, tx *index.Tx, from int64, r actors.SpaceRecord) error
}

// Parts are what New wires an Archiver from.
type Parts struct {
	DB          DB
	Blobs       Blobs
	Trees       Trees
	Runs        Runs
	Checkpoints Checkpoints
	Journal     Journal
	Actors      Actors
	// Now is the clock the manifest is stamped with and summaries are
	// timed by; nil means time.Now.
	Now func() time.Time
}

// Archiver exports and imports archives of one store. It holds no state of
// its own beyond its parts, so it is safe for concurrent use.
type Archiver struct {
	p Parts
}

// New returns an Archiver over p.
func New(p Parts) *Archiver {
	if p.Now == nil {
		p.Now = time.Now
	}
	return &Archiver{p: p}
}

// Scope selects what an export holds. Runs bring their chat workspace's
// row (and persist layer) with them; chats bring every run of theirs. All
// selects every chat, run and actor space.
type Scope struct {
	Runs []string `json:"runs,omitempty"`
	// Chats are chat workspace ids (chat_…) or stable keys,
	// KIND:STABLE_CHAT_ID, which Export turns into their ids.
	Chats  []string `json:"chats,omitempty"`
	Actors []string `json:"actors,omitempty"`
	All    bool     `json:"all,omitempty"`
	// From holds runs from a journal seq on (an archive for a store that
	// holds each such run up to that seq, imported with Merge): of run
	// ID, the events from From[ID] (the anchor, which the importing store
	// must hold as it is) on and the checkpoints made at or after it, led
	// by a RunTail record. A run not named, or 0, goes whole.
	From map[string]int64 `json:"from,omitempty"`
	// SkipWorkspace leaves actor spaces out (seed 004's
	// ExportOpts.SkipWorkspace); a scope it would leave empty is refused.
	SkipWorkspace bool `json:"skipWorkspace,omitempty"`
}

// Progress is a report of long work: the phase, and done of total in
// that phase's unit (bytes for blobs, objects for trees, rows for
// records; total 0 when not known).
type Progress struct {
	Phase string
	Done  int64
	Total int64
}

// Options configure an export or an import. The zero value is the
// default: no progress reports.
type Options struct {
	// Progress, if set, is called as work advances, from the calling
	// goroutine. An import reports its "records" phase from inside its
	// write transaction, which holds the store's one write connection:
	// Progress must not write to the store (such a write would wait for
	// that connection for good).
	Progress func(Progress)
	// BlobsElsewhere (export) leaves the blob entries out: the manifest
	// still lists every blob, which an import then requires the store to
	// hold already (a remote blob tier both stores share, pulled first).
	// Sync carries metadata this way.
	BlobsElsewhere bool
	// Merge (import) reconciles instead of keeping every local object as
	// it is: a run the store holds an earlier state of (its journal a
	// prefix of the archive's) is brought forward; one the store holds a
	// later state of stays; one written on both sides since they parted
	// is a conflict. A chat whose persist layer the archive promoted from
	// the store's version is brought forward through compare-and-swap;
	// one promoted on both sides is a conflict. An actor space whose
	// journal in the store is a prefix of the archive's is brought
	// forward the same way; one changed on both sides is a conflict.
	// Summary.Updated names what was brought forward.
	Merge bool
	// NoHostPaths (import) refuses, with auth.forbidden and importing
	// nothing, an archive holding a run whose profile names allowPaths:
	// the import of a client that does not own the host (wsctl serve's
	// POST /v1/import) must not give itself a run that reaches the host's
	// directories.
	NoHostPaths bool
	// Taken (import), if set, is called with each chat, run and actor
	// space as the import settles it, whatever Summary's lists have room
	// for: what became of it, its name ("run ID") and, for Conflicted,
	// the conflict. It is called from inside the import's write
	// transaction, as Progress is, and must not write to the store; its
	// error fails the import, which then imports nothing.
	Taken func(o Outcome, name string, c Conflict) error
}

// Outcome is what an import did with one chat, run or actor space.
type Outcome string

// The outcomes of an import, each a list of Summary's.
const (
	Added      Outcome = "added"
	Unchanged  Outcome = "unchanged"
	Updated    Outcome = "updated"
	Conflicted Outcome = "conflicts"
)

// MaxNames bounds each of an import's Summary.Added, Unchanged and
// Updated, and MaxConflicts its Conflicts, so that a summary does not grow
// with the archive: each names the first of its objects in the order the
// import settled them, and AddedCount, UnchangedCount, UpdatedCount and
// ConflictCount count them all. A conflict, which someone must settle, is
// named ten times as far.
const (
	MaxNames     = 1000
	MaxConflicts = 10 * MaxNames
)

// Conflict is one object an import left as it was because the store holds
// another version of it.
type Conflict struct {
	Kind   string `json:"kind"` // chat, run or actor
	ID     string `json:"id"`
	Reason string `json:"reason"`
	// NotHeld says the archive holds the run from an event on only (a
	// tail, Options.Merge) and this store does not hold the run to bring
	// forward.
	NotHeld bool `json:"-"`
	// OtherRun says the store holds another run under the id: its journal
	// and the archive's part at the first event.
	OtherRun bool `json:"-"`
}

// Summary reports an export or an import.
type Summary struct {
	// Objects is blobs plus trees; Bytes the plain bytes of the blobs.
	Objects int64 `json:"objects"`
	Blobs   int64 `json:"blobs"`
	Trees   int64 `json:"trees"`
	Bytes   int64 `json:"bytes"`
	// ArchiveBytes is the size of the archive written or read.
	ArchiveBytes int64 `json:"archiveBytes"`
	Chats        int   `json:"chats"`
	Runs         int   `json:"runs"`
	Actors       int   `json:"actors"`
	Events       int64 `json:"events"`
	// On import: NewObjects counts the blobs new to the store; Added,
	// Unchanged and Conflicts name each chat, run and actor space as new,
	// held already, or held otherwise (left as it was), and Updated
	// (Options.Merge) what was brought forward: the first MaxNames of
	// each (MaxConflicts conflicts) in the order the import settled them,
	// the archive's (chats, runs by id, actor spaces by name) but for the
	// chats a merge reconciles, which come last. AddedCount,
	// UnchangedCount, UpdatedCount and ConflictCount count them all. An
	// import's Added, Unchanged and Conflicts are never nil, so its JSON
	// always carries them (an export's never does); a count of none is
	// left out.
	NewObjects     int64      `json:"newObjects,omitempty"`
	Added          []string   `json:"added,omitzero"`
	Unchanged      []string   `json:"unchanged,omitzero"`
	Updated        []string   `json:"updated,omitempty"`
	Conflicts      []Conflict `json:"conflicts,omitzero"`
	AddedCount     int        `json:"addedCount,omitempty"`
	UnchangedCount int        `json:"unchangedCount,omitempty"`
	UpdatedCount   int        `json:"updatedCount,omitempty"`
	ConflictCount  int        `json:"conflictCount,omitempty"`
	// Seconds is the wall time the work took, by the archiver's clock.
	Seconds float64 `json:"seconds"`
}

// countingWriter and countingReader measure the archive's bytes.
// firstAbsent returns the first key of a, in key order, whose key in b
// (key of a's key and value; nil: the same key) b lacks, and whether
// there is one.
func firstAbsent(a, b *index.SpillMap, key func(k []byte, v int64) ([]byte, error)) ([]byte, bool, error) {
	var absent []byte
	found := errors.New("found")
	err := a.Each(func(k []byte, v int64) error {
		bk := k
		if key != nil {
			var err error
			if bk, err = key(k, v); err != nil {
				return err
			}
		}
		if _, ok, err := b.Get(bk); err != nil || !ok {
			absent = k
			return cmp.Or(err, found)
		}
		return nil
	})
	if err == found {
		return absent, true, nil
	}
	return nil, false, err
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
