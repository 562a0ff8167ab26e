package cas

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/wsstore/wsstore/index"
)

// Delta storage keeps the newest version of a file whole and the older
// ones as zstd frames that use a newer version's bytes as a raw dictionary
// (reverse deltas, as Fossil's), so reading the newest version (what a live
// workspace reads) is a plain read, and a version that grew from an older
// one makes the older one nearly free: it is a prefix or a near copy.
//
// The versions of a history are numbered from 1 (the gen column), and the
// chains follow a binary counter, so that any version costs at most about
// 2·log2(n) applications without ever storing an older version whole:
//
//   - Version v's level is the number of trailing zero bits of v, and its
//     parent P(v) is v rounded up to the next multiple of 2^(level+1): 1,
//     2 and 3 rest on 4, 4 and 6 on 8, 8 and 12 on 16, and so on.
//   - While P(v) does not exist yet, v is open: the open versions, at most
//     one per level, chain from the oldest (highest level) to the newest,
//     which is whole; the newest version's row lists them (opens).
//   - When version n arrives, the previous one joins the open chain, and
//     every open version whose parent is n (the newest ones of the chain)
//     is re-encoded against n, as is the open version just above them, so
//     the chain stays linked to the newest. On average that is two
//     re-encodings per version, each from bytes at hand: the open chain is
//     decoded from the previous version upwards.
//
// The longest chain of a history whose newest version is n is then
// exactly bits(n) + popcount(n) - 2 (chainBound); a version whose number
// would take it past Options.MaxChain starts a new history, leaving the
// previous newest version whole. With the default 16 that is one whole
// blob per 766 versions, against one per 17 for plain chains of reverse
// deltas.
//
// A version is re-encoded as a delta only when that is smaller than its
// whole form by a quarter, both fit in Options.DeltaMax, and the delta is
// proven to decode back first; otherwise it stays (or becomes) whole, which
// only ever shortens chains. Content that drifts (a log cut to a fixed
// size) shares little with a parent hundreds of versions later, so such a
// history keeps its high-level versions whole; content that grows, as
// drafts do, costs a few dozen bytes per older version.
//
// Only a version PutVersion stores for the first time joins a history:
// content stored before (a revert, a copy of another file) leaves every
// row as it is, so chains never form a cycle. When a write re-encodes
// only the version it replaces, the new version takes that version's row
// position (rowid), so its bytes fill the room the old whole version
// leaves in the table's pages rather than leave it empty until a vacuum.
// When older versions move too (every other write), the new version goes
// after them: measured on 300 drafts, and on the bench's chat store,
// that leaves less empty room than taking the slot every time (8.5 KB
// against 12.5 KB of a 53 KB table).
// A row becomes another's delta base only as the newest version of a write,
// and that write changes its number (gen): a collector that saw the row
// unreferenced can tell, by its number, that it may be a base now.
// A blob's address never changes: it is BLAKE3 of the plain bytes whatever
// the codec, and every read verifies every step of the chain.

// PutVersion stores b, which replaces the content at prev (a path's
// previous version; the zero Hash for none), and returns b's address. b is
// stored whole and prev, with the older versions of its history that the
// scheme above moves, is re-encoded as a delta against b: by default
// later, by Reencode (reencode.go), from a queue the write adds to in its
// transaction; with Options.InlineDeltas in the write's transaction. A
// failure to build a delta only leaves a version as it was; errors are
// those of PutBytes, of the storage and of the index. Over a Storage
// without the HistoryStorage ability PutVersion is PutBytes.
func (s *Store) PutVersion(ctx context.Context, tx *index.Tx, b []byte, prev Hash) (Hash, error) {
	return s.PutVersionFrom(ctx, tx, b, prev, nil)
}

// PutVersionFrom is PutVersion for a caller that already holds prev's
// content (prevBytes, as ReadAll returned it: an append or a patch reads
// it to build b), so prev is not decoded a second time; nil prevBytes
// reads it as PutVersion does. Bytes that are not prev's content cannot
// corrupt the store: every delta built from them is proven to decode back
// to its address before it is stored, so they only cost the history its
// deltas. b is hashed once and compressed at most once.
func (s *Store) PutVersionFrom(ctx context.Context, tx *index.Tx, b []byte, prev Hash, prevBytes []byte) (Hash, error) {
	h, _, err := s.PutVersionSized(ctx, tx, b, prev, prevBytes)
	return h, err
}

// Sized is a blob's stored size as StoredBytes would read it in a
// transaction; the zero Sized knows none.
type Sized struct {
	Hash  Hash
	Bytes int64
}

