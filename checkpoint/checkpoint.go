package checkpoint

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// Checkpoint is one saved state of a run's workspace.
type Checkpoint struct {
	RunID     string    `json:"runId"`
	Seq       int64     `json:"seq"`
	ID        string    `json:"id"`
	Root      cas.Hash  `json:"root"`
	Parent    string    `json:"parent,omitempty"` // id of the checkpoint this one descends from: the nearest one a cap has not pruned
	Reason    string    `json:"reason"`
	EventSeq  int64     `json:"eventSeq"` // seq of its checkpoint_created event
	CreatedAt time.Time `json:"createdAt"`
}

// ID returns the id of checkpoint seq: cp_000001 for 1.
func ID(seq int64) string { return fmt.Sprintf("cp_%06d", seq) }

// ParseRef parses a checkpoint id ("cp_000012", or unpadded "cp_12") or a
// bare sequence number ("12") into a seq. It fails with workspace.invalid_argument.
func ParseRef(s string) (int64, error) {
	t := strings.TrimPrefix(s, "cp_")
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 1 || t == "" || t[0] < '0' || t[0] > '9' {
		return 0, wserr.New(wserr.InvalidArgument, "checkpoint", "", "%q is not a checkpoint id (cp_000001) or sequence number", s)
	}
	return n, nil
}

// CheckSeq fails with workspace.invalid_argument unless seq is a
// checkpoint number, 1 or more: every way in (the Go API, batch, HTTP and
// wsctl) refuses 0 and negative numbers alike, before looking anything up.
func CheckSeq(seq int64) error {
	if seq < 1 {
		return wserr.New(wserr.InvalidArgument, "checkpoint", "", "checkpoint %d: checkpoints count from 1", seq)
	}
	return nil
}

// Store creates and reads checkpoints.
type Store struct {
	db      *index.DB
	trees   *vfs.Trees
	blobs   *cas.Store
	journal *journal.Journal
	now     func() time.Time
}

// New returns a Store; now nil means time.Now.
func New(db *index.DB, trees *vfs.Trees, blobs *cas.Store, j *journal.Journal, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{db: db, trees: trees, blobs: blobs, journal: j, now: now}
}

type row struct {
	RunID     string   `db:"run_id"`
	Seq       int64    `db:"seq"`
	Root      cas.Hash `db:"root"`
	ParentSeq int64    `db:"parent_seq"`
	Reason    string   `db:"reason"`
	EventSeq  int64    `db:"event_seq"`
	CreatedAt int64    `db:"created_at"`
}

func (r row) checkpoint() Checkpoint {
	c := Checkpoint{RunID: r.RunID, Seq: r.Seq, ID: ID(r.Seq), Root: r.Root, Reason: r.Reason,
		EventSeq: r.EventSeq, CreatedAt: time.Unix(0, r.CreatedAt).UTC()}
	if r.ParentSeq > 0 {
		c.Parent = ID(r.ParentSeq)
	}
	return c
}

const cols = `run_id, seq, root, parent_seq, reason, event_seq, created_at`

// Create records root as the run's next checkpoint, descending from
// checkpoint parent (0: none), and appends its checkpoint_created event, in
// tx. It writes exactly one checkpoint row and one event. The row also
// records what the step from the run's newest checkpoint made dead (see
// Retained), found by a diff of the two trees, which costs what changed;
// known are stored sizes the caller read in tx since the blobs last
// changed (cas.Store.PutVersionSized), which it does not read again.
func (s *Store) Create(ctx context.Context, tx *index.Tx, runID string, root cas.Hash, parent int64, reason string, known ...cas.Sized) (Checkpoint, error) {
	p, err := s.Plan(ctx, tx, runID, root, parent, reason, known...)
	if err != nil {
		return Checkpoint{}, err
	}
	evs, err := s.journal.AppendEntries(ctx, tx, runID, p.Event)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint: %w", err)
	}
	return s.Insert(ctx, tx, p, evs[0].Seq)
}

