package cas

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/wserr"
)

// A write (PutVersion) stores its new version whole and leaves the
// re-encoding of the versions it replaces to a queue, the blob_reencodes
// table: one job per write, naming the new version and the one it
// replaced, added in the write's transaction. A job is exactly the step
// an inline write takes (extend in delta.go), taken later: jobs run
// oldest first, each in one transaction that also deletes it, so after
// every commit the store is in a state the inline scheme passes through
// (its state some writes ago, the newer versions whole and in no history
// yet), and every read's chain stays within MaxChain at every moment.
//
// The slow part of a job (decoding the versions, building and proving the
// deltas) runs in a read transaction; the write transaction that follows
// checks that every row the plan read is as it was and then only stores
// what the plan built. A row that changed meanwhile (gc collected it,
// another process ran the job) makes the job run again inside the write
// transaction, on the store as it is.
//
// A crash loses nothing: a job and its re-encodings commit together, and
// a job whose rows are gone is dropped. Collection stays safe by the
// history-number rule (BlobRecord.Gen): a job makes older versions deltas
// against the new version only in the transaction that makes it the
// newest of a history and so changes its number.

// reencodeJob is one queued write: blob replaced prev.
type reencodeJob struct {
	ID   int64 `db:"id"`
	Blob Hash  `db:"blob"`
	Prev Hash  `db:"prev"`
	Upto int64 `db:"upto"` // the raw bytes queued up to this job, from runFirstJob
}

// maxPendingRaw bounds the bytes queued writes hold uncompressed.
const maxPendingRaw = 64 << 20

// queueReencode queues the re-encoding a write of h over prev leaves, in
// the write's transaction (raw: the bytes it stored uncompressed), and
// while the queue holds more than MaxPending jobs or maxPendingRaw raw
// bytes runs the oldest jobs in it. prevSized, when not nil, is set to
// prev's stored size after all of that, if the insert read it and no job
// ran after it.
func (s *Store) queueReencode(ctx context.Context, tx *index.Tx, h, prev Hash, raw int, prevSized *Sized) error {
	// The queue's bounds come from its first and last rows: jobs leave it
	// oldest first, so its ids have no holes, and upto sums raw. The
	// insert returns both ends; each job run takes the first away and
	// names the bound of the one after it. It also returns prev's stored
	// size, which the write's checkpoint counts as dead bytes, unless prev
	// is chunked (codec 2, CodecChunked), whose row leaves out its chunks.
	var q struct {
		ID         int64         `db:"id"`
		Upto       int64         `db:"upto"`
		First      int64         `db:"first"`
		Before     int64         `db:"before"`
		PrevStored sql.NullInt64 `db:"prev_stored"`
	}
	if err := tx.GetContext(ctx, &q, `INSERT INTO blob_reencodes (blob, prev, raw, upto)
		VALUES (?1, ?2, ?3, ?3 + coalesce((SELECT upto FROM blob_reencodes WHERE id = (SELECT max(id) FROM blob_reencodes)), 0))
		RETURNING id, upto, (SELECT min(id) FROM blob_reencodes) AS first,
			(SELECT upto - raw FROM blob_reencodes WHERE id = (SELECT min(id) FROM blob_reencodes)) AS before,
			(SELECT stored FROM blobs WHERE hash = ?2 AND codec != 2) AS prev_stored`, h, prev, raw); err != nil {
		return index.Translate(err)
	}
	forced := false
	for q.ID-q.First+1 > int64(s.opts.MaxPending) || q.Upto-q.Before > maxPendingRaw {
		job, ok, err := s.runFirstJob(ctx, tx)
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		forced = true
		q.First, q.Before = job.ID+1, job.Upto
	}
	if forced {
		// The queue is past its bounds, so the background runner has had
		// no turn lately: the training it would take is taken here.
		if err := s.trainIfDue(ctx, tx); err != nil {
			return err
		}
	}
	if _, ok := s.st.(storedSizer); ok && prevSized != nil && q.PrevStored.Valid && !forced {
		// The jobs just run may have re-encoded prev; otherwise nothing
		// changed its row since the insert read it.
		*prevSized = Sized{Hash: prev, Bytes: q.PrevStored.Int64}
	}
	select {
	case s.kick <- struct{}{}:
	default:
	}
	return nil
}

