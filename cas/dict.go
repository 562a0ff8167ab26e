package cas

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/klauspost/compress/zstd"

	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/wserr"
)

// Small blobs compress poorly one by one: a zstd frame of a few KiB spends
// most of its bytes teaching itself the words and the entropy tables that
// every other small file of the store shares. So the Store trains a zstd
// dictionary from its own small blobs and compresses every blob of at most
// Options.DictMax bytes with the newest one: a CodecZstd blob whose Base is
// not zero is a zstd frame compressed with the dictionary at Base.
//
// A dictionary is stored as a blob of its own (its address the BLAKE3 of
// its bytes, stored whole with plain zstd) and listed in the dicts table,
// oldest first. A blob compressed with it names it as its Base, as a delta
// names its base, so every Storage keeps the reference without knowing
// what it is, gc keeps a dictionary while any blob it keeps uses it, and a
// remote tier carries dictionaries like any other blob. Every listed
// dictionary is a gc root (EachDict), so a dictionary just trained is kept
// before any blob uses it. A blob's address stays the BLAKE3 of its plain
// bytes; reads decode with the dictionary and verify as always.
//
// New small blobs use the newest listed dictionary, checked in the
// transaction that inserts them, so a dictionary another process has
// trained since is picked up, and PruneDicts (which unlists only older
// dictionaries no blob uses, in a write transaction of its own) can never
// unlist one a blob is about to name.
//
// Training is automatic and bounded: once this Store has inserted
// Options.DictTrainAfter small blobs with no dictionary, or three times as
// many as the store held when the newest one was trained, a new one is
// trained from at most dictMaxSamples small blobs and kept only if it pays
// for its own bytes. The samples it read are re-encoded with it where
// that saves, so the blobs written before it exist gain too. While a
// background runner is started (StartReencoder), the runner trains:
// building in a read transaction, then storing the dictionary, its row and
// the re-encodings in a write transaction that lists nothing if another
// dictionary was listed meanwhile and leaves out a sample whose row
// changed (trainAside). Without one, the write that crosses the line
// trains, and dictionary, row and re-encodings commit or roll back
// together with the write.

const (
	// dictMaxSamples bounds the blobs a training reads.
	dictMaxSamples = 128
	// dictMaxBytes bounds a dictionary's length (its history, the bytes
	// matches may refer to).
	dictMaxBytes = 64 << 10
	// dictMinBlob is the smallest blob worth compressing or sampling.
	dictMinBlob = 64
	// dictContentMax bounds the bytes of one sample used for the
	// dictionary's entropy statistics.
	dictContentMax = 8 << 10
	// dictCacheMax bounds the dictionaries kept loaded.
	dictCacheMax = 16
)

// DictInfo describes one trained dictionary.
type DictInfo struct {
	// ID numbers the dictionaries of a store from 1, oldest first.
	ID   int64 `json:"id" db:"id"`
	Hash Hash  `json:"hash" db:"hash"`
	// Size is the dictionary's length in bytes.
	Size int64 `json:"size" db:"size"`
	// Samples counts the blobs it was trained from, Blobs the small blobs
	// the store held then.
	Samples int64 `json:"samples" db:"samples"`
	Blobs   int64 `json:"blobs" db:"blobs"`
	// Created is when it was trained, in Unix nanoseconds.
	Created int64 `json:"created" db:"created"`
}

// dictCodec compresses and decompresses with one dictionary. Its decoder
// and encoders are built once, when the dictionary is first used, and kept
// for every later read and write.
type dictCodec struct {
	info DictInfo
	dec  *zstd.Decoder
	encs freeList[*zstd.Encoder]
}

// dicts is a Store's view of its dictionaries.
type dicts struct {
	mu     sync.Mutex
	loaded map[Hash]*dictCodec
	newest *dictCodec // nil: none known
	known  bool       // newest was read from the table at least once
	// since counts the small blobs this Store inserted since newest
	// changed; a training is due at due, once dueSet.
	since, due int
	dueSet     bool
}

// storedForm is a blob's content as it is to be stored.
type storedForm struct {
	data  []byte
	codec Codec
	base  Hash // the dictionary of a form compressed with one
	// tried is the dictionary compression used, whether or not it paid
	// (zero: none); the insert checks it is still the newest.
	tried Hash
}

func (s *Store) dictsOn() bool { return s.opts.DictMax > 0 }