// PutVersionSized is PutVersionFrom that also returns prev's stored size
// after the write, when the write's own statements read it (else the zero
// Sized): a caller that counts what the write replaced (a checkpoint's
// dead bytes) passes it on rather than read prev's row again. It holds
// until the next change to the store's blobs in tx.
func (s *Store) PutVersionSized(ctx context.Context, tx *index.Tx, b []byte, prev Hash, prevBytes []byte) (Hash, Sized, error) {
	if !s.versioned(len(b), prev) {
		h, err := s.PutBytes(ctx, tx, b)
		return h, Sized{}, err
	}
	var sized Sized
	h, err := s.putVersion(ctx, tx, b, s.sum(b), prev, prevBytes, nil, &sized)
	return h, sized, err
}

// versioned reports whether a write of n bytes over prev joins prev's
// history (else it is a plain PutBytes).
func (s *Store) versioned(n int, prev Hash) bool {
	return !prev.IsZero() && s.opts.DeltaMax >= 0 && n <= s.opts.InlineMax && s.hist != nil
}

// Prepared is content made ready for a write outside its transaction:
// hashed, and compressed where the write would compress it, so that a
// batch of writes does that work before taking the write lock and on
// every core.
type Prepared struct {
	b    []byte
	h    Hash
	prev Hash
	form *storedForm // nil: compressed in the write, if at all
}

// Hash returns the prepared content's address.
func (p *Prepared) Hash() Hash { return p.h }

// Prepare hashes b and compresses it as a write over prev (the path's
// previous version as the caller last saw it, zero for none) would:
// whole content that starts no history is compressed, a version that
// joins one is left to its re-encoding. It does no I/O and is safe for
// concurrent use; content too large for one row is left to the write.
// The caller passes the result to PutPrepared.
func (s *Store) Prepare(b []byte, prev Hash) *Prepared {
	p := &Prepared{b: b, prev: prev}
	if len(b) > s.opts.InlineMax {
		return p
	}
	p.h = s.sum(b)
	if s.versioned(len(b), prev) && (s.opts.InlineDeltas || s.storesRaw(len(b))) {
		return p
	}
	f, release := s.compressBlob(b)
	if f.codec != CodecRaw {
		// an exact copy, so a batch holds no more than its content's
		// compressed size
		f.data = bytes.Clone(f.data)
	}
	release()
	p.form = &f
	return p
}

// PutPrepared stores p's content in tx as PutVersion(ctx, tx, content,
// prev) would, using what Prepare did: the content is not hashed again,
// and its compressed form is used unless prev differs from the one p was
// prepared over in a way that changes the stored form. Errors are those of
// PutVersion.
func (s *Store) PutPrepared(ctx context.Context, tx *index.Tx, p *Prepared, prev Hash) (Hash, error) {
	b := p.b
	if len(b) > s.opts.InlineMax {
		return s.PutBytes(ctx, tx, b)
	}
	if !s.versioned(len(b), prev) {
		if err := s.putHashed(ctx, tx, p.h, b, p.form); err != nil {
			return Hash{}, err
		}
		if err := s.trainInWrite(ctx, tx); err != nil {
			return Hash{}, fmt.Errorf("put %s: %w", p.h.Short(), err)
		}
		return p.h, nil
	}
	return s.putVersion(ctx, tx, b, p.h, prev, nil, p.form, nil)
}

// putVersion is PutVersionFrom for content b of address h; pre, when not
// nil, is b's whole stored form compressed already. prevSized, when not
// nil, is set to prev's stored size if the queue's insert read it.
func (s *Store) putVersion(ctx context.Context, tx *index.Tx, b []byte, h, prev Hash, prevBytes []byte, pre *storedForm, prevSized *Sized) (Hash, error) {
	if prev == h {
		if err := s.putHashed(ctx, tx, h, b, pre); err != nil {
			return Hash{}, err
		}
		return h, nil
	}
	err := s.update(ctx, tx, func(tx *index.Tx) error {
		if ri, ok := s.hist.(rawInserter); ok && !s.opts.InlineDeltas && s.storesRaw(len(b)) {
			// Stored raw, small content too: its job compresses it
			// (with the newest dictionary) unless a later write's job
			// makes it a delta first. One statement inserts a version
			// not stored yet, and only one stored already is touched
			// after.
			inserted, err := ri.insertRaw(ctx, tx, Object{Kind: KindBlob, Hash: h, Size: int64(len(b)), Stored: int64(len(b)),
				Codec: CodecRaw, Data: b, Created: s.clock()})
			if err != nil {
				return err
			}
			raw := len(b)
			switch {
			case !inserted:
				if _, err := s.hist.Touch(ctx, tx, KindBlob, h, s.clock()); err != nil {
					return err
				}
				raw = 0
			case s.small(len(b)):
				s.countSmall()
			}
			return s.queueReencode(ctx, tx, h, prev, raw, prevSized)
		}
		stored, err := s.hist.Touch(ctx, tx, KindBlob, h, s.clock())
		if err != nil {
			return err
		}
		var fresh *newBlob
		switch {
		case stored:
		case !s.opts.InlineDeltas && s.storesRaw(len(b)):
			// its job compresses it (reencode.go), unless a dictionary
			// is in use (insertVersion settles it)
			fresh = &newBlob{storedForm: storedForm{data: b, codec: CodecRaw}}
		case pre != nil:
			fresh = &newBlob{storedForm: *pre}
		default:
			f, release := s.compressBlob(b)
			defer release()
			fresh = &newBlob{storedForm: f}
		}
		if !s.opts.InlineDeltas {
			if err := s.insertVersion(ctx, tx, s.hist, h, b, fresh, 0); err != nil {
				return err
			}
			raw := 0
			if fresh != nil && fresh.codec == CodecRaw {
				raw = len(fresh.data)
			}
			return s.queueReencode(ctx, tx, h, prev, raw, prevSized)
		}
		return s.extend(ctx, tx, s.hist, prev, prevBytes, h, b, fresh)
	})
	if err == nil && s.opts.InlineDeltas {
		// Queued writes leave the training to the jobs' runners, so that
		// no write waits for it.
		err = s.trainIfDue(ctx, tx)
	}
	if err != nil {
		return Hash{}, fmt.Errorf("put %s: delta of %s: %w", h.Short(), prev.Short(), err)
	}
	return h, nil
}

