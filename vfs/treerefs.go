package vfs

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/jmoiron/sqlx"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/wserr"
)

// Every tree row lists what it names in tree_refs, written with the row:
// each entry of a whole tree, or each entry a patch sets plus the patch's
// base. So whether any stored tree names an object is one index lookup,
// which is what lets a collection after a deletion check only the objects
// the deleted rows named (see the candidates below) instead of walking
// every root. A tree a patch inherits an entry from is the patch's base,
// which the patch lists, so an object that any stored tree's entries hold
// is listed by a stored row: a lookup that finds none proves that nothing
// does. The converse errs on the side of keeping: an entry listed by a
// tree kept only as a patch base stays until that tree goes or a full gc
// runs.

// Kinds in gc_candidates.
const (
	refTree  = 1
	refBlob  = 2
	refChunk = 3
)

// rowRefs returns what a stored tree row names: its entries (data whole,
// base nil) or the entries its patch sets and its base.
func rowRefs(data, base []byte) ([]Candidate, error) {
	var es []Entry
	var out []Candidate
	if base == nil {
		var err error
		if es, err = DecodeTree(data); err != nil {
			return nil, err
		}
	} else {
		if len(base) != hashLen {
			return nil, wserr.New(wserr.Corrupt, "read tree", "", "bad patch base")
		}
		var err error
		if es, err = patchSets(data); err != nil {
			return nil, err
		}
		out = append(out, Candidate{Kind: CandidateTree, Hash: cas.Hash(base)})
	}
	for _, e := range es {
		k := CandidateBlob
		if e.Kind == KindDir {
			k = CandidateTree
		}
		out = append(out, Candidate{Kind: k, Hash: e.Hash})
	}
	return out, nil
}

// patchSets returns the entries a patch sets (adds or changes), in order,
// leaving out the names it deletes.
func patchSets(patch []byte) ([]Entry, error) {
	corrupt := func(format string, args ...any) error {
		return wserr.New(wserr.Corrupt, "decode tree patch", "", format, args...)
	}
	_, rest, err := patchSeq(patch)
	if err != nil {
		return nil, err
	}
	var out []Entry
	for n := 0; len(rest) > 0; n++ {
		kind := Kind(rest[0])
		rest = rest[1:]
		nlen, k := uvarint(rest)
		if k <= 0 || nlen > MaxSegmentLen || nlen > uint64(len(rest)-k) {
			return nil, corrupt("bad name length in change %d", n)
		}
		rest = rest[k+int(nlen):]
		if kind == kindDeleted {
			continue
		}
		if len(rest) < hashLen {
			return nil, corrupt("truncated hash in change %d", n)
		}
		e := Entry{Kind: kind}
		copy(e.Hash[:], rest)
		rest = rest[hashLen:]
		size, k := uvarint(rest)
		if k <= 0 || size > math.MaxInt64 {
			return nil, corrupt("bad size in change %d", n)
		}
		rest = rest[k:]
		out = append(out, e)
	}
	return out, nil
}

// refKey is the key tree_refs lists an object under: the first 8 bytes of
// its address. Two objects sharing a key only make TreeNamed answer yes for
// both while either is named.
func refKey(h cas.Hash) int64 { return int64(binary.BigEndian.Uint64(h[:8])) }