// small reports whether content of n bytes is compressed with the
// dictionary.
func (s *Store) small(n int) bool { return s.dictsOn() && n >= dictMinBlob && n <= s.opts.DictMax }

// compressBlob returns the stored form of blob content b: with the newest
// dictionary this Store knows when b is small, else as compress does. The
// caller calls release once it no longer needs the form's data.
func (s *Store) compressBlob(b []byte) (storedForm, func()) {
	if !s.small(len(b)) {
		data, codec, release := s.compress(b)
		return storedForm{data: data, codec: codec}, release
	}
	s.dicts.mu.Lock()
	dc := s.dicts.newest
	s.dicts.mu.Unlock()
	return s.compressWith(dc, b)
}

// compressWith compresses b with dc (plain zstd for nil): zstd with dc's
// dictionary as base when that shrinks b by 1/32, raw otherwise.
func (s *Store) compressWith(dc *dictCodec, b []byte) (storedForm, func()) {
	if dc == nil {
		data, codec, release := s.compress(b)
		return storedForm{data: data, codec: codec}, release
	}
	s.compressions.Add(1)
	enc := dc.encs.get()
	zp := s.zbufs.get()
	if bound := len(b) + len(b)>>10 + 1<<10; cap(*zp) < bound {
		*zp = make([]byte, 0, bound)
	}
	z := enc.EncodeAll(b, (*zp)[:0])
	dc.encs.put(enc)
	*zp = z[:0]
	release := func() { s.zbufs.put(zp) }
	f := storedForm{data: b, codec: CodecRaw, tried: dc.info.Hash}
	if len(z) < len(b)-len(b)/32 {
		f.data, f.codec, f.base = z, CodecZstd, dc.info.Hash
	}
	return f, release
}

// settleDict makes f, the stored form of small content b about to be
// inserted in tx, use the newest dictionary listed as tx sees it,
// compressing b again if this Store's view was stale, and counts the
// insert towards the next training. The new form's buffer is released
// when tx's caller calls the returned func.
func (s *Store) settleDict(ctx context.Context, tx *index.Tx, b []byte, f *storedForm) (func(), error) {
	nop := func() {}
	if !s.small(len(b)) {
		return nop, nil
	}
	newest, ok, err := newestDict(ctx, tx)
	if err != nil {
		return nop, err
	}
	s.countSmall()
	if newest.Hash == f.tried {
		return nop, nil
	}
	var dc *dictCodec
	if ok {
		if dc, err = s.loadDictOrNone(ctx, tx, newest); err != nil {
			return nop, err
		}
	}
	s.setNewest(dc)
	nf, release := s.compressWith(dc, b)
	*f = nf
	return release, nil
}

// countSmall counts the insert of a small blob towards the next training.
func (s *Store) countSmall() {
	s.dicts.mu.Lock()
	s.dicts.since++
	s.dicts.mu.Unlock()
}

// wholeForm is the stored form a job gives content b that its write left
// raw: small content compressed with the newest dictionary tx lists, as a
// write that compresses would store it, or with plain zstd while there is
// none (or it does not load); larger content as compress does. The caller
// calls release once it no longer needs the form's data.
func (s *Store) wholeForm(ctx context.Context, tx *index.Tx, b []byte) (f storedForm, release func(), err error) {
	var dc *dictCodec
	if s.small(len(b)) {
		newest, ok, err := newestDict(ctx, tx)
		if err != nil {
			return storedForm{}, func() {}, err
		}
		if ok {
			if dc, err = s.loadDictOrNone(ctx, tx, newest); err != nil {
				return storedForm{}, func() {}, err
			}
		}
		s.setNewest(dc)
	}
	f, release = s.compressWith(dc, b)
	return f, release, nil
}

// setNewest records dc as the newest dictionary and resets the count to
// the next training when it changes.
func (s *Store) setNewest(dc *dictCodec) {
	s.dicts.mu.Lock()
	defer s.dicts.mu.Unlock()
	first := !s.dicts.known
	s.dicts.known = true
	if !first && s.dicts.newest == dc {
		return
	}
	if prev := s.dicts.newest; prev != nil && prev != dc {
		// Only the newest dictionary compresses: the encoders of the one
		// it replaces (a megabyte or more of tables each) go, while its
		// decoder stays for the blobs it compressed.
		prev.encs.drop()
	}
	s.dicts.newest = dc
	s.dicts.since = 0
	s.dicts.due, s.dicts.dueSet = s.trainDue(dc), true
}

