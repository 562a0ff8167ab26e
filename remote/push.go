package remote

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/wserr"
)

// upload writes objs to the object store as one pack (or, chunked, as an
// index of chunk lists alone) and then its index object, and returns the
// index. Both keys name their content, so an upload that a failure cut
// short is finished by the next one, and a 412 on either is success.
func (s *Storage) upload(ctx context.Context, objs []cas.Object, chunked bool, device string) (packIndex, error) {
	var idx packIndex
	if chunked {
		idx = packIndex{Version: indexVersion}
		for _, o := range objs {
			if err := tooManyChunks(o); err != nil {
				return packIndex{}, err
			}
			idx.Objects = append(idx.Objects, newEntry(o))
		}
	} else {
		var pack []byte
		pack, idx = buildPack(objs)
		if _, err := s.b.put(ctx, idx.Pack, pack); err != nil {
			return packIndex{}, err
		}
	}
	idx.Device, idx.Pushed = device, nanos(s.opts.Now())
	b, key := encodeIndex(idx)
	if _, err := s.b.put(ctx, key, b); err != nil {
		return packIndex{}, err
	}
	return idx, nil
}

// tooManyChunks refuses a chunked blob of more chunks than an index entry
// lists (workspace.size_limit_exceeded): no reader takes in a longer list.
func tooManyChunks(o cas.Object) error {
	if len(o.Chunks) <= maxEntryChunks {
		return nil
	}
	return wserr.New(wserr.SizeLimitExceeded, "push", o.Hash.String(),
		"a file of %d bytes in %d chunks, more than an index of the object store lists for one file (%d): it is not pushed", o.Size, len(o.Chunks), maxEntryChunks)
}

// PushStats says what a Push did.
type PushStats struct {
	// Packs and Objects count the packs written and the objects they
	// hold; Chunked counts the chunked blobs whose lists were indexed.
	Packs   int `json:"packs"`
	Objects int `json:"objects"`
	Chunked int `json:"chunked"`
	// Bytes counts the stored bytes uploaded.
	Bytes int64 `json:"bytes"`
	// Pending counts what is left to push when Push failed; 0 when it
	// succeeded, though what was written meanwhile, or needs what was,
	// may wait for the next Push (Storage.Pending counts it).
	Pending int `json:"pending"`
}

type pending struct {
	Kind   cas.Kind `db:"kind"`
	Hash   cas.Hash `db:"hash"`
	Stored int64    `db:"stored"`
	Codec  int      `db:"codec"`
	Base   []byte   `db:"base"` // the object it is compressed against, or nil
}

// Push uploads every object recorded but not pushed yet: single objects
// gathered into packs of about PackSize, chunks before the chunked blobs
// that list them. Each pack is recorded as pushed in its own transaction
// once it and its index are on the object store, so a Push that fails
// (ErrUnavailable, ctx) keeps what landed, and the next one uploads only
// the rest. Objects stay in the cache; Evict drops them. Every index
// object names the store's device (Device, made here if the store has
// none yet), so a reclaim keeps the pack until this store has published
// a sync segment since (its object set then says whether it still
// records the objects).
//
// An object written while Push runs may be left for the next one, and so
// is one whose chunks or base (a dictionary, a delta base) it did not
// push: no other device learns of an object it cannot read whole.
//
// With something to push, Push holds a push lock on the object store
// (docs/remote.md, "Locks"), so that no reclaim removes a pack it counts
// on; it fails with store.busy wrapping ErrLocked, uploading nothing,
// while a reclaim holds its lease. Nothing to push costs no request.
func (s *Storage) Push(ctx context.Context, db *index.DB) (PushStats, error) {
	return s.pushAll(ctx, db, true)
}

// PushInSync is Push for a caller that holds the device's sync lock
// (LockSync) through the call, which keeps reclaims away as a push lock
// does: it takes no lock of its own.
func (s *Storage) PushInSync(ctx context.Context, db *index.DB) (PushStats, error) {
	return s.pushAll(ctx, db, false)
}