// uniqueRefs returns the distinct keys of refs.
func uniqueRefs(refs []Candidate) []int64 {
	seen := make(map[int64]bool, len(refs))
	out := make([]int64, 0, len(refs))
	for _, r := range refs {
		if k := refKey(r.Hash); !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}

// insertRefs records what the row of tree h names.
func insertRefs(ctx context.Context, tx *index.Tx, h cas.Hash, data, base []byte) error {
	var rb refBatch
	if err := rb.add(ctx, tx, h, data, base); err != nil {
		return err
	}
	return rb.flush(ctx, tx)
}

// refBatch gathers the tree_refs rows of the trees one change stores, for
// as few statements as it can: a change rewrites a directory per level
// of its path, and each lists what it names.
type refBatch struct {
	args []any // child, parent, child, parent…
}

// refBatchMax bounds the pairs one statement inserts.
const refBatchMax = 16

// refInserts holds the statement inserting n pairs at index n: one text
// per count, so each is prepared once.
var refInserts = func() [refBatchMax + 1]string {
	var out [refBatchMax + 1]string
	q := `INSERT OR IGNORE INTO tree_refs (child, parent) VALUES (?, ?)`
	for n := 1; n <= refBatchMax; n++ {
		out[n] = q
		q += `, (?, ?)`
	}
	return out
}()

// add adds what the row of tree h names, inserting in tx what fills a
// statement.
func (rb *refBatch) add(ctx context.Context, tx *index.Tx, h cas.Hash, data, base []byte) error {
	refs, err := rowRefs(data, base)
	if err != nil {
		return fmt.Errorf("tree %s: %w", h.Short(), err)
	}
	parent := h[:]
	for _, k := range uniqueRefs(refs) {
		if len(rb.args) == 2*refBatchMax {
			if err := rb.flush(ctx, tx); err != nil {
				return err
			}
		}
		rb.args = append(rb.args, k, parent)
	}
	return nil
}

// flush inserts the pairs gathered, in tx, and empties rb.
func (rb *refBatch) flush(ctx context.Context, tx *index.Tx) error {
	n := len(rb.args) / 2
	if n == 0 {
		return nil
	}
	_, err := tx.ExecContext(ctx, refInserts[n], rb.args...)
	rb.args = rb.args[:0]
	if err != nil {
		return fmt.Errorf("tree refs: %w", index.Translate(err))
	}
	return nil
}

// TreeNamed reports whether a stored tree row names h, as an entry or as
// a patch base (see above: false proves that no stored tree needs h).
func (t *Trees) TreeNamed(ctx context.Context, tx *index.Tx, h cas.Hash) (bool, error) {
	var ok bool
	if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM tree_refs WHERE child = ?)`, refKey(h)).Scan(&ok); err != nil {
		return false, fmt.Errorf("tree refs: %w", index.Translate(err))
	}
	return ok, nil
}

// RefsReady reports whether every tree row lists what it names: false
// only in a store created before the lists existed, until BackfillRefs
// has gone through its trees.
func (t *Trees) RefsReady(ctx context.Context, tx *index.Tx) (bool, error) {
	var pending bool
	if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM tree_refs_backfill)`).Scan(&pending); err != nil {
		return false, fmt.Errorf("tree refs: %w", index.Translate(err))
	}
	return !pending, nil
}

// BackfillRefs lists, in tx (a write transaction), what the next limit
// tree rows without lists name, and reports whether every row has its
// list now. A row it cannot decode lists nothing: fsck reports it, and
// full gc, which needs no lists, keeps what it can.
func (t *Trees) BackfillRefs(ctx context.Context, tx *index.Tx, limit int) (bool, error) {
	var after []byte
	err := tx.QueryRowContext(ctx, `SELECT after FROM tree_refs_backfill WHERE id = 1`).Scan(&after)
	if errors.Is(err, sql.ErrNoRows) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("backfill tree refs: %w", index.Translate(err))
	}
	rows, err := tx.QueryxContext(ctx, `SELECT hash, data, base FROM trees WHERE hash > coalesce(?, x'') ORDER BY hash LIMIT ?`, after, limit)
	if err != nil {
		return false, fmt.Errorf("backfill tree refs: %w", index.Translate(err))
	}
	type treeRow struct {
		hash       cas.Hash
		data, base []byte
	}
	var batch []treeRow
	for rows.Next() {
		var r treeRow
		if err := rows.Scan(&r.hash, &r.data, &r.base); err != nil {
			rows.Close()
			return false, fmt.Errorf("backfill tree refs: %w", index.Translate(err))
		}
		batch = append(batch, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return false, fmt.Errorf("backfill tree refs: %w", index.Translate(err))
	}
	for _, r := range batch {
		if err := insertRefs(ctx, tx, r.hash, r.data, r.base); err != nil && !wserr.Is(err, wserr.Corrupt) {
			return false, fmt.Errorf("backfill tree refs: %w", err)
		}
	}
	if len(batch) < limit {
		_, err := tx.ExecContext(ctx, `DELETE FROM tree_refs_backfill`)
		return err == nil, index.Translate(err)
	}
	last := batch[len(batch)-1].hash
	_, err = tx.ExecContext(ctx, `UPDATE tree_refs_backfill SET after = ? WHERE id = 1`, last[:])
	return false, index.Translate(err)
}

// CandidateKind is the kind of object a Candidate names.
type CandidateKind uint8

// Kinds of candidate.
const (
	CandidateTree  CandidateKind = refTree
	CandidateBlob  CandidateKind = refBlob
	CandidateChunk CandidateKind = refChunk
)

// Candidate is an object a deletion may have left unreferenced: a tree
// row, a blob or a chunk.
type Candidate struct {
	Kind CandidateKind
	Hash cas.Hash
	// Seq is the candidate's place in the queue: 0 when recording it
	// gives it the next place (a deletion's); else the place of the
	// candidate it came from (what a deleted tree named), so it belongs
	// to the same operation's stretch of the queue (QueueSpan).
	Seq int64
}