// newBlob is the stored form of a version PutVersion has yet to insert.
type newBlob struct {
	storedForm
}

// insertVersion inserts the new version h (plain bytes cur) at slot, or
// where the storage puts a new object for slot 0; for fresh nil it only
// moves h to slot.
func (s *Store) insertVersion(ctx context.Context, tx *index.Tx, hs HistoryStorage, h Hash, cur []byte, fresh *newBlob, slot Slot) error {
	if fresh == nil {
		// h is stored already (a queued job's version): it moves to slot
		// where the storage can move rows.
		if m, ok := hs.(rowStorage); ok && slot != 0 {
			return m.moveTo(ctx, tx, h, slot)
		}
		return nil
	}
	release, err := s.settleDict(ctx, tx, cur, &fresh.storedForm)
	defer release()
	if err != nil {
		return err
	}
	return hs.PutAt(ctx, tx, Object{Kind: KindBlob, Hash: h, Size: int64(len(cur)), Stored: int64(len(fresh.data)),
		Codec: fresh.codec, Base: fresh.base, Data: fresh.data, Created: s.clock()}, slot)
}

// version reads the blob at h with its history; ok is false if there is
// none.
func (s *Store) version(ctx context.Context, tx *index.Tx, hs HistoryStorage, h Hash) (Version, bool, error) {
	v, err := hs.Version(ctx, tx, h)
	if errors.Is(err, ErrNotFound) {
		return v, false, nil
	}
	return v, err == nil, err
}

// versionLender is a HistoryStorage that lends a version's stored bytes:
// fn sees Data in the storage's own buffer, valid only until it returns.
type versionLender interface {
	lendVersion(ctx context.Context, tx *index.Tx, h Hash, data bool, fn func(v *Version) error) error
}

// viewVersion is version calling use with the version while its Data may
// still be the storage's buffer (lent), so use can decode it without a
// copy; what use leaves in v is returned, so from lent Data it keeps
// only a copy of its own, or nothing. Without data the storage may leave
// Data out.
func (s *Store) viewVersion(ctx context.Context, tx *index.Tx, hs HistoryStorage, h Hash, data bool, use func(v *Version, lent bool)) (Version, bool, error) {
	l, ok := hs.(versionLender)
	if !ok {
		v, ok, err := s.version(ctx, tx, hs, h)
		if ok {
			use(&v, false)
		}
		return v, ok, err
	}
	var v Version
	err := l.lendVersion(ctx, tx, h, data, func(lent *Version) error {
		v = *lent
		use(&v, true)
		return nil
	})
	if errors.Is(err, ErrNotFound) {
		return Version{}, false, nil
	}
	return v, err == nil, err
}

// maxChainLimit is the largest MaxChain a store accepts. Reads guard
// against cycles with it rather than with the MaxChain of the current
// open, since the store may have been written with a larger one.
const maxChainLimit = 1000

func whole(c Codec) bool { return c == CodecRaw || c == CodecZstd }

// chainBound is the longest chain in a history whose newest version is n.
func chainBound(n int64) int {
	if n < 2 {
		return 0
	}
	return bits.Len64(uint64(n)) + bits.OnesCount64(uint64(n)) - 2
}

// parent is the version that version v of a history rests on for good.
func parent(v int64) int64 {
	m := int64(1) << (bits.TrailingZeros64(uint64(v)) + 1)
	return (v/m + 1) * m
}

// extend makes h (plain bytes cur) the newest version of prev's history,
// if the rules above allow it. fresh is h's stored form when no row holds
// h yet: extend inserts it, at prev's row position when prev alone is
// re-encoded; nil means h is stored already. prevBytes, when not nil, are
// prev's content as the caller read it.
func (s *Store) extend(ctx context.Context, tx *index.Tx, hs HistoryStorage, prev Hash, prevBytes []byte, h Hash, cur []byte, fresh *newBlob) error {
	if fresh == nil {
		// h was stored before: it may still start a history if it belongs
		// to none (a row of an earlier build), never join one.
		n, ok, err := s.version(ctx, tx, hs, h)
		if err != nil || !ok || !startsHistory(n) {
			return err
		}
	}
	return s.extendFrom(ctx, tx, hs, prev, prevBytes, false, h, cur, fresh)
}