// trainDue is the number of small blobs inserted after dc at which the
// next training is due: 0 for never.
func (s *Store) trainDue(dc *dictCodec) int {
	if s.opts.DictTrainAfter < 0 {
		return 0
	}
	if dc == nil {
		return s.opts.DictTrainAfter
	}
	return max(s.opts.DictTrainAfter, 3*int(dc.info.Blobs))
}

// newestDict returns the newest listed dictionary in tx; ok is false when
// there is none.
func newestDict(ctx context.Context, tx *index.Tx) (DictInfo, bool, error) {
	var d DictInfo
	err := tx.GetContext(ctx, &d, `SELECT id, hash, size, samples, blobs, created FROM dicts ORDER BY id DESC LIMIT 1`)
	if errors.Is(err, sql.ErrNoRows) {
		return DictInfo{}, false, nil
	}
	if err != nil {
		return DictInfo{}, false, fmt.Errorf("read newest dictionary: %w", index.Translate(err))
	}
	return d, true, nil
}

// dictListed reports whether the blob at h is a dictionary the store
// lists.
func dictListed(ctx context.Context, tx *index.Tx, h Hash) (bool, error) {
	var n int
	if err := tx.GetContext(ctx, &n, `SELECT count(*) FROM dicts WHERE hash = ?`, h); err != nil {
		return false, fmt.Errorf("look up dictionary %s: %w", h.Short(), index.Translate(err))
	}
	return n > 0, nil
}

// loadDict returns the codec of dictionary info.Hash, built from its blob
// read in tx (nil: a read transaction of its own) the first time it is
// used. It fails with ErrCorrupt when the blob is missing, is not stored
// whole, does not hash to its address or is not a dictionary.
func (s *Store) loadDict(ctx context.Context, tx *index.Tx, info DictInfo) (*dictCodec, error) {
	if dc := s.loadedDict(info); dc != nil {
		return dc, nil
	}
	return s.readDict(ctx, tx, info)
}