// QueueSpan is a stretch of the queue of candidates: those at places
// after After up to Upto. The candidates one operation recorded are the
// span from the queue's end before it (CandidatesEnd) to its end after.
type QueueSpan struct {
	After, Upto int64
}

// Orphaned records, in tx, the trees that rows deleted or rewritten in tx
// held as roots, as candidates for the next collection: the owner that
// deletes a run, a checkpoint, a chat or an actor version calls it in the
// same transaction, so a crash leaves both or neither. A candidate still
// referenced costs the collection one check and is dropped.
func (t *Trees) Orphaned(ctx context.Context, tx *index.Tx, roots ...cas.Hash) error {
	cs := make([]Candidate, 0, len(roots))
	for _, h := range roots {
		if !h.IsZero() && h != EmptyTree {
			cs = append(cs, Candidate{Kind: CandidateTree, Hash: h})
		}
	}
	return t.AddCandidates(ctx, tx, cs, t.now().UnixNano())
}

// AddCandidates records cs, in tx, as candidates due at due (Unix
// nanoseconds): one with Seq 0 at the next place in the queue, one with a
// Seq at that place. A candidate recorded already keeps the earlier time
// and takes the later place, so an operation that records it again counts
// it as its own.
func (t *Trees) AddCandidates(ctx context.Context, tx *index.Tx, cs []Candidate, due int64) error {
	for _, c := range cs {
		// The next place: one past the highest given out, whether its
		// candidate is still queued or was taken (gc_candidates_last).
		if _, err := tx.ExecContext(ctx, `INSERT INTO gc_candidates (hash, kind, due, seq) VALUES (?, ?, ?,
			CASE WHEN ? > 0 THEN ? ELSE max(coalesce((SELECT max(seq) FROM gc_candidates), 0), (SELECT seq FROM gc_candidates_last WHERE id = 1)) + 1 END)
			ON CONFLICT (hash, kind) DO UPDATE SET due = min(due, excluded.due), seq = max(seq, excluded.seq)`,
			c.Hash[:], int(c.Kind), due, c.Seq, c.Seq); err != nil {
			return fmt.Errorf("add gc candidate: %w", index.Translate(err))
		}
	}
	return nil
}

// CandidatesEnd returns, in tx, the place of the last candidate recorded
// so far: every candidate recorded after it returns is at a later place.
func (t *Trees) CandidatesEnd(ctx context.Context, tx *index.Tx) (int64, error) {
	var end int64
	err := tx.QueryRowContext(ctx, `SELECT max(coalesce((SELECT max(seq) FROM gc_candidates), 0), seq) FROM gc_candidates_last WHERE id = 1`).Scan(&end)
	if err != nil {
		return 0, fmt.Errorf("gc candidates: %w", index.Translate(err))
	}
	return end, nil
}

// keepLast records, in tx, the highest place given out before candidates
// leave the queue, so the places recorded next come after it.
func keepLast(ctx context.Context, tx *index.Tx) error {
	_, err := tx.ExecContext(ctx, `UPDATE gc_candidates_last SET seq = max(seq, coalesce((SELECT max(seq) FROM gc_candidates), 0)) WHERE id = 1`)
	if err != nil {
		return fmt.Errorf("gc candidates: %w", index.Translate(err))
	}
	return nil
}

// TakeCandidates removes and returns, in tx, up to limit candidates due
// at or before now, earliest first; the caller records again (AddCandidates)
// any it keeps for later.
func (t *Trees) TakeCandidates(ctx context.Context, tx *index.Tx, now int64, limit int) ([]Candidate, error) {
	if err := keepLast(ctx, tx); err != nil {
		return nil, err
	}
	rows, err := tx.QueryxContext(ctx, `DELETE FROM gc_candidates WHERE (hash, kind) IN (
		SELECT hash, kind FROM gc_candidates WHERE due <= ? ORDER BY due LIMIT ?) RETURNING hash, kind, seq`, now, limit)
	if err != nil {
		return nil, fmt.Errorf("gc candidates: %w", index.Translate(err))
	}
	return scanCandidates(rows)
}