// startsHistory reports whether stored version n belongs to no history
// and may start one.
func startsHistory(n Version) bool {
	return whole(n.Codec) && n.Gen == 0 && !n.Head && n.Depth == 0
}

// extendFrom is extend once a stored h (fresh nil) is known to start a
// history. verified says prevBytes are prev's content, read and hashed
// to its address, so prev's stored bytes are not read at all.
func (s *Store) extendFrom(ctx context.Context, tx *index.Tx, hs HistoryStorage, prev Hash, prevBytes []byte, verified bool, h Hash, cur []byte, fresh *newBlob) error {
	// prev's stored bytes are kept only raw (settleRaw compresses them),
	// and decoded only if the caller does not hold its content.
	var plain []byte
	var plainErr error
	p, ok, err := s.viewVersion(ctx, tx, hs, prev, !verified, func(v *Version, lent bool) {
		if verified {
			// raw, its stored bytes are its content
			v.Data = nil
			if v.Codec == CodecRaw {
				v.Data = prevBytes
			}
			return
		}
		if v.Codec == CodecZstd && (prevBytes == nil || int64(len(prevBytes)) != v.Size) {
			plain, plainErr = s.decode(ctx, prev, v.Codec, v.Data, v.Size, v.Base)
		}
		keepRaw(v, lent)
	})
	if err != nil {
		return err
	}
	if !ok || !whole(p.Codec) {
		// prev is not the whole newest version of anything: leave every
		// row as it is (compressed, if its write left it raw).
		if ok {
			if err := s.settleRaw(ctx, tx, hs, p); err != nil {
				return err
			}
		}
		return s.insertVersion(ctx, tx, hs, h, cur, fresh, 0)
	}
	// The history h extends, as its versions in chain order (oldest
	// first) and h's number in it.
	var members []Version
	gen := int64(2)
	switch {
	case p.Head:
		gen = p.Gen + 1
		if members, ok, err = s.openRows(ctx, tx, hs, p); err != nil {
			return err
		}
	case p.Gen == 0 && p.Depth == 0:
		p.Gen, ok = 1, true // prev starts a history
	default:
		// prev belongs to a history it does not lead, or is a keyframe
		// that chains of an earlier build's scheme end at (depth): its
		// chains are not this scheme's to bound.
		ok = false
	}
	members = append(members, p)
	if !ok || !linked(members) || chainBound(gen) > s.opts.MaxChain {
		// prev's history is left as it is, prev whole; h starts anew.
		if err := s.settleRaw(ctx, tx, hs, p); err != nil {
			return err
		}
		if err := s.insertVersion(ctx, tx, hs, h, cur, fresh, 0); err != nil {
			return err
		}
		return s.setHistory(ctx, tx, hs, prev, p.Gen, h, 1, nil)
	}

	// The members whose parent is h close onto it, and so does the last
	// member that stays open (its next one closes); they form a suffix,
	// decoded from prev upwards, each from the one below it, and
	// re-encoded against h.
	first := len(members) - 1
	for first > 0 && parent(members[first].Gen) == gen {
		first--
	}
	// prev's bytes are decoded only if the caller does not hold them;
	// either way every delta built from them proves it decodes back.
	if prevBytes != nil && int64(len(prevBytes)) == p.Size {
		plain = prevBytes
	} else {
		if p.Codec == CodecRaw {
			plain = p.Data
		}
		if plainErr != nil || Sum(plain) != prev {
			// corrupt: leave it for Verify to report, never build on it
			return s.insertVersion(ctx, tx, hs, h, cur, fresh, 0)
		}
	}
	// A member that differs from h by a few bytes here and there becomes
	// an edit (edit.go), proven to rebuild its verified bytes; the others
	// share one zstd codec against h, sized for the largest and built when
	// the first of them needs it. Members that would not fit in DeltaMax
	// with h get neither.
	var codec *deltaCodec
	var largest int64
	for _, m := range members[first:] {
		if m.Size+int64(len(cur)) <= int64(s.opts.DeltaMax) {
			largest = max(largest, m.Size)
		}
	}
	defer func() {
		if codec != nil {
			s.releaseDeltaCodec(codec)
		}
	}()
	deltaOf := func(m Version, old []byte) []byte {
		if m.Base == h || m.Size < 64 || m.Size+int64(len(cur)) > int64(s.opts.DeltaMax) {
			return nil
		}
		if d, ok := provenEdit(old, cur); ok {
			return d
		}
		if codec == nil && largest > 0 {
			c, err := s.deltaCodec(cur, largest)
			if err != nil {
				largest = 0
				return nil
			}
			codec = c
		}
		if codec == nil {
			return nil
		}
		return codec.encode(old, m.Hash)
	}
	// slot is prev's row position once prev is re-encoded, unless an
	// older member is re-encoded too (see the doc above).
	var slot Slot
	broken := -1
	for i := len(members) - 1; i >= first; i-- {
		m := members[i]
		if i < len(members)-1 {
			if plain, err = s.memberBytes(ctx, m, members[i+1].Hash, plain); err != nil {
				// m does not read, nor does any older member resting on
				// it: they leave the history, which goes on without them.
				broken = i
				break
			}
		}
		replaced, err := s.rebaseOnto(ctx, tx, hs, m, plain, h, deltaOf(m, plain))
		if err != nil {
			return err
		}
		switch {
		case !replaced:
		case i == len(members)-1:
			slot = m.Slot
		default:
			slot = 0
		}
	}
	var stillOpen []Hash
	for i, m := range members {
		if i > broken && parent(m.Gen) != gen {
			stillOpen = append(stillOpen, m.Hash)
		}
	}
	if err := s.insertVersion(ctx, tx, hs, h, cur, fresh, slot); err != nil {
		return err
	}
	return s.setHistory(ctx, tx, hs, prev, p.Gen, h, gen, stillOpen)
}

