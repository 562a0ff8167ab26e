package runs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"time"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/checkpoint"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/capread"
	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// Options configure a Service. The zero value means the defaults.
type Options struct {
	// Now is the clock for rows and events; default time.Now. wsstore.Open
	// sets it to the store's one clock, the one every other part reads.
	Now func() time.Time
	// NewRunID generates run ids when a request names none; default
	// "run_" + 16 random hex digits.
	NewRunID func() string
	// Virtual holds the virtual resources every run sees (providers mounted
	// by prefix); default none.
	Virtual *vfs.Virtual
	// MaxStoreBytes caps the store's stored bytes (the database pages
	// that hold data; free pages and the write-ahead log do not count): a
	// write that would bring more new content than the room left fails
	// with workspace.size_limit_exceeded and changes nothing. A change
	// that shrinks the store (a removal, a smaller replacement) is always
	// allowed. 0 means the store setting (Policy.MaxStoreBytes), if any.
	MaxStoreBytes int64
	// Mobile is the mobile profile: MobilePolicy under the store's own
	// policy, and automatic pruning on.
	Mobile bool
	// AutoPrune, when set, says whether a run that completes, fails or is
	// cancelled prunes its chat by the retention policy right after (and
	// the store then reclaims the space). Default: on for the mobile
	// profile and for a store with a store cap, off otherwise.
	AutoPrune *bool
}

// Reclaimer collects the garbage deletions leave and gives the space back
// to the file system, in bounded steps, returning the stored bytes freed;
// wsstore.Open provides one built on maintenance. Called after a deletion
// commits, never inside a transaction.
type Reclaimer interface {
	// CandidatesEnd returns where the queue of gc candidates ends now;
	// an operation reads it before it changes anything, so what it
	// records afterwards is its own.
	CandidatesEnd(ctx context.Context) (int64, error)
	// Reclaim collects the candidates recorded after place after (the
	// operation's own, with what they lead to) and a bounded number of
	// those others left, so its cost grows with what the operation
	// changed, not with the backlog.
	Reclaim(ctx context.Context, after int64) (int64, error)
}

// CandidateReclaimer is the optional ability of a Reclaimer to collect
// only what deletions recorded as candidates, at a cost that grows with
// them and never with the store: those after place after and a bounded
// number of others, or, for after < 0, the whole queue. It reports false,
// and does nothing, when it cannot (the store would need a full mark). A
// run's end uses it to free its collected scratch/ even when retention
// deleted nothing.
type CandidateReclaimer interface {
	ReclaimCandidates(ctx context.Context, after int64) (freed int64, ok bool, err error)
}

// Blobs is the content store as runs uses it: file contents go in (whole,
// streamed, or as the next version of a file) and come out verified. A
// *cas.Store is one.
type Blobs interface {
	Put(ctx context.Context, r io.Reader) (cas.Hash, error)
	PutBytes(ctx context.Context, tx *index.Tx, b []byte) (cas.Hash, error)
	PutVersion(ctx context.Context, tx *index.Tx, b []byte, prev cas.Hash) (cas.Hash, error)
	PutVersionFrom(ctx context.Context, tx *index.Tx, b []byte, prev cas.Hash, prevBytes []byte) (cas.Hash, error)
	PutVersionSized(ctx context.Context, tx *index.Tx, b []byte, prev cas.Hash, prevBytes []byte) (cas.Hash, cas.Sized, error)
	Prepare(b []byte, prev cas.Hash) *cas.Prepared
	PutPrepared(ctx context.Context, tx *index.Tx, p *cas.Prepared, prev cas.Hash) (cas.Hash, error)
	Touch(ctx context.Context, tx *index.Tx, h cas.Hash) (bool, error)
	ReadAll(ctx context.Context, h cas.Hash) ([]byte, error)
	ReadAllIn(ctx context.Context, tx *index.Tx, h cas.Hash) ([]byte, error)
	Get(ctx context.Context, h cas.Hash) (io.ReadCloser, error)
	Stat(ctx context.Context, h cas.Hash) (cas.Info, error)
	// Hold keeps what this process commits from now on from a gc in this
	// process until release: a streamed write commits its content with
	// Put before the transaction that references it.
	Hold() (release func())
}