// pushPage is how many pending objects Push reads at a time.
const pushPage = 1024

// pushClasses is the order in which Push reads pending objects: chunks
// before blobs (a chunked blob's list names chunks), and in each kind the
// objects that name no base before those that do (a dictionary before
// the blobs compressed with it), so a push that stops part way never
// leaves another device an object it cannot read.
var pushClasses = []struct {
	kind   cas.Kind
	noBase bool
}{{cas.KindChunk, true}, {cas.KindChunk, false}, {cas.KindBlob, true}, {cas.KindBlob, false}}

// maxPackObjects bounds the objects of one pack, whatever their size, so
// that its index, which a push builds and reclaim and pull read whole,
// stays small: 100,000 tiny objects in one 8 MiB pack made a push hold
// hundreds of MB.
const maxPackObjects = 4096

func (s *Storage) pushAll(ctx context.Context, db *index.DB, lock bool) (st PushStats, err error) {
	s.push.Lock()
	defer s.push.Unlock()
	dev, err := Device(ctx, db)
	if err != nil {
		return st, fmt.Errorf("push: %w", err)
	}
	defer func() {
		if err != nil {
			if n, perr := s.Pending(context.WithoutCancel(ctx), db); perr == nil {
				st.Pending = n
			}
			err = fmt.Errorf("push: %w", err)
		}
	}()
	n, err := s.Pending(ctx, db)
	if err != nil || n == 0 {
		return st, err
	}
	if lock {
		var release func(context.Context, error) error
		if release, err = s.lockPush(ctx, dev); err != nil {
			return st, err
		}
		defer func() {
			if rerr := release(ctx, err); rerr != nil && err == nil {
				err = fmt.Errorf("release the lock: %w", rerr)
			}
		}()
	}
	// A pack is gathered across pages and classes; chunked blobs' lists go
	// in groups of up to 1,000, each after the packs before it.
	var cur, chunked []pending
	pushed := seenBases{} // bases found on the object store
	var refused error     // the first blob not pushed for its length
	var size int64
	flush := func(g []pending) error {
		if len(g) == 0 {
			return nil
		}
		n, bytes, tooLong, err := s.pushGroup(ctx, db, g, dev, pushed)
		if err != nil {
			return err
		}
		refused = cmp.Or(refused, tooLong)
		if g[0].Kind == cas.KindBlob && cas.Codec(g[0].Codec) == cas.CodecChunked {
			st.Chunked += n
		} else if n > 0 {
			st.Packs++
			st.Objects += n
			st.Bytes += bytes
		}
		return nil
	}
	flushChunked := func() error {
		if err := flush(cur); err != nil {
			return err
		}
		cur, size = nil, 0
		err := flush(chunked)
		chunked = nil
		return err
	}
	for _, c := range pushClasses {
		after := []byte{} // the last hash read in this class
		for {
			var page []pending
			if err := db.View(ctx, func(tx *index.Tx) error {
				return index.Translate(tx.SelectContext(ctx, &page, `SELECT kind, hash, stored, codec, base FROM remote_objects INDEXED BY remote_objects_pending
					WHERE pack IS NULL AND kind = ? AND (base IS NULL) = ? AND hash > ? ORDER BY hash LIMIT ?`,
					int(c.kind), c.noBase, after, pushPage))
			}); err != nil {
				return st, err
			}
			for _, p := range page {
				if p.Kind == cas.KindBlob && cas.Codec(p.Codec) == cas.CodecChunked {
					if chunked = append(chunked, p); len(chunked) == 1000 {
						if err := flushChunked(); err != nil {
							return st, err
						}
					}
					continue
				}
				if len(cur) > 0 && (size+p.Stored > int64(s.opts.PackSize) || len(cur) == maxPackObjects) {
					if err := flush(cur); err != nil {
						return st, err
					}
					cur, size = nil, 0
				}
				cur = append(cur, p)
				size += p.Stored
			}
			if len(page) < pushPage {
				break
			}
			after = page[len(page)-1].Hash[:]
		}
	}
	if err := flushChunked(); err != nil {
		return st, err
	}
	return st, refused
}