// linked reports whether members (the open versions, oldest first, then
// the newest) form the chain the scheme builds: numbers rising, every open
// version's parent still to come, and each open version stored whole or as
// a delta against the next. A list that names a row which has since left
// the history (collected, then stored again by another) fails it.
func linked(members []Version) bool {
	newest := members[len(members)-1]
	for i, m := range members[:len(members)-1] {
		next := members[i+1]
		if m.Gen >= next.Gen || parent(m.Gen) <= newest.Gen {
			return false
		}
		if !whole(m.Codec) && (m.Codec != CodecDelta || m.Base != next.Hash) {
			return false
		}
	}
	return true
}

// openRows reads the versions head's open list names, in its order. A
// version gc has collected since is skipped: nothing still stored rests on
// it, or gc would have kept it. ok is false if the list is damaged or names
// a version that belongs to no history.
func (s *Store) openRows(ctx context.Context, tx *index.Tx, hs HistoryStorage, head Version) ([]Version, bool, error) {
	if head.Unreadable {
		return nil, false, nil
	}
	var rows []Version
	for _, o := range head.Opens {
		r, ok, err := s.version(ctx, tx, hs, o)
		switch {
		case err != nil:
			return nil, false, err
		case !ok:
			continue
		case r.Gen == 0:
			return nil, false, nil
		}
		rows = append(rows, r)
	}
	return rows, true, nil
}

// memberBytes returns the plain bytes of member m of a history, using
// below, the plain bytes of the member next in the chain (next), when m is
// a delta against it.
func (s *Store) memberBytes(ctx context.Context, m Version, next Hash, below []byte) ([]byte, error) {
	var b []byte
	var err error
	switch {
	case whole(m.Codec):
		b, err = s.decode(ctx, m.Hash, m.Codec, m.Data, m.Size, m.Base)
	case m.Codec == CodecDelta && m.Base == next:
		b, err = s.applyDelta(m.Data, below, m.Size)
	default:
		b, err = s.ReadAll(ctx, m.Hash)
	}
	if err == nil && Sum(b) != m.Hash {
		err = corrupt("put", m.Hash, "content does not hash to its address")
	}
	return b, err
}

// rebaseOnto stores member m (plain bytes old) as delta, its delta
// against base (nil when there is none: the two would not fit in DeltaMax
// together, or it did not decode back), when that is a quarter smaller
// than its whole form; a member stored as a delta against
// another base that cannot be re-encoded so is stored whole instead, since
// its chain must no longer run through its old base.
func (s *Store) rebaseOnto(ctx context.Context, tx *index.Tx, hs HistoryStorage, m Version, old []byte, base Hash, delta []byte) (bool, error) {
	if m.Base == base {
		return false, nil
	}
	if m.Codec == CodecRaw {
		// Its write left it raw (a later write replaced it before its
		// job ran): a delta of a near copy is a few bytes, which no
		// whole form beats; otherwise the delta must beat the
		// compressed form as it would beat a stored one.
		if delta != nil && int64(len(delta)) <= m.Size/rawDeltaRatio {
			return true, s.replaceRow(ctx, tx, hs, m, CodecDelta, base, delta)
		}
		f, release, err := s.wholeForm(ctx, tx, old)
		defer release()
		if err != nil {
			return false, err
		}
		if delta != nil && int64(len(delta)) <= int64(len(f.data))-int64(len(f.data))/4 {
			return true, s.replaceRow(ctx, tx, hs, m, CodecDelta, base, delta)
		}
		if rs, ok := hs.(rowStorage); ok && f.codec != CodecRaw {
			return false, rs.compressRaw(ctx, tx, m.Hash, f)
		}
		return false, nil
	}
	if whole(m.Codec) {
		if delta == nil || int64(len(delta)) > m.Stored-m.Stored/4 {
			return false, nil // stays whole, which ends every chain through it
		}
		return true, s.replaceRow(ctx, tx, hs, m, CodecDelta, base, delta)
	}
	// A delta's row was stored whole first, and saved tracks every change
	// since, so stored + saved is the size of its whole form.
	if w := m.Stored + m.Saved; delta != nil && int64(len(delta)) <= max(m.Stored, w-w/4) {
		return true, s.replaceRow(ctx, tx, hs, m, CodecDelta, base, delta)
	}
	f, release, err := s.wholeForm(ctx, tx, old)
	defer release()
	if err != nil {
		return false, err
	}
	if delta != nil && int64(len(delta)) <= int64(len(f.data))-int64(len(f.data))/4 {
		return true, s.replaceRow(ctx, tx, hs, m, CodecDelta, base, delta)
	}
	return true, s.replaceRow(ctx, tx, hs, m, f.codec, f.base, f.data)
}