// Trees is the Merkle tree store as runs uses it: workspaces are roots it
// reads and changes copy-on-write. A *vfs.Trees is one.
type Trees interface {
	Put(ctx context.Context, tx *index.Tx, entries []vfs.Entry) (cas.Hash, error)
	Entries(ctx context.Context, tx *index.Tx, h cas.Hash) ([]vfs.Entry, error)
	PutNext(ctx context.Context, tx *index.Tx, entries []vfs.Entry, prev cas.Hash) (cas.Hash, error)
	Lookup(ctx context.Context, tx *index.Tx, root cas.Hash, p vfs.Path) (vfs.Entry, error)
	Set(ctx context.Context, tx *index.Tx, root cas.Hash, p vfs.Path, e *vfs.Entry) (cas.Hash, error)
	SetFiles(ctx context.Context, tx *index.Tx, root cas.Hash, changes []vfs.FileChange) (cas.Hash, error)
	List(ctx context.Context, tx *index.Tx, root cas.Hash, p vfs.Path, depth int) ([]vfs.Listed, error)
	ListFunc(ctx context.Context, tx *index.Tx, root cas.Hash, p vfs.Path, depth int, after vfs.Path, fn func(vfs.Listed) error) error
	ListPage(ctx context.Context, tx *index.Tx, root cas.Hash, p vfs.Path, depth int, page vfs.ListPage) ([]vfs.Listed, bool, error)
	Walk(ctx context.Context, tx *index.Tx, root cas.Hash, fn func(p vfs.Path, e vfs.Entry) error) error
	Diff(ctx context.Context, tx *index.Tx, a, b cas.Hash) ([]vfs.Change, error)
	// Orphaned records, in tx, trees the run rows deleted or rewritten in
	// tx held, for the next collection to check.
	Orphaned(ctx context.Context, tx *index.Tx, roots ...cas.Hash) error
}

// Journal is the event log as runs uses it: every change appends the
// events that record it in the change's own transaction. A
// *journal.Journal is one.
type Journal interface {
	Append(ctx context.Context, tx *index.Tx, runID string, typ journal.Type, level journal.Level, payload any) (journal.Event, error)
	// Prepare and AppendEntries append a change's events together (with
	// its checkpoint's last), their times read as the change happens.
	Prepare(typ journal.Type, level journal.Level, payload any) (journal.Entry, error)
	AppendEntries(ctx context.Context, tx *index.Tx, runID string, es ...journal.Entry) ([]journal.Event, error)
	DeleteRun(ctx context.Context, tx *index.Tx, runID string) (int64, error)
}

// Checkpoints is the checkpoint store as runs uses it. A
// *checkpoint.Store is one.
type Checkpoints interface {
	Plan(ctx context.Context, tx *index.Tx, runID string, root cas.Hash, parent int64, reason string, known ...cas.Sized) (checkpoint.Planned, error)
	Insert(ctx context.Context, tx *index.Tx, p checkpoint.Planned, eventSeq int64) (checkpoint.Checkpoint, error)
	Get(ctx context.Context, tx *index.Tx, runID string, seq int64) (checkpoint.Checkpoint, error)
	Has(ctx context.Context, tx *index.Tx, runID string, seq int64) (bool, error)
	Prune(ctx context.Context, tx *index.Tx, runID string, limit int, keep int64, pinned checkpoint.Pinned) ([]int64, error)
	DiffPage(ctx context.Context, a, b cas.Hash, opts checkpoint.DiffOptions, page vfs.ListPage) ([]checkpoint.FileDiff, bool, error)
	DiffFunc(ctx context.Context, a, b cas.Hash, opts checkpoint.DiffOptions, after vfs.Path, fn func(checkpoint.FileDiff) error) error
	PruneBytes(ctx context.Context, tx *index.Tx, runID string, maxBytes int64, keep int64, pinned checkpoint.Pinned) ([]int64, int64, error)
	Retained(ctx context.Context, tx *index.Tx, runID string) (int64, error)
	DeleteRun(ctx context.Context, tx *index.Tx, runID string) (int64, error)
	RewriteRoots(ctx context.Context, tx *index.Tx, runID string, fn func(root cas.Hash) (cas.Hash, error)) (int64, error)
}