// Planned is a checkpoint Plan made ready: its row, but for the seq of
// its event, and that checkpoint_created event.
type Planned struct {
	row       row
	dead, cum int64
	// Event is the checkpoint_created event, for the caller to append
	// (journal.Journal.AppendEntries) before Insert.
	Event journal.Entry
}

// Plan is the first half of Create, for a caller that appends the
// checkpoint's event together with its change's own events (after them):
// it reads and checks what Create does and prepares the event; Insert then
// writes the row. Its errors are Create's.
func (s *Store) Plan(ctx context.Context, tx *index.Tx, runID string, root cas.Hash, parent int64, reason string, known ...cas.Sized) (Planned, error) {
	if reason == "" {
		reason = "manual"
	}
	if len(reason) > 200 {
		return Planned{}, wserr.New(wserr.InvalidArgument, "checkpoint", "", "reason is longer than 200 bytes")
	}
	if !utf8.ValidString(reason) {
		// The row would keep the bytes, its event and an export another
		// reading of them.
		return Planned{}, wserr.New(wserr.InvalidArgument, "checkpoint", "", "reason must be valid UTF-8")
	}
	var last struct {
		Seq  int64    `db:"seq"`
		Cum  int64    `db:"cum_dead"`
		Root cas.Hash `db:"root"`
	}
	err := tx.GetContext(ctx, &last, lastSQL, runID)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return Planned{}, fmt.Errorf("checkpoint: %w", index.Translate(err))
	}
	dead, err := s.deadBytes(ctx, tx, last.Root, root, known)
	if err != nil {
		return Planned{}, fmt.Errorf("checkpoint: %w", err)
	}
	r := row{RunID: runID, Seq: last.Seq + 1, Root: root, ParentSeq: parent, Reason: reason, CreatedAt: s.now().UnixNano()}
	payload := journal.CheckpointMade{CheckpointID: ID(r.Seq), Seq: r.Seq, Root: root.String(), Reason: reason}
	if parent > 0 {
		payload.Parent = ID(parent)
	}
	ev, err := s.journal.Prepare(journal.CheckpointCreated, journal.Info, payload)
	if err != nil {
		return Planned{}, fmt.Errorf("checkpoint: %w", err)
	}
	return Planned{row: r, dead: dead, cum: last.Cum + dead, Event: ev}, nil
}