// QueueReencode queues in tx the re-encoding a PutVersion of h over prev
// leaves, for versions stored already (an import stores a path's versions
// whole, then learns their order): when the job runs, h becomes the
// newest version of prev's history and prev a delta against it, as if h
// had been written over prev, where the rules of delta.go allow it; a job
// they do not allow is dropped. It does nothing over a Storage without
// the HistoryStorage ability, with deltas off, or for h equal to prev.
// Errors are the index's.
func (s *Store) QueueReencode(ctx context.Context, tx *index.Tx, h, prev Hash) error {
	if s.hist == nil || s.opts.DeltaMax < 0 || prev.IsZero() || h == prev {
		return nil
	}
	return s.queueReencode(ctx, tx, h, prev, 0, nil)
}

func firstJob(ctx context.Context, tx *index.Tx) (reencodeJob, bool, error) {
	var job reencodeJob
	err := tx.GetContext(ctx, &job, `SELECT id, blob, prev FROM blob_reencodes ORDER BY id LIMIT 1`)
	if errors.Is(err, sql.ErrNoRows) {
		return job, false, nil
	}
	return job, err == nil, index.Translate(err)
}

// runFirstJob takes the oldest job off the queue and runs it in tx; false
// when the queue is empty.
func (s *Store) runFirstJob(ctx context.Context, tx *index.Tx) (reencodeJob, bool, error) {
	var job reencodeJob
	err := tx.GetContext(ctx, &job, `DELETE FROM blob_reencodes WHERE id = (SELECT min(id) FROM blob_reencodes)
		RETURNING id, blob, prev, upto`)
	if errors.Is(err, sql.ErrNoRows) {
		return job, false, nil
	}
	if err != nil {
		return job, false, index.Translate(err)
	}
	return job, true, s.runJob(ctx, tx, s.hist, job)
}