// rawDeltaRatio: a delta at most 1/rawDeltaRatio of a raw version's size
// replaces it without the version being compressed first to compare.
const rawDeltaRatio = 32

// replaceRow stores m's content anew as data in codec (against base for a
// delta).
func (s *Store) replaceRow(ctx context.Context, tx *index.Tx, hs HistoryStorage, m Version, codec Codec, base Hash, data []byte) error {
	return hs.Reencode(ctx, tx, m.Hash, codec, base, data)
}

// setHistory records prev (number pgen) as no longer the newest version of
// its history and h as the newest of one, with number gen and the open
// versions opens, oldest first.
func (s *Store) setHistory(ctx context.Context, tx *index.Tx, hs HistoryStorage, prev Hash, pgen int64, h Hash, gen int64, opens []Hash) error {
	if err := hs.SetHistory(ctx, tx, prev, History{Gen: pgen}, time.Time{}); err != nil {
		return err
	}
	return hs.SetHistory(ctx, tx, h, History{Gen: gen, Head: true, Opens: opens}, s.clock())
}

// chainOf returns h and the bases it rests on, in order, ending at a
// whole blob. It fails with ErrCorrupt if a link is missing, a chain ends
// on a chunked blob, or it is longer than any store writes (a cycle).
func (s *Store) chainOf(ctx context.Context, tx *index.Tx, h Hash) ([]Hash, error) {
	chain := []Hash{h}
	for len(chain) <= maxChainLimit+1 {
		o, err := s.st.Stat(ctx, tx, KindBlob, h)
		if errors.Is(err, ErrNotFound) {
			return nil, corrupt("stat", chain[0], "delta base %s is missing", h)
		}
		if err != nil {
			return nil, err
		}
		if o.Codec != CodecDelta {
			if !whole(o.Codec) {
				return nil, corrupt("stat", chain[0], "delta base %s is stored as %s, not whole", h, o.Codec)
			}
			return chain, nil
		}
		h = o.Base
		chain = append(chain, h)
	}
	return nil, corrupt("stat", chain[0], "delta chain is longer than any store writes (%d): a cycle", maxChainLimit)
}

// window returns the zstd window that covers a dictionary of n bytes and
// content of m bytes, so matches anywhere in the base are reachable.
func window(n, m int) int {
	w := n + m
	w = max(w, zstd.MinWindowSize)
	return 1 << bits.Len(uint(w-1))
}

// deltaCodec encodes and decodes deltas against one base, so that the
// versions a write re-encodes against the new version index its bytes as
// a dictionary once rather than once each.
type deltaCodec struct {
	enc    *zstd.Encoder
	base   []byte
	window int
	// decs decodes the proof of every delta.
	decs *deltaDecoders
	// out and back are encode's buffers, kept across bases: a delta of
	// a near copy is a few bytes, the proof decodes a whole version.
	out, back []byte
}

// maxPooledWindow is the largest delta window whose codec is kept for the
// next base: an idle codec holds its last base and a window of history.
const maxPooledWindow = 2 << 20

// deltaCodecs keeps an idle codec for each of the maxIdleCodecs window
// sizes used last (a window cannot change when a codec is given a new
// base), so a stream of jobs reuses the encoder's tables and buffers
// instead of allocating and zeroing them for every base.
type deltaCodecs struct {
	mu   sync.Mutex
	idle map[int]*deltaCodec
	// used lists the windows of idle, the one released last at the end.
	used []int
}

// maxIdleCodecs bounds the idle codecs kept. A file's versions share a
// window size until it doubles, so the jobs of a session's files reuse a
// couple of codecs; each holds its window of history and its tables (up
// to 5 MiB at the largest pooled window), all live heap that a process
// under a soft memory limit would otherwise collect around.
const maxIdleCodecs = 2