// Insert writes the checkpoint p plans, in tx, its event appended as
// eventSeq.
func (s *Store) Insert(ctx context.Context, tx *index.Tx, p Planned, eventSeq int64) (Checkpoint, error) {
	r := p.row
	r.EventSeq = eventSeq
	if _, err := tx.ExecContext(ctx, `INSERT INTO checkpoints (`+cols+`, dead_bytes, cum_dead) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.RunID, r.Seq, r.Root, r.ParentSeq, r.Reason, r.EventSeq, r.CreatedAt, p.dead, p.cum); err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint: %w", index.Translate(err))
	}
	return r.checkpoint(), nil
}

// Get returns checkpoint seq of the run, reading in tx (nil: the read
// pool). It fails with checkpoint.not_found, and with
// workspace.invalid_argument for a number below 1: checkpoints count from
// 1, so 0 or a negative number is a mistake, not a checkpoint gone.
func (s *Store) Get(ctx context.Context, tx *index.Tx, runID string, seq int64) (Checkpoint, error) {
	if err := CheckSeq(seq); err != nil {
		return Checkpoint{}, err
	}
	var r row
	err := s.view(ctx, tx, func(tx *index.Tx) error {
		return tx.GetContext(ctx, &r, `SELECT `+cols+` FROM checkpoints WHERE run_id = ? AND seq = ?`, runID, seq)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return Checkpoint{}, wserr.New(wserr.CheckpointNotFound, "checkpoint", "", "run %s has no checkpoint %s", runID, ID(seq))
	}
	if err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint: %w", index.Translate(err))
	}
	return r.checkpoint(), nil
}

// List returns the run's checkpoints in order. The checkpoints table is
// all it reads: a run id no run has lists none, as an unknown id's events
// page none (runs.Service.Run, or the checkpoints.list op, answers
// run.not_found for it).
func (s *Store) List(ctx context.Context, runID string) ([]Checkpoint, error) {
	var rows []row
	err := s.db.View(ctx, func(tx *index.Tx) error {
		return tx.SelectContext(ctx, &rows, `SELECT `+cols+` FROM checkpoints WHERE run_id = ? ORDER BY seq`, runID)
	})
	if err != nil {
		return nil, fmt.Errorf("list checkpoints: %w", index.Translate(err))
	}
	out := make([]Checkpoint, len(rows))
	for i, r := range rows {
		out[i] = r.checkpoint()
	}
	return out, nil
}

// MaxPage is the page of checkpoints a listing over the protocol or HTTP
// answers when it names none, and the largest it may ask for: a page is
// held whole, as rows and again as JSON.
const MaxPage = 10000

// PageMore is Page and whether checkpoints remain after the page (limit
// 1..MaxPage, 0: MaxPage; afterSeq not negative), as the checkpoints.list
// op and GET /v1/runs/{run}/checkpoints answer it. It fails with
// workspace.invalid_argument for a limit or afterSeq out of range.
func (s *Store) PageMore(ctx context.Context, runID string, afterSeq int64, limit int) ([]Checkpoint, bool, error) {
	if afterSeq < 0 || limit < 0 || limit > MaxPage {
		return nil, false, wserr.New(wserr.InvalidArgument, "checkpoints", "", "afterSeq must not be negative and limit must be in 0..%d (0: %d), not %d and %d", MaxPage, MaxPage, afterSeq, limit)
	}
	if limit == 0 {
		limit = MaxPage
	}
	cps, err := s.Page(ctx, runID, afterSeq, limit+1)
	if err != nil || len(cps) <= limit {
		return cps, false, err
	}
	return cps[:limit], true, nil
}

// Page returns up to limit of the run's checkpoints after seq afterSeq, in
// order: a listing of any length holds one page at a time.
func (s *Store) Page(ctx context.Context, runID string, afterSeq int64, limit int) ([]Checkpoint, error) {
	var rows []row
	err := s.db.View(ctx, func(tx *index.Tx) error {
		return tx.SelectContext(ctx, &rows, `SELECT `+cols+` FROM checkpoints WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?`, runID, afterSeq, limit)
	})
	if err != nil {
		return nil, fmt.Errorf("list checkpoints: %w", index.Translate(err))
	}
	out := make([]Checkpoint, len(rows))
	for i, r := range rows {
		out[i] = r.checkpoint()
	}
	return out, nil
}

// Count returns how many checkpoints the run has.
func (s *Store) Count(ctx context.Context, tx *index.Tx, runID string) (int64, error) {
	var n int64
	err := s.view(ctx, tx, func(tx *index.Tx) error {
		return tx.GetContext(ctx, &n, `SELECT count(*) FROM checkpoints WHERE run_id = ?`, runID)
	})
	return n, err
}

// DeleteRun deletes every checkpoint row of the run, in tx; the trees they
// named become garbage for gc unless something else references them, and
// are recorded as candidates for the next collection.
func (s *Store) DeleteRun(ctx context.Context, tx *index.Tx, runID string) (int64, error) {
	var roots []cas.Hash
	if err := tx.SelectContext(ctx, &roots, `DELETE FROM checkpoints WHERE run_id = ? RETURNING root`, runID); err != nil {
		return 0, index.Translate(err)
	}
	if err := s.trees.Orphaned(ctx, tx, dedup(roots)...); err != nil {
		return 0, err
	}
	return int64(len(roots)), nil
}

// dedup returns hs without repeats, in first-seen order.
func dedup(hs []cas.Hash) []cas.Hash {
	seen := make(map[cas.Hash]bool, len(hs))
	out := hs[:0]
	for _, h := range hs {
		if !seen[h] {
			seen[h] = true
			out = append(out, h)
		}
	}
	return out
}

func (s *Store) view(ctx context.Context, tx *index.Tx, fn func(tx *index.Tx) error) error {
	if tx != nil {
		return fn(tx)
	}
	return s.db.View(ctx, fn)
}