func deleteJob(ctx context.Context, tx *index.Tx, id int64) (bool, error) {
	res, err := tx.ExecContext(ctx, `DELETE FROM blob_reencodes WHERE id = ?`, id)
	if err != nil {
		return false, index.Translate(err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// PendingReencodes returns how many writes' re-encodings are queued.
func (s *Store) PendingReencodes(ctx context.Context) (int, error) {
	var n int
	err := s.db.View(ctx, func(tx *index.Tx) error {
		return index.Translate(tx.GetContext(ctx, &n, `SELECT count(*) FROM blob_reencodes`))
	})
	if err != nil {
		return 0, fmt.Errorf("pending re-encodings: %w", err)
	}
	return n, nil
}

// Reencode runs up to limit queued re-encodings (every one for limit 0),
// oldest first, each in a write transaction of its own, and returns how
// many it ran. It stops early when ctx is done, and at a job that would
// take the store past Options.Cap (queued still). A failed job stays
// queued and its error is returned; errors are the storage's and the
// index's, and workspace.invalid_argument for a negative limit.
func (s *Store) Reencode(ctx context.Context, limit int) (int, error) {
	if limit < 0 {
		return 0, wserr.New(wserr.InvalidArgument, "reencode", "", "limit %d is negative (0: every queued job)", limit)
	}
	if s.hist == nil {
		return 0, nil
	}
	done := 0
	for limit <= 0 || done < limit {
		if err := ctx.Err(); err != nil {
			return done, index.Translate(err)
		}
		ok, err := s.reencodeOne(ctx)
		if err != nil {
			return done, fmt.Errorf("re-encode: %w", err)
		}
		if !ok {
			break
		}
		done++
	}
	return done, nil
}

// reencodeOne runs the oldest job; false when there is none.
func (s *Store) reencodeOne(ctx context.Context) (bool, error) {
	var job reencodeJob
	var found bool
	plan := &planner{HistoryStorage: s.hist}
	err := s.db.View(ctx, func(tx *index.Tx) error {
		var err error
		if job, found, err = firstJob(ctx, tx); err != nil || !found {
			return err
		}
		return s.runJob(ctx, tx, plan, job)
	})
	if err != nil || !found {
		return false, err
	}
	if s.planned != nil {
		s.planned()
	}
	err = s.db.Update(ctx, func(tx *index.Tx) error {
		return s.keepCap(ctx, tx, func() error {
			if ok, err := deleteJob(ctx, tx, job.ID); err != nil || !ok {
				return err // another process ran it
			}
			same, err := plan.unchanged(ctx, tx)
			if err != nil {
				return err
			}
			if !same {
				s.stalePlans.Add(1)
				return s.runJob(ctx, tx, s.hist, job)
			}
			return plan.apply(ctx, tx)
		})
	})
	if errors.Is(err, errPastCap) {
		// Queued still; tried again after the next write.
		s.capHeld.Store(s.db.Writes() + 1)
		return false, nil
	}
	if err == nil {
		err = s.trainAsideIfDue(ctx)
	}
	return err == nil, err
}

// runJob takes, in tx through hs, the step the write of job.Blob over
// job.Prev left queued, as extend does for a version stored before. A job
// whose new version is gone, belongs to a history already (the same
// content was written again), or does not read is dropped.
func (s *Store) runJob(ctx context.Context, tx *index.Tx, hs HistoryStorage, job reencodeJob) error {
	// The new version is decoded straight from the storage's buffer.
	var cur []byte
	var curErr error
	n, ok, err := s.viewVersion(ctx, tx, hs, job.Blob, true, func(v *Version, lent bool) {
		switch {
		case !startsHistory(*v):
		case lent:
			cur, curErr = s.ownDecode(ctx, v.Object)
		default:
			cur, curErr = s.decode(ctx, v.Hash, v.Codec, v.Data, v.Size, v.Base)
		}
		v.Data = nil
	})
	if err != nil {
		return err
	}
	if !ok || !startsHistory(n) {
		return s.settlePrev(ctx, tx, hs, job.Prev)
	}
	if curErr != nil || Sum(cur) != job.Blob {
		return nil // corrupt: Verify reports it; nothing builds on it
	}
	// The next job usually replaces this one's version, whose content
	// it is then spared reading; the last one's may be this one's.
	prevBytes, verified := s.jobContent.get(job.Prev)
	s.jobContent.set(job.Blob, cur)
	if rs, ok := hs.(rowStorage); ok && n.Codec == CodecRaw {
		// The write stored it raw; whatever the history does with it,
		// its whole form is compressed from now on, unless a later
		// queued write replaced it: that write's job makes it a delta
		// (or compresses it, settleRaw), so compressing it now would be
		// work thrown away.
		later, err := replacedLater(ctx, tx, job)
		if err != nil {
			return err
		}
		if later {
			return s.extendFrom(ctx, tx, hs, job.Prev, prevBytes, verified, job.Blob, cur, nil)
		}
		f, release, err := s.wholeForm(ctx, tx, cur)
		if err == nil && f.codec != CodecRaw {
			err = rs.compressRaw(ctx, tx, n.Hash, f)
		}
		release()
		if err != nil {
			return err
		}
	}
	return s.extendFrom(ctx, tx, hs, job.Prev, prevBytes, verified, job.Blob, cur, nil)
}

// knownContent keeps the content of one blob, read and verified, for the
// next job: content at an address never changes, so it stays true
// whatever commits or rolls back meanwhile.
type knownContent struct {
	mu sync.Mutex
	h  Hash
	b  []byte
}

// maxKnownContent is the most content knownContent keeps, all an idle
// store holds of it.
const maxKnownContent = rawMax

func (k *knownContent) get(h Hash) ([]byte, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if h.IsZero() || k.h != h {
		return nil, false
	}
	return k.b, true
}

// set keeps b, the verified content at h (which no one changes), unless
// it is larger than maxKnownContent.
func (k *knownContent) set(h Hash, b []byte) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.h, k.b = Hash{}, nil
	if len(b) <= maxKnownContent {
		k.h, k.b = h, b
	}
}

// replacedLater reports whether a job queued after job replaces its new
// version.
func replacedLater(ctx context.Context, tx *index.Tx, job reencodeJob) (bool, error) {
	var n int
	err := tx.GetContext(ctx, &n, `SELECT count(*) FROM blob_reencodes WHERE prev = ? AND id > ?`, job.Blob, job.ID)
	return n > 0, index.Translate(err)
}

// settlePrev compresses the version at h if it is still stored raw: a job
// that leaves its replaced version whole must not leave it raw, since the
// job of that version's own write left its compression to this one.
func (s *Store) settlePrev(ctx context.Context, tx *index.Tx, hs HistoryStorage, h Hash) error {
	if _, ok := hs.(rowStorage); !ok || h.IsZero() {
		return nil
	}
	p, ok, err := s.viewVersion(ctx, tx, hs, h, true, keepRaw)
	if err != nil || !ok {
		return err
	}
	return s.settleRaw(ctx, tx, hs, p)
}

// keepRaw keeps a version's stored bytes only when they are its plain
// bytes, for settleRaw.
func keepRaw(v *Version, lent bool) {
	switch {
	case v.Codec != CodecRaw:
		v.Data = nil
	case lent:
		v.Data = cloneData(v.Data)
	}
}

// settleRaw compresses version p if it is stored raw (its plain bytes are
// its data), where compression pays.
func (s *Store) settleRaw(ctx context.Context, tx *index.Tx, hs HistoryStorage, p Version) error {
	rs, ok := hs.(rowStorage)
	if !ok || p.Codec != CodecRaw {
		return nil
	}
	f, release, err := s.wholeForm(ctx, tx, p.Data)
	defer release()
	if err != nil || f.codec == CodecRaw {
		return err
	}
	return rs.compressRaw(ctx, tx, p.Hash, f)
}

// planner is the HistoryStorage a job is planned through in a read
// transaction: reads pass through and are remembered, writes are kept
// for apply.
type planner struct {
	HistoryStorage
	read  []readRow
	dicts []Hash // the dictionaries the plan's forms are compressed with
	ops   []func(ctx context.Context, tx *index.Tx, hs HistoryStorage) error
}

// readRow is a row the plan read as it was, or its absence.
type readRow struct {
	h     Hash
	v     Version
	found bool
}

func (p *planner) Version(ctx context.Context, tx *index.Tx, h Hash) (Version, error) {
	v, err := p.HistoryStorage.Version(ctx, tx, h)
	if err == nil || errors.Is(err, ErrNotFound) {
		p.read = append(p.read, readRow{h: h, v: v, found: err == nil})
	}
	return v, err
}

func (p *planner) Reencode(_ context.Context, _ *index.Tx, h Hash, codec Codec, base Hash, data []byte) error {
	data = bytes.Clone(data)
	p.usesDict(codec, base)
	p.ops = append(p.ops, func(ctx context.Context, tx *index.Tx, hs HistoryStorage) error {
		return hs.Reencode(ctx, tx, h, codec, base, data)
	})
	return nil
}

func (p *planner) PutAt(_ context.Context, _ *index.Tx, o Object, slot Slot) error {
	o.Data = bytes.Clone(o.Data)
	p.ops = append(p.ops, func(ctx context.Context, tx *index.Tx, hs HistoryStorage) error {
		return hs.PutAt(ctx, tx, o, slot)
	})
	return nil
}

func (p *planner) SetHistory(_ context.Context, _ *index.Tx, h Hash, hist History, created time.Time) error {
	hist.Opens = slices.Clone(hist.Opens)
	p.ops = append(p.ops, func(ctx context.Context, tx *index.Tx, hs HistoryStorage) error {
		return hs.SetHistory(ctx, tx, h, hist, created)
	})
	return nil
}

// rowStorage is what the package's own storage can do beyond
// HistoryStorage for a queued version: move its row to the position a
// re-encoding in the same transaction freed (as PutAt places a new one),
// and replace the raw form a write stored by a compressed one, leaving
// its Saved count as it is (compression is not what a delta saved).
type rowStorage interface {
	moveTo(ctx context.Context, tx *index.Tx, h Hash, slot Slot) error
	compressRaw(ctx context.Context, tx *index.Tx, h Hash, f storedForm) error
}

func (p *planner) moveTo(_ context.Context, _ *index.Tx, h Hash, slot Slot) error {
	if _, ok := p.HistoryStorage.(rowStorage); !ok {
		return nil
	}
	p.ops = append(p.ops, func(ctx context.Context, tx *index.Tx, hs HistoryStorage) error {
		return hs.(rowStorage).moveTo(ctx, tx, h, slot)
	})
	return nil
}

func (p *planner) compressRaw(_ context.Context, _ *index.Tx, h Hash, f storedForm) error {
	if _, ok := p.HistoryStorage.(rowStorage); !ok {
		return nil
	}
	f.data = bytes.Clone(f.data)
	p.usesDict(f.codec, f.base)
	p.ops = append(p.ops, func(ctx context.Context, tx *index.Tx, hs HistoryStorage) error {
		return hs.(rowStorage).compressRaw(ctx, tx, h, f)
	})
	return nil
}

// usesDict notes that the plan stores a form compressed with the
// dictionary base (a zstd form with a base), which must still be listed
// when the plan is applied: pruning may unlist one that no blob used.
func (p *planner) usesDict(codec Codec, base Hash) {
	if codec == CodecZstd && !base.IsZero() && !slices.Contains(p.dicts, base) {
		p.dicts = append(p.dicts, base)
	}
}

// rawMax is the largest new version a queued write stores raw, leaving
// its compression to its job: the newest version of a file that is
// written again is re-encoded as a delta by the next job anyway, and the
// queue's bounds (MaxPending, maxPendingRaw) bound what is held raw.
const rawMax = 1 << 20

// storesRaw reports whether a queued write of n bytes stores them raw.
func (s *Store) storesRaw(n int) bool {
	_, ok := s.hist.(rowStorage)
	return ok && n <= rawMax
}

// unchanged reports whether every row the plan read is, in tx, as it
// was, and every dictionary it compressed with is still listed.
func (p *planner) unchanged(ctx context.Context, tx *index.Tx) (bool, error) {
	for _, d := range p.dicts {
		if ok, err := dictListed(ctx, tx, d); err != nil || !ok {
			return false, err
		}
	}
	for _, r := range p.read {
		v, err := p.HistoryStorage.Version(ctx, tx, r.h)
		found := err == nil
		if err != nil && !errors.Is(err, ErrNotFound) {
			return false, err
		}
		if found != r.found || (found && !sameRow(v, r.v)) {
			return false, nil
		}
	}
	return true, nil
}

// sameRow compares what a plan depends on: everything but the created
// time, which writers raise as they re-use a row.
func sameRow(a, b Version) bool {
	return a.Slot == b.Slot && a.Size == b.Size && a.Stored == b.Stored && a.Codec == b.Codec && a.Base == b.Base &&
		a.Saved == b.Saved && a.Depth == b.Depth && a.Gen == b.Gen && a.Head == b.Head &&
		a.Unreadable == b.Unreadable && slices.Equal(a.Opens, b.Opens) && bytes.Equal(a.Data, b.Data)
}

// apply makes the plan's writes in tx.
func (p *planner) apply(ctx context.Context, tx *index.Tx) error {
	for _, op := range p.ops {
		if err := op(ctx, tx, p.HistoryStorage); err != nil {
			return err
		}
	}
	return nil
}

// reencodePoll is how often the background re-encoder looks at the queue
// when no write woke it: a write's transaction may commit after its kick.
const reencodePoll = 200 * time.Millisecond

// reencodeIdle is the default Options.ReencodeIdle: a session that sends
// its next request within it (a checkpoint after its write, the next tool
// call) never waits for a job or shares a core with one.
const reencodeIdle = 30 * time.Millisecond

// StartReencoder runs queued re-encodings in the background until stop is
// called: woken by every write that queues work, and every reencodePoll,
// it takes jobs one at a time, each in a transaction of its own, only
// while the store is idle: after Options.ReencodeIdle without a write transaction
// of anyone else, and again straight after a job only if none began
// meanwhile. A job that fails is tried again at the next wake. A
// dictionary training that is due it takes after Options.ReencodeIdle
// whether or not writes go on (trainAside: only its result is stored in a
// write transaction); while it runs, writes leave trainings to it. stop
// waits for the job in progress to end; jobs left in the queue stay there
// for Drain (Close runs it) or the next run.
func (s *Store) StartReencoder() (stop func()) {
	s.runners.Add(1)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(reencodePoll)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-s.kick:
			case <-t.C:
			}
			s.reencodeWhileIdle(ctx)
		}
	}()
	return func() {
		cancel()
		wg.Wait()
		s.runners.Add(-1)
	}
}