// Deps are the parts of a store a Service works through. wsstore.Open
// builds them over one database and wires them; a Service owns none of
// them and never hands them out. Every field is required.
type Deps struct {
	// DB holds the tables runs owns (chats, runs, commits) and the
	// transactions every change runs in; the other parts write in the
	// same transaction.
	DB          *index.DB
	Blobs       Blobs
	Trees       Trees
	Journal     Journal
	Checkpoints Checkpoints
	// Reclaim, if not nil, runs after deletions (run, chat, prune) to
	// give their space back; its bytes are recorded in the deletion log.
	Reclaim Reclaimer
}

// Service is the entry point for chat workspaces and runs. It is safe for
// concurrent use; writes serialize on the store's one write connection.
type Service struct {
	db           *index.DB
	blobs        Blobs
	trees        Trees
	journal      Journal
	checkpoints  Checkpoints
	virtual      *vfs.Virtual
	now          func() time.Time
	newRunID     func() string
	maxStore     int64
	mobile       bool
	autoPruneOpt *bool
	reclaim      Reclaimer
	// saves serializes the chat sink calls of this Service per chat.
	saves chatLocks
	// storeDir is the store's directory, its symlinks resolved once
	// (reachesStore asks at every host access).
	storeDir func() (string, error)
	// streams is the room under the store's cap that the streams this
	// Service (and the actor spaces, through StreamCap) store at once
	// share.
	streams capread.Budget
}

// New returns a Service over the parts in deps, which must all be set.
func New(deps Deps, opts Options) *Service {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.NewRunID == nil {
		opts.NewRunID = randomRunID
	}
	if opts.Virtual == nil {
		opts.Virtual = vfs.NewVirtual()
	}
	return &Service{
		db:           deps.DB,
		blobs:        deps.Blobs,
		trees:        deps.Trees,
		journal:      deps.Journal,
		checkpoints:  deps.Checkpoints,
		virtual:      opts.Virtual,
		now:          opts.Now,
		newRunID:     opts.NewRunID,
		maxStore:     opts.MaxStoreBytes,
		mobile:       opts.Mobile,
		autoPruneOpt: opts.AutoPrune,
		reclaim:      deps.Reclaim,
		storeDir: sync.OnceValues(func() (string, error) {
			return filepath.EvalSymlinks(filepath.Dir(deps.DB.Path()))
		}),
	}
}

func randomRunID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return "run_" + hex.EncodeToString(b[:])
}

func (s *Service) update(ctx context.Context, fn func(tx *index.Tx) error) error {
	return s.db.Update(ctx, fn)
}

// room is the store cap's check for one change made in a transaction
// (roomCheck).
type room struct {
	op          string
	limit, size int64 // limit 0: no cap
	total       int64
	grew        bool
	// storedBefore: the change references new content stored before its
	// transaction (a stream), which the stored bytes it began with count.
	storedBefore bool
	err          error // the cap or the stored bytes could not be read
	lastPath     vfs.Path
}

// roomCheck returns the store cap's check for one change made in tx
// (maxStoreBytes). Before writing, add fails with
// workspace.size_limit_exceeded once the change's contents could take the
// store past its cap: each call adds its bytes (new content less what it
// replaces, so a smaller version adds nothing here) to those of the calls
// before, all measured against the store's stored bytes
// (index.Tx.UsedBytes: pages holding data, so space freed by deletions
// counts at once). The content is counted as it is before
// compression, so that check errs on the side of refusing. Once written,
// settle measures the stored bytes again and fails the same way if a
// change that added anything (add with bytes above 0, or grow) left them
// past the cap: what the contents do not count (trees, journal events,
// checkpoints, records, the version a shorter one leaves in history) is
// held to the cap too; a removal, which adds nothing, is never refused. If
// the cap or the stored bytes cannot be read, a change that adds fails
// with that error: it is never let past a cap it could not measure.
// caps, when the caller read the run with findRunCaps, carries the cap's
// setting; else it is read in tx.
func (s *Service) roomCheck(ctx context.Context, tx *index.Tx, op string, caps *runCaps) *room {
	r := &room{op: op}
	r.limit, r.err = s.maxStoreBytes(ctx, tx, caps)
	if r.err == nil && r.limit > 0 {
		r.size, r.err = tx.UsedBytes(ctx)
	}
	if r.err != nil {
		r.err = fmt.Errorf("%s: the store's cap: %w", op, r.err)
	}
	return r
}