// readDict builds the codec of dictionary info.Hash from its blob, read
// in tx (nil: a read transaction of its own), and keeps it; loadDict
// without the look at what this Store has built already.
func (s *Store) readDict(ctx context.Context, tx *index.Tx, info DictInfo) (*dictCodec, error) {
	var b []byte
	err := s.viewIn(ctx, tx, func(tx *index.Tx) error {
		var err error
		b, err = s.readDictBytes(ctx, tx, info.Hash)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.dictLoads.Add(1)
	return s.cacheDict(info, b)
}

// loadedDict returns the codec of dictionary info.Hash if this Store has
// built it already, or nil.
func (s *Store) loadedDict(info DictInfo) *dictCodec {
	s.dicts.mu.Lock()
	defer s.dicts.mu.Unlock()
	dc := s.dicts.loaded[info.Hash]
	if dc != nil && dc.info.ID == 0 && info.ID != 0 {
		dc.info = info // first loaded by a read, which knows only the hash
	}
	return dc
}

// loadDictOrNone returns the codec of the listed dictionary info for
// content about to be stored in tx, or nil when it does not load: the
// content is then stored without it. A listed dictionary whose blob is
// missing or damaged is fsck's to report, and one whose blob was evicted
// to a remote tier out of reach must not stop writes. A failure that
// ended tx itself (SQLite ends a whole transaction on some full-disk, I/O
// and memory errors; index.Tx.Ended) is returned instead, so the caller
// fails with its cause.
func (s *Store) loadDictOrNone(ctx context.Context, tx *index.Tx, info DictInfo) (*dictCodec, error) {
	if dc := s.loadedDict(info); dc != nil {
		return dc, nil
	}
	dc, err := s.readDict(ctx, tx, info)
	if err != nil && tx != nil && tx.Ended() {
		return nil, fmt.Errorf("load dictionary %s: %w", info.Hash.Short(), err)
	}
	return dc, nil
}

// cacheDict builds and keeps the codec of dictionary b.
func (s *Store) cacheDict(info DictInfo, b []byte) (*dictCodec, error) {
	dec, err := zstd.NewReader(nil,
		zstd.WithDecoderDicts(b),
		zstd.WithDecoderConcurrency(2),
		zstd.WithDecoderMaxMemory(uint64(maxInline)))
	if err != nil {
		return nil, corrupt("get", info.Hash, "not a zstd dictionary: %v", err)
	}
	newEnc := func() (*zstd.Encoder, error) {
		return zstd.NewWriter(nil,
			zstd.WithEncoderDict(b),
			zstd.WithEncoderLevel(dictLevel),
			zstd.WithEncoderConcurrency(1),
			zstd.WithWindowSize(dictWindow),
			zstd.WithLowerEncoderMem(true),
			zstd.WithEncoderCRC(false),
			zstd.WithZeroFrames(true))
	}
	enc, err := newEnc()
	if err != nil {
		return nil, corrupt("get", info.Hash, "not a zstd dictionary: %v", err)
	}
	dc := &dictCodec{info: info, dec: dec}
	dc.encs = freeList[*zstd.Encoder]{keep: 2, free: []*zstd.Encoder{enc}, new: func() *zstd.Encoder {
		e, err := newEnc()
		if err != nil {
			panic(err) // the same dictionary built one above
		}
		return e
	}}
	s.dicts.mu.Lock()
	defer s.dicts.mu.Unlock()
	if old := s.dicts.loaded[info.Hash]; old != nil {
		return old, nil
	}
	if len(s.dicts.loaded) >= dictCacheMax {
		// Drop any but the newest; a reader still holding it finishes.
		for h, d := range s.dicts.loaded {
			if d != s.dicts.newest {
				delete(s.dicts.loaded, h)
				break
			}
		}
	}
	s.dicts.loaded[info.Hash] = dc
	return dc, nil
}

// dictLevel is the zstd level of dictionary compression, whatever
// Options.Level says. Before each frame an encoder restores the match
// tables the dictionary primes; at the default level those are 1.25 MiB,
// which for a blob of a few KiB costs more than compressing it (measured
// here: 190 µs against 80 µs for 4 KiB of prose, 160 µs against 42 µs for
// 1 KiB), for frames about 5% smaller.
const dictLevel = zstd.SpeedFastest

// dictWindow is the zstd window of dictionary compression: room for the
// largest dictionary and the largest small blob.
const dictWindow = 512 << 10

// decodeDict returns the plain bytes of data, compressed with the
// dictionary at dict, which it reads in tx (nil: a transaction of its
// own) if it has not loaded it.
func (s *Store) decodeDict(ctx context.Context, tx *index.Tx, h Hash, data []byte, size int64, dict Hash) ([]byte, error) {
	if dict.IsZero() {
		return nil, corrupt("get", h, "dictionary-compressed blob names no dictionary")
	}
	dc, err := s.loadDict(ctx, tx, DictInfo{Hash: dict})
	if err != nil {
		return nil, corrupt("get", h, "dictionary %s: %s", dict.Short(), wserr.MessageOf(err))
	}
	s.decodes.Add(1)
	b, err := dc.dec.DecodeAll(data, make([]byte, 0, capHint(size, maxInline)))
	if err != nil {
		return nil, corrupt("get", h, "zstd with dictionary %s: %v", dict.Short(), err)
	}
	return b, nil
}

// EachDict calls fn with every listed dictionary in tx, oldest first:
// maintenance's roots, since a dictionary is kept while it is listed.
func (s *Store) EachDict(ctx context.Context, tx *index.Tx, fn func(DictInfo) error) error {
	var ds []DictInfo
	if err := tx.SelectContext(ctx, &ds, `SELECT id, hash, size, samples, blobs, created FROM dicts ORDER BY id`); err != nil {
		return fmt.Errorf("read dictionaries: %w", index.Translate(err))
	}
	for _, d := range ds {
		if err := fn(d); err != nil {
			return err
		}
	}
	return nil
}

// Dicts lists the store's dictionaries, oldest first.
func (s *Store) Dicts(ctx context.Context) ([]DictInfo, error) {
	var ds []DictInfo
	err := s.db.View(ctx, func(tx *index.Tx) error {
		return s.EachDict(ctx, tx, func(d DictInfo) error { ds = append(ds, d); return nil })
	})
	return ds, err
}

// trainIfDue trains a dictionary in tx (nil: a write transaction of its
// own) when this Store's inserts have made one due. A training that fails
// or does not pay leaves the store as it was: in tx, its work is undone
// to a savepoint and the caller's goes on. Only ctx's error is returned,
// or the one that ended tx, which the caller must fail with.
func (s *Store) trainIfDue(ctx context.Context, tx *index.Tx) error {
	if !s.takeDue() {
		return nil
	}
	var ok bool
	train := func(tx *index.Tx) error {
		var err error
		_, ok, err = s.train(ctx, tx)
		return err
	}
	if tx == nil {
		return s.trained(ctx, ok, s.db.Update(ctx, train))
	}
	failed, err := tx.Savepoint(ctx, func() error { return train(tx) })
	if err != nil {
		_ = s.trained(ctx, false, err)
		return err
	}
	return s.trained(ctx, ok, failed)
}

// trainAsideIfDue is trainIfDue with the training built outside the write
// lock (trainAside), for the background runner.
func (s *Store) trainAsideIfDue(ctx context.Context) error {
	if !s.takeDue() {
		return nil
	}
	ok, err := s.trainAside(ctx)
	return s.trained(ctx, ok, err)
}

// trainInWrite is trainIfDue for a write in tx: while a background runner
// is started, the write leaves the training to it (and wakes it), so that
// no write waits for one.
func (s *Store) trainInWrite(ctx context.Context, tx *index.Tx) error {
	if s.runners.Load() == 0 {
		return s.trainIfDue(ctx, tx)
	}
	if s.dueNow() {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
	return nil
}

// dueNow reports whether a training is due.
func (s *Store) dueNow() bool {
	s.dicts.mu.Lock()
	defer s.dicts.mu.Unlock()
	return s.dueLocked()
}

// takeDue reports whether a training is due and, if so, counts the
// inserts towards the next one from zero, whatever its outcome.
func (s *Store) takeDue() bool {
	s.dicts.mu.Lock()
	defer s.dicts.mu.Unlock()
	if !s.dueLocked() {
		return false
	}
	s.dicts.since = 0
	return true
}

// dueLocked is dueNow with s.dicts.mu held.
func (s *Store) dueLocked() bool {
	if !s.dicts.dueSet && s.dictsOn() {
		// a store that has no dictionary yet: the first training's line,
		// set once so that a failed training's back-off holds
		s.dicts.due, s.dicts.dueSet = s.trainDue(nil), true
	}
	return s.dictsOn() && s.dicts.due > 0 && s.dicts.since >= s.dicts.due
}

// trained records a training's outcome: content a dictionary does not
// help (or a store too small for one) is tried again only after twice as
// many inserts, so the trainings' reads stay a small share of the
// writes'. A training that ctx cut short stays due. Only ctx's error is
// returned.
func (s *Store) trained(ctx context.Context, ok bool, err error) error {
	if ctx.Err() != nil {
		// cut short (the store closing): still due, for Drain
		s.dicts.mu.Lock()
		s.dicts.since = max(s.dicts.since, s.dicts.due)
		s.dicts.mu.Unlock()
		return ctx.Err()
	}
	if err != nil || !ok {
		s.dicts.mu.Lock()
		s.dicts.due *= 2
		s.dicts.mu.Unlock()
	}
	return nil
}

// TrainDict trains a dictionary from the store's small blobs now, in a
// write transaction of its own, and returns it; ok is false when there are
// too few small blobs or the dictionary would not pay for its own bytes
// (nothing is written then). Errors are the storage's and the index's.
func (s *Store) TrainDict(ctx context.Context) (info DictInfo, ok bool, err error) {
	if !s.dictsOn() {
		return DictInfo{}, false, nil
	}
	err = s.db.Update(ctx, func(tx *index.Tx) error {
		info, ok, err = s.train(ctx, tx)
		return err
	})
	if err != nil {
		return DictInfo{}, false, fmt.Errorf("train dictionary: %w", err)
	}
	return info, ok, nil
}

// errPicked ends the pass that picks the samples once it has them all.
var errPicked = errors.New("samples picked")

// sample is one small blob read for training.
type sample struct {
	o     Object
	plain []byte
}

// train builds a dictionary from the small blobs in tx and, if it pays,
// stores it, lists it and re-encodes the samples with it.
func (s *Store) train(ctx context.Context, tx *index.Tx) (DictInfo, bool, error) {
	p, err := s.planTraining(ctx, tx)
	if err != nil || p == nil {
		return DictInfo{}, false, err
	}
	return s.listTrained(ctx, tx, p, false)
}

// trainAside is train with the building in a read transaction and only
// the listing in a write transaction of its own, so that a training
// (tens of milliseconds) holds the write lock for the few statements that
// store its result. The listing drops the dictionary if another was
// listed meanwhile, and leaves out every sample whose row changed.
func (s *Store) trainAside(ctx context.Context) (bool, error) {
	var p *trainPlan
	err := s.db.View(ctx, func(tx *index.Tx) error {
		var err error
		p, err = s.planTraining(ctx, tx)
		return err
	})
	if err != nil || p == nil {
		return false, err
	}
	if s.trainPlanned != nil {
		s.trainPlanned()
	}
	var ok bool
	err = s.db.Update(ctx, func(tx *index.Tx) error {
		return s.keepCap(ctx, tx, func() error {
			var err error
			_, ok, err = s.listTrained(ctx, tx, p, true)
			return err
		})
	})
	if err != nil {
		s.dropDict(p.info.Hash)
	}
	return ok, err
}

// trainPlan is a dictionary built and found to pay, with the samples it
// re-encodes, ready to be stored and listed.
type trainPlan struct {
	info    DictInfo
	dc      *dictCodec
	prev    DictInfo // the newest dictionary listed when it was built
	hasPrev bool
	data    []byte // its stored form
	codec   Codec
	recodes []recoded
}

// recoded is a sample's new stored form, compressed with the dictionary;
// o is its row as the training read it.
type recoded struct {
	o     Object
	codec Codec
	base  Hash
	data  []byte
}

// planTraining builds a dictionary from the small blobs in tx and returns
// it with the samples' new forms if it pays, or nil. It writes nothing.
func (s *Store) planTraining(ctx context.Context, tx *index.Tx) (*trainPlan, error) {
	listed := map[Hash]bool{}
	if err := s.EachDict(ctx, tx, func(d DictInfo) error { listed[d.Hash] = true; return nil }); err != nil {
		return nil, err
	}
	// The candidates are counted in one pass and picked in a second,
	// evenly over the hash order, which is no order of the content: a
	// store's small blobs may number millions, its samples dictMaxSamples.
	candidate := func(o Object) bool { return whole(o.Codec) && s.small(int(o.Size)) && !listed[o.Hash] }
	var cands int
	var smallBytes int64
	err := s.st.Iterate(ctx, tx, KindBlob, func(o Object) error {
		if candidate(o) {
			cands++
			smallBytes += o.Size
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list samples: %w", err)
	}
	if cands < 8 {
		return nil, nil
	}
	n := min(cands, dictMaxSamples)
	picks := make([]Object, 0, n)
	i := 0
	err = s.st.Iterate(ctx, tx, KindBlob, func(o Object) error {
		if !candidate(o) {
			return nil
		}
		if i == len(picks)*cands/n {
			picks = append(picks, o)
			if len(picks) == n {
				return errPicked
			}
		}
		i++
		return nil
	})
	if err != nil && !errors.Is(err, errPicked) {
		return nil, fmt.Errorf("pick samples: %w", err)
	}
	var samples []sample
	for _, o := range picks {
		b, err := s.readWhole(ctx, tx, o)
		if err != nil {
			continue // fsck's to report
		}
		samples = append(samples, sample{o: o, plain: b})
	}
	if len(samples) < 8 {
		return nil, nil
	}
	// Every other sample goes into the history (the bytes matches refer
	// to), the rest into the entropy statistics.
	budget := int(min(int64(dictMaxBytes), max(8<<10, smallBytes/8)))
	piece := max(256, min(2<<10, 2*budget/len(samples)))
	var history []byte
	var contents [][]byte
	var contentBytes int64
	for i, sm := range samples {
		if i%2 == 0 && len(history) < budget {
			history = append(history, sm.plain[:min(len(sm.plain), piece, budget-len(history))]...)
			continue
		}
		c := sm.plain[:min(len(sm.plain), dictContentMax)]
		contents = append(contents, c)
		contentBytes += int64(len(c))
	}
	prev, hasPrev, err := newestDict(ctx, tx)
	if err != nil {
		return nil, err
	}
	id := prev.ID + 1
	b, err := zstd.BuildDict(zstd.BuildDictOptions{
		ID:       uint32(1<<15 + id),
		Contents: contents,
		History:  history,
		Offsets:  [3]int{1, 4, 8},
		Level:    dictLevel,
	})
	if err != nil {
		return nil, nil // too little to learn from
	}
	h := Sum(b)
	info := DictInfo{ID: id, Hash: h, Size: int64(len(b)), Samples: int64(len(samples)), Blobs: int64(cands), Created: s.now()}
	dc, err := s.cacheDict(info, b)
	if err != nil {
		return nil, nil
	}
	// It pays if what it saves on the contents, scaled to the store's
	// small blobs, is over twice its own stored bytes, and it does better
	// than the dictionary it would replace.
	var prevDC *dictCodec
	if hasPrev {
		if prevDC, err = s.loadDictOrNone(ctx, tx, prev); err != nil {
			return nil, err
		}
	}
	var plainZ, newZ, prevZ int64
	for _, c := range contents {
		plainZ += s.formLen(nil, c)
		newZ += s.formLen(dc, c)
		if prevDC != nil {
			prevZ += s.formLen(prevDC, c)
		}
	}
	data, codec, release := s.compress(b)
	defer release()
	saved := (plainZ - newZ) * smallBytes / max(1, contentBytes)
	if saved < int64(len(data)) || (prevDC != nil && newZ >= prevZ-prevZ/50) {
		s.dropDict(h)
		return nil, nil
	}
	p := &trainPlan{info: info, dc: dc, prev: prev, hasPrev: hasPrev, data: slices.Clone(data), codec: codec}
	if s.hist != nil {
		for _, sm := range samples {
			if r, ok := s.recodeForm(dc, sm); ok {
				p.recodes = append(p.recodes, r)
			}
		}
	}
	return p, nil
}

// listTrained stores and lists p's dictionary in tx and re-encodes its
// samples. With check, as after a plan made in another transaction, it
// lists nothing if the newest dictionary is no longer the one p was built
// after, and leaves out a sample whose row is gone or changed.
func (s *Store) listTrained(ctx context.Context, tx *index.Tx, p *trainPlan, check bool) (DictInfo, bool, error) {
	info, h := p.info, p.info.Hash
	if check {
		newest, ok, err := newestDict(ctx, tx)
		if err != nil {
			s.dropDict(h)
			return DictInfo{}, false, err
		}
		if ok != p.hasPrev || newest.Hash != p.prev.Hash {
			s.dropDict(h)
			return DictInfo{}, false, nil
		}
	}
	if err := s.st.Put(ctx, tx, Object{Kind: KindBlob, Hash: h, Size: info.Size, Stored: int64(len(p.data)),
		Codec: p.codec, Data: p.data, Created: s.clock()}); err != nil {
		s.dropDict(h)
		return DictInfo{}, false, fmt.Errorf("store dictionary: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO dicts (id, hash, size, samples, blobs, created) VALUES (?, ?, ?, ?, ?, ?)`,
		info.ID, info.Hash, info.Size, info.Samples, info.Blobs, info.Created); err != nil {
		s.dropDict(h)
		return DictInfo{}, false, fmt.Errorf("list dictionary: %w", index.Translate(err))
	}
	for _, r := range p.recodes {
		if check {
			v, found, err := s.version(ctx, tx, s.hist, r.o.Hash)
			if err != nil {
				s.dropDict(h)
				return DictInfo{}, false, fmt.Errorf("re-encode %s: %w", r.o.Hash.Short(), err)
			}
			if !found || v.Codec != r.o.Codec || v.Base != r.o.Base || v.Stored != r.o.Stored || v.Size != r.o.Size {
				continue
			}
		}
		if err := s.hist.Reencode(ctx, tx, r.o.Hash, r.codec, r.base, r.data); err != nil {
			s.dropDict(h)
			return DictInfo{}, false, fmt.Errorf("re-encode %s: %w", r.o.Hash.Short(), err)
		}
	}
	// Only a training that stored all it meant to makes its dictionary
	// the newest: one that failed leaves the newest, and the back-off
	// its failure set, as they were.
	s.setNewest(p.dc)
	return info, true, nil
}

// formLen is the stored length of c compressed with dc (nil: plain zstd).
func (s *Store) formLen(dc *dictCodec, c []byte) int64 {
	f, release := s.compressWith(dc, c)
	defer release()
	return int64(len(f.data))
}

// dropDict forgets a dictionary that was built but not kept.
func (s *Store) dropDict(h Hash) {
	s.dicts.mu.Lock()
	defer s.dicts.mu.Unlock()
	if d := s.dicts.loaded[h]; d != nil && d != s.dicts.newest {
		delete(s.dicts.loaded, h)
	}
}

// recodeForm returns sample sm compressed with dc, when that saves at
// least 1/16 of its stored bytes.
func (s *Store) recodeForm(dc *dictCodec, sm sample) (recoded, bool) {
	if sm.o.Base == dc.info.Hash {
		return recoded{}, false
	}
	f, release := s.compressWith(dc, sm.plain)
	defer release()
	if f.base.IsZero() || int64(len(f.data)) > sm.o.Stored-sm.o.Stored/16 {
		return recoded{}, false
	}
	return recoded{o: sm.o, codec: f.codec, base: f.base, data: slices.Clone(f.data)}, true
}

// readWhole returns the verified plain bytes of o, a blob stored whole,
// read in tx.
func (s *Store) readWhole(ctx context.Context, tx *index.Tx, o Object) ([]byte, error) {
	var b []byte
	err := s.st.Get(ctx, tx, KindBlob, o.Hash, func(g Object) error {
		if !whole(g.Codec) {
			return corrupt("get", o.Hash, "not stored whole")
		}
		var err error
		b, err = s.decodeIn(ctx, tx, o.Hash, g.Codec, g.Data, g.Size, g.Base)
		if g.Codec == CodecRaw {
			b = cloneData(b)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := checkPlain(o.Hash, b, o.Size); err != nil {
		return nil, err
	}
	return b, nil
}

// PruneDicts unlists, in a write transaction of its own, every dictionary
// but the newest that no blob uses, and returns how many it unlisted; gc
// then collects their blobs. It reads every blob's record. Errors are the
// storage's and the index's.
func (s *Store) PruneDicts(ctx context.Context) (int, error) {
	var n int
	err := s.db.Update(ctx, func(tx *index.Tx) error {
		var ds []DictInfo
		if err := s.EachDict(ctx, tx, func(d DictInfo) error { ds = append(ds, d); return nil }); err != nil {
			return err
		}
		if len(ds) < 2 {
			return nil
		}
		used := map[Hash]bool{}
		err := s.st.Iterate(ctx, tx, KindBlob, func(o Object) error {
			if o.Codec == CodecZstd && !o.Base.IsZero() {
				used[o.Base] = true
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, d := range ds[:len(ds)-1] {
			if used[d.Hash] {
				continue
			}
			if _, err := tx.ExecContext(ctx, `DELETE FROM dicts WHERE id = ?`, d.ID); err != nil {
				return index.Translate(err)
			}
			s.dropDict(d.Hash)
			n++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("prune dictionaries: %w", err)
	}
	return n, nil
}

// verifyDicts reports each listed dictionary that does not load, or whose
// listed size is not its length.
func (s *Store) verifyDicts(ctx context.Context, tx *index.Tx, rep *VerifyReport) error {
	return s.EachDict(ctx, tx, func(d DictInfo) error {
		rep.Dicts++
		b, err := s.readDictBytes(ctx, tx, d.Hash)
		if unchecked(err) {
			return err
		}
		if err != nil {
			rep.Problems = append(rep.Problems, Problem{Kind: "dict", Hash: d.Hash, Err: err.Error()})
			return nil
		}
		rep.Problems = appendSizes(rep.Problems, "dict", d.Hash, SizeMismatch{Field: "size", Recorded: d.Size, Actual: int64(len(b))})
		return nil
	})
}

// readDictBytes reads and verifies the bytes of dictionary h in tx.
func (s *Store) readDictBytes(ctx context.Context, tx *index.Tx, h Hash) ([]byte, error) {
	o, err := s.st.Stat(ctx, tx, KindBlob, h)
	if errors.Is(err, ErrNotFound) {
		return nil, corrupt("get", h, "dictionary is missing")
	}
	if err != nil {
		return nil, err
	}
	if !whole(o.Codec) || !o.Base.IsZero() {
		return nil, corrupt("get", h, "dictionary is stored as %s against %s, not whole", o.Codec, o.Base.Short())
	}
	b, err := s.readWhole(ctx, tx, o)
	if err != nil {
		return nil, err
	}
	if _, err := zstd.InspectDictionary(b); err != nil {
		return nil, corrupt("get", h, "not a zstd dictionary: %v", err)
	}
	return b, nil
}