// deltaCodec returns a codec for contents of up to maxContent bytes
// against base, an idle one given base when there is one; the caller
// hands it back with releaseDeltaCodec.
func (s *Store) deltaCodec(base []byte, maxContent int64) (*deltaCodec, error) {
	w := window(len(base), int(capHint(maxContent, maxInline)))
	s.deltas.mu.Lock()
	c := s.deltas.idle[w]
	if c != nil {
		delete(s.deltas.idle, w)
		s.deltas.used = slices.DeleteFunc(s.deltas.used, func(x int) bool { return x == w })
	}
	s.deltas.mu.Unlock()
	if c == nil {
		return newDeltaCodec(base, maxContent, &s.deltaDecs)
	}
	if err := c.enc.ResetWithOptions(nil, zstd.WithEncoderDictRaw(0, base)); err != nil {
		c.close()
		return newDeltaCodec(base, maxContent, &s.deltaDecs)
	}
	c.base = base
	return c, nil
}

// releaseDeltaCodec keeps c for the next base of its window, or closes it.
func (s *Store) releaseDeltaCodec(c *deltaCodec) {
	if cap(c.back) > maxPooledWindow {
		c.back = nil
	}
	if cap(c.out) > maxPooledWindow {
		c.out = nil
	}
	if c.window > maxPooledWindow {
		c.close()
		return
	}
	var drop []*deltaCodec
	s.deltas.mu.Lock()
	if s.deltas.idle == nil {
		s.deltas.idle = map[int]*deltaCodec{}
	}
	if old := s.deltas.idle[c.window]; old != nil {
		drop = append(drop, old)
		s.deltas.used = slices.DeleteFunc(s.deltas.used, func(x int) bool { return x == c.window })
	}
	s.deltas.idle[c.window] = c
	s.deltas.used = append(s.deltas.used, c.window)
	for len(s.deltas.used) > maxIdleCodecs {
		w := s.deltas.used[0]
		s.deltas.used = s.deltas.used[1:]
		drop = append(drop, s.deltas.idle[w])
		delete(s.deltas.idle, w)
	}
	s.deltas.mu.Unlock()
	for _, d := range drop {
		d.close()
	}
}

// newDeltaCodec returns a codec for contents of up to maxContent bytes
// against base, proving its deltas with decs; the caller closes it.
func newDeltaCodec(base []byte, maxContent int64, decs *deltaDecoders) (*deltaCodec, error) {
	w := window(len(base), int(capHint(maxContent, maxInline)))
	enc, err := zstd.NewWriter(nil,
		zstd.WithEncoderDictRaw(0, base),
		// The fastest level: a delta against a near copy is mostly long
		// matches, which it finds as well, and it indexes the dictionary
		// in a fraction of the memory a higher level clears and fills
		// for every base.
		zstd.WithEncoderLevel(zstd.SpeedFastest),
		zstd.WithEncoderConcurrency(1),
		zstd.WithWindowSize(w),
		zstd.WithEncoderCRC(false),
		zstd.WithZeroFrames(true))
	if err != nil {
		return nil, err
	}
	return &deltaCodec{enc: enc, base: base, window: w, decs: decs}, nil
}

// encode returns content as a delta against the base, proven to decode
// back to bytes whose address is h; nil if it does not.
func (c *deltaCodec) encode(content []byte, h Hash) []byte {
	d := c.enc.EncodeAll(content, c.out[:0])
	c.out = d[:0]
	// Grown as append grows, so the versions of a file that grows a
	// little at each write do not each allocate a buffer.
	c.back = slices.Grow(c.back[:0], len(content))
	back, err := c.decs.decode(c.back[:0], d, c.base, c.window)
	c.back = back[:0]
	if err != nil || Sum(back) != h {
		return nil
	}
	return bytes.Clone(d)
}

func (c *deltaCodec) close() { c.enc.Close() }

// applyDelta returns the plain bytes of data, a delta of size bytes
// against base.
func (s *Store) applyDelta(data, base []byte, size int64) ([]byte, error) {
	if isEdit(data) {
		return decodeEdit(data, base, size)
	}
	w := window(len(base), int(capHint(size, maxInline)))
	return s.deltaDecs.decode(make([]byte, 0, capHint(size, maxInline)), data, base, w)
}

// deltaDecoders keeps a zstd decoder for delta reads and for the proofs
// of new deltas: a new decoder allocates its block buffers for every
// delta it decodes.
type deltaDecoders struct {
	mu   sync.Mutex
	idle *zstd.Decoder // nil when none is kept
}