// reencodeWhileIdle runs queued jobs while nothing else writes, until the
// queue is empty, a job fails or ctx is done.
func (s *Store) reencodeWhileIdle(ctx context.Context) {
	wait := s.opts.ReencodeIdle
	idle := time.NewTimer(wait)
	defer idle.Stop()
	for {
		seen := s.db.Writes()
		idle.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-idle.C:
		}
		quiet := s.db.Writes() == seen
		// A training a write left due is taken at once, idle or not: it
		// holds the write lock only to store its result.
		if err := s.trainAsideIfDue(ctx); err != nil {
			return
		}
		if !quiet {
			continue
		}
		seen = s.db.Writes() // the training's own
		if held := s.capHeld.Load(); held != 0 && held == seen+1 {
			return // the last job did not fit under the cap: no write since
		}
		for s.db.Writes() == seen {
			ok, err := s.reencodeOne(ctx)
			if err != nil || !ok {
				return
			}
			// the job's own write transaction
			seen++
		}
	}
}

// drainable reports whether Drain has anything to do: a queued job or a
// training due, looked for in a read transaction.
func (s *Store) drainable(ctx context.Context) (bool, error) {
	if s.dueNow() {
		return true, nil
	}
	var queued bool
	err := s.db.View(ctx, func(tx *index.Tx) error {
		return index.Translate(tx.GetContext(ctx, &queued, `SELECT EXISTS (SELECT 1 FROM blob_reencodes)`))
	})
	if err != nil {
		return false, fmt.Errorf("re-encode: %w", err)
	}
	return queued, nil
}