// add counts bytes more of the change's contents, for p.
func (r *room) add(p vfs.Path, bytes int64) error {
	if bytes <= 0 && !r.grew {
		return nil // nothing added yet: a removal needs no cap
	}
	if r.err != nil {
		return r.err
	}
	if r.limit <= 0 {
		return nil
	}
	r.total, r.lastPath = r.total+bytes, p
	if bytes > 0 {
		r.grew = true
		if r.size+r.total > r.limit {
			return wserr.StoreFull(r.op, p.String(), "the store holds %d bytes of its %d-byte cap; %d more do not fit", r.size, r.limit, r.total)
		}
	}
	return nil
}

// grow marks the change as one that adds to the store whatever its
// contents (a record, a checkpoint, a file version of any size), for
// settle.
func (r *room) grow() { r.grew = true }

// storedAhead marks the change as one that makes p new content stored
// before its transaction (a stream): the stored bytes the change began
// with hold that content already, so settle refuses it whenever the store
// is past the cap, even where the change's own rows fit in pages the store
// had.
func (r *room) storedAhead(p vfs.Path) { r.grew, r.storedBefore, r.lastPath = true, true, p }

// settle fails the change if it added anything and left the store's
// stored bytes past the cap.
func (r *room) settle(ctx context.Context, tx *index.Tx) error {
	if !r.grew {
		return nil
	}
	if r.err != nil {
		return r.err
	}
	if r.limit <= 0 {
		return nil
	}
	used, err := tx.UsedBytes(ctx)
	if err != nil {
		return fmt.Errorf("%s: the store's cap: %w", r.op, err)
	}
	if used > r.limit && (used > r.size || r.storedBefore) {
		path := ""
		if !r.lastPath.IsRoot() {
			path = r.lastPath.String()
		}
		return wserr.StoreFull(r.op, path, "the change would take the store to %d bytes, past its %d-byte cap", used, r.limit)
	}
	return nil
}

// StoreRoom returns the bytes left under the store's cap
// (Options.MaxStoreBytes, or the store policy's maxStoreBytes) and whether
// there is a cap, for a writer outside the runs (an import) that must
// keep to it too. It fails if the cap or the stored bytes cannot be read
// (an unreadable policy is store.corrupt).
func (s *Service) StoreRoom(ctx context.Context) (int64, bool, error) { return s.storeRoom(ctx) }

// StoreCap returns the store's cap (Options.MaxStoreBytes, or the store
// policy's maxStoreBytes) as tx reads it, 0 for none, for a writer
// outside the runs (the actor spaces) that keeps to it in its own
// transactions.
func (s *Service) StoreCap(ctx context.Context, tx *index.Tx) (int64, error) {
	return s.maxStoreBytes(ctx, tx, nil)
}

// StreamCap bounds r, content about to be stored before the change that
// references it (a streamed write, an actor upload), by the room left
// under the store's cap, shared with the other streams this process is
// storing at once: past it, reads fail with workspace.size_limit_exceeded
// naming op and path, the store cap's refusal (wserr.StoreFull). Its
// first free bytes do not count (a new version's share of the one it
// replaces, stored already). A size of 0 or more is
// r's length as the caller knows it (an HTTP upload's Content-Length):
// the stream takes it from the room at once and fails before reading
// anything if it does not fit, so streams that begin together are
// admitted in turn; negative: not known. Release, once the content is
// stored or abandoned, gives the stream's share back (its bytes then
// count in the store). The change's transaction checks the cap again,
// across processes.
func (s *Service) StreamCap(ctx context.Context, r io.Reader, free, size int64, op, path string) (_ io.Reader, release func(), _ error) {
	mark := s.streams.Mark()
	room, capped, err := s.storeRoom(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("%s %s: the store's cap: %w", op, path, err)
	}
	if !capped {
		return r, func() {}, nil
	}
	full := wserr.StoreFull(op, path,
		"the content does not fit in the store's size cap (%d bytes left, shared with the content being stored beside it)", room)
	if size >= 0 {
		return mark.SizedReader(r, free, size, room, full)
	}
	r, release = mark.Reader(r, free, room, full)
	return r, release, nil
}

// storeRoom returns the bytes left under the store cap and whether there
// is a cap.
func (s *Service) storeRoom(ctx context.Context) (int64, bool, error) {
	limit, err := s.maxStoreBytes(ctx, nil, nil)
	if err != nil || limit <= 0 {
		return 0, false, err
	}
	used, err := s.db.UsedBytes(ctx)
	if err != nil {
		return 0, false, err
	}
	return max(limit-used, 0), true, nil
}