// pushGroup uploads one group and records it, skipping objects deleted
// since Push listed them. A chunked blob of more than maxEntryChunks
// chunks is left out, and refused (workspace.size_limit_exceeded) names it:
// no index object lists more.
func (s *Storage) pushGroup(ctx context.Context, db *index.DB, g []pending, device string, pushed seenBases) (n int, bytes int64, refused, err error) {
	chunked := g[0].Kind == cas.KindBlob && cas.Codec(g[0].Codec) == cas.CodecChunked
	group := make(map[cas.Hash]bool, len(g))
	for _, p := range g {
		if p.Kind == cas.KindBlob {
			group[p.Hash] = true
		}
	}
	var objs []cas.Object
	if err := db.View(ctx, func(tx *index.Tx) error {
		for _, p := range g {
			if ok, err := ready(ctx, tx, p, group, pushed); err != nil || !ok {
				if err != nil {
					return err
				}
				continue // a later push takes it, after what it needs
			}
			err := s.Get(ctx, tx, p.Kind, p.Hash, func(o cas.Object) error {
				if err := tooManyChunks(o); err != nil {
					refused = cmp.Or(refused, err)
					return nil // left pending
				}
				o.Data = nonNil(append([]byte(nil), o.Data...))
				objs = append(objs, o)
				bytes += int64(len(o.Data))
				return nil
			})
			if err != nil && !errors.Is(err, cas.ErrNotFound) {
				return err
			}
		}
		return nil
	}); err != nil {
		return 0, 0, nil, err
	}
	// Chunked blobs' lists go in index objects of at most maxIndexChunks
	// chunks.
	for i := 0; i < len(objs); {
		j, chunks := i+1, len(objs[i].Chunks)
		for chunked && j < len(objs) && chunks+len(objs[j].Chunks) <= maxIndexChunks {
			chunks += len(objs[j].Chunks)
			j++
		}
		if !chunked {
			j = len(objs)
		}
		if err := s.uploadGroup(ctx, db, objs[i:j], chunked, device); err != nil {
			return 0, 0, nil, err
		}
		i = j
	}
	return len(objs), bytes, refused, nil
}

// uploadGroup uploads objs (upload) and records them as pushed.
func (s *Storage) uploadGroup(ctx context.Context, db *index.DB, objs []cas.Object, chunked bool, device string) error {
	idx, err := s.upload(ctx, objs, chunked, device)
	if err != nil {
		return err
	}
	_, ikey := encodeIndex(idx)
	return db.Update(ctx, func(tx *index.Tx) error {
		for _, e := range idx.Objects {
			if _, err := tx.ExecContext(ctx, `UPDATE remote_objects SET pack = ?, off = ?, sum = ? WHERE kind = ? AND hash = ? AND pack IS NULL`,
				idx.Pack, e.Off, e.Sum, int(e.Kind), e.Hash); err != nil {
				return index.Translate(err)
			}
		}
		return tookIn(ctx, tx, ikey)
	})
}

// ready reports whether p may be pushed in a group of the blobs group: a
// chunked blob's list once each of its chunks is on the object store, an
// object compressed against another (a dictionary, a delta base) once
// that one is, or is in the group. Push reads the classes of pending
// objects one after another, so an object written meanwhile may be read
// before what it needs; it waits for a later push, and no other device
// learns of an object it cannot read. pushed remembers the bases found
// on the object store.
func ready(ctx context.Context, tx *index.Tx, p pending, group map[cas.Hash]bool, pushed seenBases) (bool, error) {
	if len(p.Base) == len(cas.Hash{}) {
		base := cas.Hash(p.Base)
		if !group[base] && !pushed[base] {
			var n int
			if err := tx.GetContext(ctx, &n, `SELECT count(*) FROM remote_objects WHERE kind = ? AND hash = ? AND pack IS NULL`,
				int(cas.KindBlob), base); err != nil {
				return false, index.Translate(err)
			}
			if n > 0 {
				return false, nil
			}
			pushed.add(base)
		}
	}
	if p.Kind == cas.KindBlob && cas.Codec(p.Codec) == cas.CodecChunked {
		var n int
		if err := tx.GetContext(ctx, &n, `SELECT count(*) FROM remote_chunks c JOIN remote_objects o ON o.kind = ? AND o.hash = c.chunk
			WHERE c.blob = ? AND o.pack IS NULL`, int(cas.KindChunk), p.Hash); err != nil {
			return false, index.Translate(err)
		}
		if n > 0 {
			return false, nil
		}
	}
	return true, nil
}