// errPastCap rolls back a transaction of the store's own work that would
// take it past Options.Cap (keepCap).
var errPastCap = errors.New("the store's own work would take it past its cap")

// keepCap runs fn, work the store does of its own accord, in tx, and fails
// with errPastCap, for the caller to roll tx back and leave the work
// queued, if fn took the database's pages in use past Options.Cap and
// above what tx found: near the cap, a re-encoding that frees nothing
// must not take the room the writes are refused for.
func (s *Store) keepCap(ctx context.Context, tx *index.Tx, fn func() error) error {
	if s.opts.Cap == nil {
		return fn()
	}
	limit, err := s.opts.Cap(ctx, tx)
	if err != nil {
		return fmt.Errorf("the store's cap: %w", err)
	}
	if limit <= 0 {
		return fn()
	}
	before, err := tx.UsedBytes(ctx)
	if err != nil {
		return err
	}
	if err := fn(); err != nil {
		return err
	}
	after, err := tx.UsedBytes(ctx)
	if err != nil {
		return err
	}
	if after > limit && after > before {
		return errPastCap
	}
	return nil
}

// drainBatch is the most queued jobs Drain runs in one transaction.
const drainBatch = 32

// Drain runs every queued re-encoding, oldest first, and returns how many
// it ran: a batch of jobs per write transaction, each job done directly on
// the store as the transaction finds it (Reencode plans each outside the
// write lock instead, which costs a second pass). It is for a caller that
// wants the queue empty now, such as a store that closes. It stops early
// when ctx is done, and at a batch that would take the store past
// Options.Cap (queued still, no error); errors are the storage's and the
// index's, and leave the failed batch queued.
func (s *Store) Drain(ctx context.Context) (int, error) {
	if s.hist == nil {
		return 0, nil
	}
	done := 0
	for {
		if err := ctx.Err(); err != nil {
			return done, index.Translate(err)
		}
		// Nothing to do takes no write lock: a store that another
		// process is writing closes at once.
		if work, err := s.drainable(ctx); err != nil || !work {
			return done, err
		}
		n := 0
		err := s.db.Update(ctx, func(tx *index.Tx) error {
			return s.keepCap(ctx, tx, func() error {
				n = 0
				// A training that is due comes first, so the batch's jobs
				// compress small versions with its dictionary.
				if err := s.trainIfDue(ctx, tx); err != nil {
					return err
				}
				for n < drainBatch {
					_, ok, err := s.runFirstJob(ctx, tx)
					if err != nil {
						return err
					}
					if !ok {
						break
					}
					n++
				}
				return nil
			})
		})
		if errors.Is(err, errPastCap) {
			return done, nil // the batch stays queued
		}
		if err != nil {
			return done, fmt.Errorf("re-encode: %w", err)
		}
		done += n
		if n < drainBatch {
			return done, nil
		}
	}
}