// decode appends to dst the plain bytes of data, a delta against base
// with a zstd window of at most maxWindow.
func (d *deltaDecoders) decode(dst, data, base []byte, maxWindow int) ([]byte, error) {
	d.mu.Lock()
	dec := d.idle
	d.idle = nil
	d.mu.Unlock()
	if dec == nil {
		var err error
		if dec, err = zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderMaxMemory(uint64(maxInline))); err != nil {
			return nil, err
		}
	}
	if err := dec.ResetWithOptions(nil, zstd.WithDecoderDictRaw(0, base), zstd.WithDecoderMaxWindow(uint64(maxWindow))); err != nil {
		dec.Close()
		return nil, err
	}
	b, err := dec.DecodeAll(data, dst)
	// An idle decoder keeps no base alive: its options and the history
	// of its frame (which a decode of nothing resets) drop it.
	if dec.ResetWithOptions(nil, zstd.WithDecoderDictRaw(0, nil)) != nil {
		dec.Close()
		return b, err
	}
	dec.DecodeAll(nil, nil)
	d.mu.Lock()
	if d.idle == nil {
		d.idle, dec = dec, nil
	}
	d.mu.Unlock()
	if dec != nil {
		dec.Close()
	}
	return b, err
}

// deltaChain is a delta blob's chain as readChain reads it: the deltas
// from the blob down, then the whole blob they rest on, decoded.
type deltaChain struct {
	links []Object // the deltas, each with its stored bytes
	// base is the blob they rest on, without its stored bytes; plain
	// its plain bytes (not verified yet) once decoded, or err its decode
	// error.
	base    Object
	decoded bool
	plain   []byte
	err     error
}

// decodeDelta returns the plain bytes of the delta blob h (stored as data
// against base). It reads the bases down to a whole blob in one read
// transaction, so a writer and gc working meanwhile cannot make the chain
// look broken, then applies the deltas back up, verifying every version
// on the way: a corrupted or missing base fails with ErrCorrupt naming
// that base.
func (s *Store) decodeDelta(ctx context.Context, h Hash, data []byte, size int64, base Hash) ([]byte, error) {
	var chain deltaChain
	err := s.db.View(ctx, func(tx *index.Tx) error {
		var err error
		chain, err = s.readChain(ctx, tx, Object{Kind: KindBlob, Hash: h, Size: size, Codec: CodecDelta, Base: base, Data: data})
		return err
	})
	if err != nil {
		return nil, wrapOp("get", h, err)
	}
	return s.applyChain(h, chain)
}

// readChain reads, in tx, the objects from the delta blob row down its
// bases to the whole blob it rests on, which it decodes straight from the
// storage's buffer.
func (s *Store) readChain(ctx context.Context, tx *index.Tx, row Object) (deltaChain, error) {
	h := row.Hash
	c := deltaChain{links: []Object{row}}
	for cur := row.Base; ; {
		if len(c.links) > maxChainLimit+1 {
			return deltaChain{}, corrupt("get", h, "delta chain is longer than any store can write (%d): a cycle through base %s", maxChainLimit, cur)
		}
		var link Object
		err := s.st.Get(ctx, tx, KindBlob, cur, func(o Object) error {
			link = o
			link.Data = nil
			if decodesAlone(o) {
				c.plain, c.err = s.ownDecode(ctx, o)
				c.decoded = true
			} else {
				link.Data = cloneData(o.Data) // a delta is small
			}
			return nil
		})
		if errors.Is(err, ErrNotFound) {
			return deltaChain{}, corrupt("get", h, "delta base %s is missing", cur)
		}
		if err != nil {
			return deltaChain{}, fmt.Errorf("base %s: %w", cur.Short(), err)
		}
		if link.Codec != CodecDelta {
			if whole(link.Codec) && !c.decoded {
				c.plain, c.err = s.decodeIn(ctx, tx, link.Hash, link.Codec, link.Data, link.Size, link.Base)
				c.decoded = true
			}
			c.base = link
			return c, nil
		}
		c.links = append(c.links, link)
		cur = link.Base
	}
}

// applyChain verifies the whole blob a chain rests on and applies the
// deltas back up to the first, verifying every version.
func (s *Store) applyChain(h Hash, c deltaChain) ([]byte, error) {
	last := c.base
	if !whole(last.Codec) {
		return nil, corrupt("get", h, "delta base %s is stored as %s, not whole", last.Hash, last.Codec)
	}
	plain, err := c.plain, c.err
	if err == nil && Sum(plain) != last.Hash {
		err = corrupt("get", last.Hash, "content does not hash to its address")
	}
	if err != nil {
		return nil, corrupt("get", h, "delta base %s: %v", last.Hash, err)
	}
	for i := len(c.links) - 1; i >= 0; i-- {
		l := c.links[i]
		next, err := s.applyDelta(l.Data, plain, l.Size)
		if err == nil && Sum(next) != l.Hash {
			err = errors.New("content does not hash to its address")
		}
		if err != nil {
			if i == 0 {
				base := last.Hash
				if len(c.links) > 1 {
					base = c.links[1].Hash
				}
				return nil, corrupt("get", h, "delta against %s: %v", base, err)
			}
			return nil, corrupt("get", h, "delta base %s: %v", l.Hash, err)
		}
		plain = next
	}
	return plain, nil
}