// seenBases is a set of the delta bases (and dictionaries) a push found on
// the object store, so that the objects compressed against one look it up
// once. It is a cache: past maxSeenBases it forgets them all, so a first
// push of a large store holds a bounded set, and a base forgotten costs
// one lookup again.
type seenBases map[cas.Hash]bool

// maxSeenBases bounds a seenBases: about 3 MiB of entries.
const maxSeenBases = 1 << 16

func (s seenBases) add(h cas.Hash) {
	if len(s) >= maxSeenBases {
		clear(s)
	}
	s[h] = true
}

// Pending returns how many objects are recorded but not pushed.
func (s *Storage) Pending(ctx context.Context, db *index.DB) (int, error) {
	var n int
	err := db.View(ctx, func(tx *index.Tx) error {
		return index.Translate(tx.GetContext(ctx, &n, `SELECT count(*) FROM remote_objects INDEXED BY remote_objects_pending WHERE pack IS NULL`))
	})
	return n, err
}

// PullStats says what a Pull did.
type PullStats struct {
	// Indexes counts the index objects read, Objects the objects they
	// added to the local index.
	Indexes int `json:"indexes"`
	Objects int `json:"objects"`
	// Damaged names the index objects that did not read (bytes that do
	// not hash to the key, or not an index), skipped: not taken in, so a
	// later pull that meets one reads it again.
	Damaged []string `json:"damaged,omitempty"`
}

// Pull takes in the index objects of the object store this store has not
// read yet: every object another device pushed becomes readable here
// (fetched from its pack on first read). An object recorded here already
// keeps its record. A damaged index object is skipped and named in
// PullStats.Damaged: what it lists is in its pack too, which Recover
// reads when an archive needs an object only it lists.
func (s *Storage) Pull(ctx context.Context, db *index.DB) (PullStats, error) {
	s.push.Lock()
	defer s.push.Unlock()
	return s.pullIndexes(ctx, db, func(fn func(key string) error) error {
		return s.b.list(ctx, indexDir, "", func(key string, _ time.Time) error { return fn(key) })
	})
}

// PullIndexes takes in the index objects keys names ("index/HASH", as a
// segment header lists them) that this store has not read yet, as Pull
// does, without listing the object store. A key that does not name an
// index object is store.corrupt.
func (s *Storage) PullIndexes(ctx context.Context, db *index.DB, keys []string) (PullStats, error) {
	s.push.Lock()
	defer s.push.Unlock()
	for _, k := range keys {
		if h, ok := strings.CutPrefix(k, indexDir); !ok || !isHash(h) {
			return PullStats{}, fmt.Errorf("pull: %w", corrupt(k, "not the key of an index object"))
		}
	}
	return s.pullIndexes(ctx, db, func(fn func(key string) error) error {
		for _, k := range keys {
			if err := fn(k); err != nil {
				return err
			}
		}
		return nil
	})
}

func isHash(s string) bool {
	_, err := cas.ParseHash(s)
	return err == nil
}