// CandidatesDue reports, in tx, whether any candidate is due at or
// before now: one index probe, whatever the queue holds.
func (t *Trees) CandidatesDue(ctx context.Context, tx *index.Tx, now int64) (bool, error) {
	var due bool
	if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM gc_candidates WHERE due <= ?)`, now).Scan(&due); err != nil {
		return false, fmt.Errorf("gc candidates: %w", index.Translate(err))
	}
	return due, nil
}

// NextCandidateDue returns, in tx, when the earliest due candidate queued
// is due (Unix nanoseconds) and whether any is queued: one index probe,
// whatever the queue holds.
func (t *Trees) NextCandidateDue(ctx context.Context, tx *index.Tx) (int64, bool, error) {
	var due sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT min(due) FROM gc_candidates`).Scan(&due); err != nil {
		return 0, false, fmt.Errorf("gc candidates: %w", index.Translate(err))
	}
	return due.Int64, due.Valid, nil
}

// TakeCandidatesIn is TakeCandidates for the candidates of span alone, in
// the order of their places.
func (t *Trees) TakeCandidatesIn(ctx context.Context, tx *index.Tx, span QueueSpan, now int64, limit int) ([]Candidate, error) {
	if err := keepLast(ctx, tx); err != nil {
		return nil, err
	}
	rows, err := tx.QueryxContext(ctx, `DELETE FROM gc_candidates WHERE (hash, kind) IN (
		SELECT hash, kind FROM gc_candidates WHERE seq > ? AND seq <= ? AND due <= ? ORDER BY seq LIMIT ?)
		RETURNING hash, kind, seq`, span.After, span.Upto, now, limit)
	if err != nil {
		return nil, fmt.Errorf("gc candidates: %w", index.Translate(err))
	}
	return scanCandidates(rows)
}

func scanCandidates(rows *sqlx.Rows) ([]Candidate, error) {
	defer rows.Close()
	var out []Candidate
	for rows.Next() {
		var c Candidate
		var k int
		if err := rows.Scan(&c.Hash, &k, &c.Seq); err != nil {
			return nil, fmt.Errorf("gc candidates: %w", index.Translate(err))
		}
		c.Kind = CandidateKind(k)
		out = append(out, c)
	}
	return out, index.Translate(rows.Err())
}

// DropCandidatesDue removes every candidate due at or before due and at a
// place up to upto: a full collection that marked the store after that
// time, and after the queue ended at upto (CandidatesEnd), has judged
// them all. One recorded, or recorded again, later is at a later place:
// the mark may have read the store before the change that recorded it.
func (t *Trees) DropCandidatesDue(ctx context.Context, tx *index.Tx, due, upto int64) error {
	if err := keepLast(ctx, tx); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, `DELETE FROM gc_candidates WHERE due <= ? AND seq <= ?`, due, upto)
	return index.Translate(err)
}

// TreeCreated returns tree h's created time and whether it has a row.
func (t *Trees) TreeCreated(ctx context.Context, tx *index.Tx, h cas.Hash) (int64, bool, error) {
	var c int64
	err := tx.QueryRowContext(ctx, `SELECT created FROM trees WHERE hash = ?`, h[:]).Scan(&c)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("read tree %s: %w", h.Short(), index.Translate(err))
	}
	return c, true, nil
}

// DeleteTree deletes, in tx, tree h's row if it was created before cutoff
// (Unix nanoseconds), with its list of what it names, and returns the
// stored bytes freed, what the row named (the candidates its deletion
// makes) and whether it went. The caller has made sure nothing names h. A
// row that does not decode is deleted all the same: it names nothing
// anyone can read, and what it listed stays until a full gc.
func (t *Trees) DeleteTree(ctx context.Context, tx *index.Tx, h cas.Hash, cutoff int64) (int64, []Candidate, bool, error) {
	var data, base []byte
	err := tx.QueryRowContext(ctx, `DELETE FROM trees WHERE hash = ? AND created < ? RETURNING data, base`, h[:], cutoff).Scan(&data, &base)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil, false, nil
	}
	if err != nil {
		return 0, nil, false, fmt.Errorf("delete tree %s: %w", h.Short(), index.Translate(err))
	}
	children, err := deleteRefs(ctx, tx, h, data, base)
	return int64(len(data)), children, err == nil, err
}

// deleteRefs deletes the list of what tree h's row (data, base) named and
// returns what it named.
func deleteRefs(ctx context.Context, tx *index.Tx, h cas.Hash, data, base []byte) ([]Candidate, error) {
	refs, err := rowRefs(data, base)
	if err != nil {
		return nil, nil
	}
	for _, k := range uniqueRefs(refs) {
		if _, err := tx.ExecContext(ctx, `DELETE FROM tree_refs WHERE child = ? AND parent = ?`, k, h[:]); err != nil {
			return nil, fmt.Errorf("delete tree %s refs: %w", h.Short(), index.Translate(err))
		}
	}
	return refs, nil
}