// pullIndexes takes in the index objects each calls its function with
// (a listing of index/, page by page, or a header's keys) that the store
// has not read yet.
//
// An entry is recorded only once what it is read through is: its chunks,
// and the base of a delta (or dictionary), which may be listed by a later
// index object. So a pull cut off at any point leaves every recorded
// object readable. The first sweep, made as the keys go by, records the
// entries that stand alone (whole blobs and chunks), each later one those
// whose chunks and base are recorded by then, taking in each index object
// once all its entries are; a sweep that records nothing takes in the
// rest as they are (an object no index lists stays missing, as it would
// have). The keys left after a sweep wait in a scratch database, in key
// order, and each sweep reads their index objects again, so neither the
// keys nor the index objects are held in memory.
func (s *Storage) pullIndexes(ctx context.Context, db *index.DB, each func(fn func(key string) error) error) (PullStats, error) {
	var st PullStats
	var sc *index.Scratch
	defer func() { sc.Close() }()
	// next returns the map of the keys the next sweep reads, made in sc
	// (opened on first need: most pulls leave none).
	next := func() (*index.ScratchMap, error) {
		if sc == nil {
			var err error
			if sc, err = index.OpenScratch(ctx); err != nil {
				return nil, err
			}
		}
		return sc.NewMap(ctx)
	}
	var left *index.ScratchMap
	var leftN int64
	err := each(func(key string) error {
		var seen int
		err := db.View(ctx, func(tx *index.Tx) error {
			return tx.GetContext(ctx, &seen, `SELECT count(*) FROM remote_cache WHERE kind = 2 AND hash = ?`, idxHash(key))
		})
		if err != nil || seen > 0 {
			return index.Translate(err)
		}
		again, _, err := s.takeIn(ctx, db, &st, key, true, false)
		if err != nil || !again {
			return err
		}
		if left == nil {
			if left, err = next(); err != nil {
				return err
			}
		}
		leftN++
		_, err = left.Add(ctx, []byte(key), 0)
		return err
	})
	if err != nil {
		return st, fmt.Errorf("pull: %w", err)
	}
	// After a later sweep that recorded nothing, the last takes in what
	// is left.
	last := false
	for leftN > 0 {
		todo := left
		left, leftN = nil, 0
		progress := false
		err := todo.Each(ctx, func(k []byte, _ int64) error {
			again, added, err := s.takeIn(ctx, db, &st, string(k), false, last)
			progress = progress || added > 0
			if err != nil || !again {
				return err
			}
			if left == nil {
				if left, err = next(); err != nil {
					return err
				}
			}
			leftN++
			_, err = left.Add(ctx, k, 0)
			return err
		})
		if err != nil {
			return st, fmt.Errorf("pull: %w", err)
		}
		last = !progress
	}
	return st, nil
}

// takeIn reads the index object at key and records the entries a sweep
// may (readable), taking the index object in once all of them are. It
// reports whether a later sweep must read it again, and how many objects
// it added; a damaged one is named in st.Damaged and not read again, one
// gone (reclaimed since it was listed or named: no device uses its
// objects) is passed over.
func (s *Storage) takeIn(ctx context.Context, db *index.DB, st *PullStats, key string, first, last bool) (again bool, added int, err error) {
	idx, err := s.fetchIndex(ctx, key)
	if errors.Is(err, ErrMissing) {
		return false, 0, nil
	}
	if wserr.CodeOf(err) == wserr.Corrupt {
		// Not taken in, nor read again in a later sweep.
		st.Damaged = append(st.Damaged, key)
		return false, 0, nil
	}
	if err != nil {
		return false, 0, err
	}
	defer idx.Close()
	now := nanos(s.opts.Now())
	done := true
	err = db.Update(ctx, func(tx *index.Tx) error {
		added, done = 0, true
		err := idx.each(func(e entry) error {
			ready, err := s.readable(ctx, tx, e, first, last)
			if err != nil || !ready {
				done = done && ready
				return err
			}
			ok, err := recordEntry(ctx, tx, e, idx.Pack, now)
			if ok {
				added++
			}
			return err
		})
		if err != nil || !done {
			return err
		}
		return tookIn(ctx, tx, key)
	})
	if err != nil {
		return false, 0, err
	}
	st.Objects += added
	if done {
		st.Indexes++
	}
	return !done, added, nil
}

// fetchIndex reads the index object at key (store.corrupt when it is
// damaged, ErrMissing when it is gone), every entry checked.
func (s *Storage) fetchIndex(ctx context.Context, key string) (*storedIndex, error) {
	rc, err := s.b.open(ctx, key, 0, -1)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return loadIndex(rc, key, true)
}

// readable reports whether entry e may be recorded in a sweep: in the
// first only if it stands alone (no chunk list, no base), in the last
// always, otherwise once its chunks and base are recorded.
func (s *Storage) readable(ctx context.Context, tx *index.Tx, e entry, first, last bool) (bool, error) {
	alone := len(e.Chunks) == 0 && e.Base == nil
	switch {
	case alone || last:
		return true, nil
	case first:
		return false, nil
	}
	for _, c := range e.Chunks {
		if ok, err := s.Has(ctx, tx, cas.KindChunk, c.Hash); err != nil || !ok {
			return false, err
		}
	}
	if e.Base != nil {
		if ok, err := s.Has(ctx, tx, cas.KindBlob, *e.Base); err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

// tookIn records that the store holds the entries of index object key
// (pushed or pulled here), and that its next segment names it.
func tookIn(ctx context.Context, tx *index.Tx, key string) error {
	if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO remote_cache (kind, hash, data) VALUES (2, ?, x'')`, idxHash(key)); err != nil {
		return index.Translate(err)
	}
	_, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO sync_indexes (hash) VALUES (?)`, idxHash(key))
	return index.Translate(err)
}

// Recover finds the objects want names (blobs, with the chunks of the
// chunked ones) in the object store's index objects, read whether taken in
// before or not, and records those the store lacks, so they are readable
// again (the store's gc may have dropped records another device's
// archive still names). An index object that does not read is skipped;
// when something wanted is in no index object that reads (its own is
// damaged, or was removed), the packs none of them names are looked in
// too, each by the copy of its index it ends with (packIndexes). It
// returns how many it recorded; a blob found nowhere stays missing (a
// chunked blob whose only chunk list was in such an index object among
// them: a pack holds no chunk lists). What is wanted and what is found
// of it wait in a scratch database, not in memory, as do the packs the
// index objects name.
func (s *Storage) Recover(ctx context.Context, db *index.DB, want []cas.Hash) (int, error) {
	s.push.Lock()
	defer s.push.Unlock()
	n, err := s.recoverWanted(ctx, db, want)
	if err != nil {
		return 0, fmt.Errorf("recover: %w", err)
	}
	return n, nil
}

// foundEntry is an entry Recover found, with the pack that holds it.
type foundEntry struct {
	E    entry  `json:"e"`
	Pack string `json:"pack"`
}

func (s *Storage) recoverWanted(ctx context.Context, db *index.DB, want []cas.Hash) (int, error) {
	// What is wanted and what was found wait in a scratch database while
	// the index objects go by: the blobs in a first pass, then the chunks
	// the chunked ones list. A wanted object's value is 0 until it is
	// found, then 1 + the place in found of its entry.
	sc, err := index.OpenScratch(ctx)
	if err != nil {
		return 0, err
	}
	defer sc.Close()
	found, err := sc.NewList(ctx)
	if err != nil {
		return 0, err
	}
	named, err := sc.NewMap(ctx) // packs an index object that reads names
	if err != nil {
		return 0, err
	}
	blobs, err := sc.NewMap(ctx)
	if err != nil {
		return 0, err
	}
	chunks, err := sc.NewMap(ctx)
	if err != nil {
		return 0, err
	}
	for _, h := range want {
		if _, err := blobs.Add(ctx, h[:], 0); err != nil {
			return 0, err
		}
	}
	take := func(kind cas.Kind, wanted *index.ScratchMap, lacking *int64, idx *storedIndex) error {
		return idx.each(func(e entry) error {
			if e.Kind != kind {
				return nil
			}
			v, ok, err := wanted.Get(ctx, e.Hash[:])
			if err != nil || !ok || v != 0 {
				return err
			}
			b, err := json.Marshal(foundEntry{e, idx.Pack})
			if err != nil {
				return err
			}
			if err := found.Push(ctx, b); err != nil {
				return err
			}
			if err := wanted.Set(ctx, e.Hash[:], found.Len()); err != nil {
				return err
			}
			*lacking--
			return nil
		})
	}
	pass := func(kind cas.Kind, wanted *index.ScratchMap) error {
		lacking, err := wanted.Len(ctx)
		if err != nil {
			return err
		}
		err = s.b.list(ctx, indexDir, "", func(key string, _ time.Time) error {
			idx, err := s.fetchIndex(ctx, key)
			if errors.Is(err, ErrMissing) {
				return nil // reclaimed since it was listed
			}
			if wserr.CodeOf(err) == wserr.Corrupt {
				return nil
			}
			if err != nil {
				return err
			}
			defer idx.Close()
			if _, err := named.Add(ctx, []byte(idx.Pack), 1); err != nil {
				return err
			}
			return take(kind, wanted, &lacking, idx)
		})
		if err != nil || lacking == 0 {
			return err
		}
		return s.packIndexes(ctx, func(key string, _ time.Time) (bool, error) {
			_, ok, err := named.Get(ctx, []byte(key))
			return ok, err
		}, func(pack string, idx *storedIndex) error {
			idx.Pack = pack
			return take(kind, wanted, &lacking, idx)
		})
	}
	at := func(v int64) (foundEntry, error) {
		var f foundEntry
		b, err := found.At(ctx, v-1)
		if err == nil {
			err = json.Unmarshal(b, &f)
		}
		return f, err
	}
	if err := pass(cas.KindBlob, blobs); err != nil {
		return 0, err
	}
	if err := blobs.Each(ctx, func(_ []byte, v int64) error {
		if v == 0 {
			return nil
		}
		f, err := at(v)
		if err != nil {
			return err
		}
		for _, c := range f.E.Chunks {
			if _, err := chunks.Add(ctx, c.Hash[:], 0); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return 0, err
	}
	if nc, err := chunks.Len(ctx); err != nil {
		return 0, err
	} else if nc > 0 {
		if err := pass(cas.KindChunk, chunks); err != nil {
			return 0, err
		}
	}
	n := 0
	now := nanos(s.opts.Now())
	// record records the entry found of what wanted names at h, if any.
	record := func(tx *index.Tx, wanted *index.ScratchMap, h cas.Hash) (foundEntry, bool, error) {
		v, _, err := wanted.Get(ctx, h[:])
		if err != nil || v == 0 {
			return foundEntry{}, false, err
		}
		f, err := at(v)
		if err != nil {
			return f, false, err
		}
		added, err := recordEntry(ctx, tx, f.E, f.Pack, now)
		if added {
			n++
		}
		return f, true, err
	}
	err = db.Update(ctx, func(tx *index.Tx) error {
		for _, h := range want {
			f, ok, err := record(tx, blobs, h)
			if err != nil || !ok {
				return err
			}
			for _, c := range f.E.Chunks {
				if _, _, err := record(tx, chunks, c.Hash); err != nil {
					return err
				}
			}
		}
		return nil
	})
	return n, err
}

// packTail is how many bytes of a pack's end packIndexes reads at once:
// the index a pack of a few hundred objects ends with, and its length,
// in one ranged GET.
const packTail = 64 << 10

// packIndexes calls fn with the index each pack under data/ that skip
// does not pass over ends with (its objects, as its index object lists
// them, without the pack's key, device and time): for the objects of a
// pack whose index objects do not read, or that no index object names.
// skip is called with each pack's key and the time it was written as the
// listing goes by. It costs a listing of data/ and one ranged GET a pack
// read (its last packTail bytes; a second for an index longer than
// that); a pack whose end does not read as an index, or gives a length
// past maxIndexBytes, is passed over, read no further.
func (s *Storage) packIndexes(ctx context.Context, skip func(key string, mod time.Time) (bool, error), fn func(pack string, idx *storedIndex) error) error {
	return s.b.sizes(ctx, dataDir, func(key string, size int64, mod time.Time) error {
		if size < 4 {
			return nil
		}
		if ok, err := skip(key, mod); err != nil || ok {
			return err
		}
		tail := min(size, packTail)
		b, err := s.b.get(ctx, key, size-tail, tail)
		if errors.Is(err, ErrMissing) || err == nil && int64(len(b)) != tail {
			return nil
		}
		if err != nil {
			return err
		}
		n := int64(binary.BigEndian.Uint32(b[len(b)-4:]))
		var idx *storedIndex
		switch {
		case n == 0 || n > size-4 || n > maxIndexBytes:
			return nil
		case n <= tail-4:
			idx, err = loadIndex(bytes.NewReader(b[tail-4-n:tail-4]), key, false)
		default:
			var rc io.ReadCloser
			if rc, err = s.b.open(ctx, key, size-4-n, n); errors.Is(err, ErrMissing) {
				return nil
			} else if err != nil {
				return err
			}
			idx, err = loadIndex(rc, key, false)
			rc.Close()
		}
		if wserr.CodeOf(err) == wserr.Corrupt {
			return nil
		}
		if err != nil {
			return err
		}
		defer idx.Close()
		return fn(key, idx)
	})
}

// lostPack starts the pack of a record whose pack is gone from the object
// store while the store holds the object nowhere (unpushGone): such a
// record reads as missing until a pull finds the object in another pack.
const lostPack = "gone/"

// recordEntry records one index entry as Pull does, unless the store has
// a record of it, one whose pack is gone aside (lostPack), which the entry
// replaces; it reports whether it added or replaced one.
func recordEntry(ctx context.Context, tx *index.Tx, e entry, pack string, now int64) (bool, error) {
	var sum, base any
	if e.Sum != nil {
		sum = *e.Sum
	}
	if e.Base != nil {
		base = *e.Base
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO remote_objects (kind, hash, size, stored, codec, base, created, pack, off, sum)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (kind, hash) DO UPDATE SET size = excluded.size,
		stored = excluded.stored, codec = excluded.codec, base = excluded.base, pack = excluded.pack,
		off = excluded.off, sum = excluded.sum
		WHERE remote_objects.pack GLOB ? AND excluded.pack != ''`,
		int(e.Kind), e.Hash, e.Size, e.Len, e.CodecN, base, now, pack, e.Off, sum, lostPack+"*")
	if err != nil {
		return false, index.Translate(err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return false, nil
	}
	for i, c := range e.Chunks {
		if _, err := tx.ExecContext(ctx, `INSERT INTO remote_chunks (blob, idx, chunk, off) VALUES (?, ?, ?, ?)`,
			e.Hash, i, c.Hash, c.Off); err != nil {
			return false, index.Translate(err)
		}
	}
	return true, nil
}

// Evict drops the cached bytes of every pushed object and returns how many
// it dropped; reads fetch them from the object store again.
func (s *Storage) Evict(ctx context.Context, db *index.DB) (int64, error) {
	var n int64
	err := db.Update(ctx, func(tx *index.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM remote_cache WHERE EXISTS (SELECT 1 FROM remote_objects o
			WHERE o.kind = remote_cache.kind AND o.hash = remote_cache.hash AND o.pack IS NOT NULL AND o.pack != '')`)
		if err != nil {
			return index.Translate(err)
		}
		n, _ = res.RowsAffected()
		return nil
	})
	return n, err
}

// idxHash is the hash an index key names, as its remote_cache row (kind
// 2) records it; a key not of the layout's form yields a hash of the key.
func idxHash(key string) []byte {
	if h, err := cas.ParseHash(strings.TrimPrefix(key, indexDir)); err == nil {
		return h[:]
	}
	h := cas.Sum([]byte(key))
	return h[:]
}
