package cas

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/wserr"
)

// Codec names how a blob's bytes are stored.
type Codec int

// Codecs, as recorded in the blobs table.
const (
	CodecRaw     Codec = 0 // plain bytes: compression did not pay
	CodecZstd    Codec = 1 // one zstd frame, with the dictionary blob Base when not zero
	CodecChunked Codec = 2 // content in chunk rows, listed in order
	CodecDelta   Codec = 3 // zstd frame using a base blob as dictionary
)

func (c Codec) String() string {
	switch c {
	case CodecRaw:
		return "raw"
	case CodecZstd:
		return "zstd"
	case CodecChunked:
		return "chunked"
	case CodecDelta:
		return "delta"
	}
	return fmt.Sprintf("codec(%d)", int(c))
}

// MarshalText encodes a codec by name.
func (c Codec) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// Sentinel errors, matched by code with errors.Is.
var (
	// ErrNotFound: no blob has the address.
	ErrNotFound = &wserr.Error{Code: wserr.NotFound}
	// ErrCorrupt: stored bytes do not decode to, or do not hash to, their
	// address.
	ErrCorrupt = &wserr.Error{Code: wserr.Corrupt}
)

// Options configure a Store. The zero value means DefaultOptions.
type Options struct {
	// Level is the zstd level of whole blobs, 1 (fastest) to 22; default
	// 3. Deltas use zstd's fastest level.
	Level int
	// InlineMax is the largest content stored as a single row; larger
	// content is split into content-defined chunks. Default 4 MiB; at
	// least 1 KiB.
	InlineMax int
	// Now is the clock; default time.Now.
	Now func() time.Time
	// MaxChain bounds the delta applications reading any version takes
	// (see PutVersion); default 16, at least 1.
	MaxChain int
	// DeltaMax is the most bytes a version and its base may hold together
	// for delta encoding (the zstd window covers both); default 32 MiB.
	// Negative disables delta encoding.
	DeltaMax int
	// DictMax is the largest content compressed with the store's trained
	// zstd dictionary (see dict.go); default 32 KiB, at most InlineMax.
	// Negative disables dictionaries: none is trained or used for new
	// blobs (blobs stored with one still read).
	DictMax int
	// DictTrainAfter is how many small blobs (of at most DictMax bytes) a
	// Store inserts before it trains the store's first dictionary; later
	// ones are trained after three times as many as the store held when
	// the newest was. Default 64; negative trains only on TrainDict.
	DictTrainAfter int
	// InlineDeltas re-encodes the older versions a PutVersion moves
	// inside the write's transaction. By default (false) the write stores
	// its version whole and queues the re-encoding for Reencode, which
	// does it in transactions of its own (see reencode.go).
	InlineDeltas bool
	// MaxPending is the most queued re-encodings a write leaves: a write
	// that finds more, or more than 64 MiB of versions that queued writes
	// stored uncompressed, does the oldest itself, so the queue, and what
	// it keeps whole, stay bounded when writes outpace Reencode (the
	// background re-encoder waits for the store to be idle). Default
	// 1024 (0); negative is refused.
	MaxPending int
	// ReencodeIdle is how long the store must begin no write transaction
	// before the background re-encoder (StartReencoder) takes a queued
	// job, so that a session's requests never wait for one. Default
	// 30 ms; zero or negative is the default.
	ReencodeIdle time.Duration
	// Storage is where blobs and chunks are kept; default the SQLite
	// tables of the DB given to New (SQLiteStorage). Without the
	// HistoryStorage ability PutVersion stores every version whole.
	Storage Storage
	// Cap, when set, returns the store's size cap as tx reads it (0 for
	// none; wsstore.Open sets it to the runs' maxStoreBytes). Work the
	// store does of its own accord (queued re-encodings, a dictionary's
	// training) never takes a capped store past it: a transaction of that
	// work that would leave the database's pages in use (index.Tx.UsedBytes)
	// above the cap, and more than it found, is rolled back, and its jobs
	// stay queued.
	Cap func(ctx context.Context, tx *index.Tx) (int64, error)
}

// encoderWindow is the zstd window of whole blobs and chunks.
const encoderWindow = 2 << 20

// maxInline is the largest InlineMax, so no single-row blob is larger.
const maxInline = 64 << 20

// DefaultOptions returns the defaults used for zero Options fields.
func DefaultOptions() Options {
	return Options{Level: 3, InlineMax: 4 << 20, Now: time.Now, MaxChain: 16, DeltaMax: 32 << 20, DictMax: 32 << 10, DictTrainAfter: 64, MaxPending: 1024}
}

// Store is the content-addressable store: its metadata and transactions
// are an index.DB's, its objects a Storage's (by default that DB's own
// tables). It is safe for concurrent use.
type Store struct {
	db   *index.DB
	opts Options
	dec  *zstd.Decoder
	st   Storage
	hist HistoryStorage // st's history ability; nil without it
	// dicts holds the trained dictionaries this Store has loaded.
	dicts dicts

	// Large things reused across Puts; each list keeps a couple, so an
	// idle store holds about one Put's worth.
	encs  freeList[*zstd.Encoder]
	zbufs freeList[*[]byte] // compressed output, copied by SQLite on insert
	bufs  freeList[*[]byte] // Put's read buffer, then its chunker's

	// deltas keeps delta codecs for the next re-encoding, deltaDecs a
	// decoder for the next delta read (nil: none kept).
	deltas    deltaCodecs
	deltaDecs deltaDecoders
	// jobContent is the content of the new version of the last
	// re-encoding job, for the next, which usually replaces it.
	jobContent knownContent

	// kick wakes the background re-encoder (StartReencoder) after a
	// write queued work.
	kick chan struct{}

	// streams are the Puts in progress that commit their chunks before
	// the blob that lists them (OldestStream).
	streams streams

	// compressions counts compress calls, so tests can prove that stored
	// content is not compressed again.
	compressions atomic.Int64
	// hashes counts the content a Put hashed (sum), and decodes the whole
	// blobs decoded (decode), for the same kind of proof.
	hashes, decodes atomic.Int64
	// chunkReads counts the chunks read, so tests can prove a range
	// read leaves the others alone.
	chunkReads atomic.Int64
	// dictLoads counts the dictionaries read from storage and built.
	dictLoads atomic.Int64
	// stalePlans counts queued re-encodings whose plan the store had
	// moved past by the time it was to be stored.
	stalePlans atomic.Int64
	// planned, when set (tests), runs between a job's plan and its write
	// transaction; trainPlanned between a training's building and its
	// listing (trainAside).
	planned, trainPlanned func()
	// runners counts the background runners started (StartReencoder):
	// while one runs, a write leaves a training that is due to it.
	runners atomic.Int32
	// capHeld is 1 + the index's write count when the background runner
	// last found a job that did not fit under Options.Cap (0: none): it
	// tries again only after another write, which may have made room.
	capHeld atomic.Uint64
}

// withDefaults fills opts' zero fields with DefaultOptions' and checks
// the rest: store.invalid_options for a bad one.
func (opts Options) withDefaults() (Options, error) {
	d := DefaultOptions()
	if opts.Level == 0 {
		opts.Level = d.Level
	}
	if opts.Level < 1 || opts.Level > 22 {
		return opts, wserr.New(wserr.InvalidOptions, "cas", "", "zstd level %d is not in 1..22", opts.Level)
	}
	if opts.InlineMax == 0 {
		opts.InlineMax = d.InlineMax
	}
	if opts.InlineMax < 1<<10 || opts.InlineMax > maxInline {
		return opts, wserr.New(wserr.InvalidOptions, "cas", "", "inline max %d is not in 1 KiB..64 MiB", opts.InlineMax)
	}
	if opts.Now == nil {
		opts.Now = d.Now
	}
	if opts.MaxChain == 0 {
		opts.MaxChain = d.MaxChain
	}
	if opts.MaxChain < 1 || opts.MaxChain > maxChainLimit {
		return opts, wserr.New(wserr.InvalidOptions, "cas", "", "max chain %d is not in 1..%d", opts.MaxChain, maxChainLimit)
	}
	if opts.DeltaMax == 0 {
		opts.DeltaMax = d.DeltaMax
	}
	if opts.MaxPending < 0 {
		return opts, wserr.New(wserr.InvalidOptions, "cas", "", "max pending %d is negative (0: the default)", opts.MaxPending)
	}
	if opts.MaxPending == 0 {
		opts.MaxPending = d.MaxPending
	}
	if opts.ReencodeIdle <= 0 {
		opts.ReencodeIdle = reencodeIdle
	}
	if opts.DeltaMax > 256<<20 {
		return opts, wserr.New(wserr.InvalidOptions, "cas", "", "delta max %d is over 256 MiB", opts.DeltaMax)
	}
	if opts.DictMax == 0 {
		opts.DictMax = min(d.DictMax, opts.InlineMax)
	}
	if opts.DictMax > opts.InlineMax {
		return opts, wserr.New(wserr.InvalidOptions, "cas", "", "dict max %d is over inline max %d", opts.DictMax, opts.InlineMax)
	}
	if opts.DictTrainAfter == 0 {
		opts.DictTrainAfter = d.DictTrainAfter
	}
	return opts, nil
}

// Validate reports what New would refuse in opts, store.invalid_options,
// without opening anything.
func (opts Options) Validate() error {
	_, err := opts.withDefaults()
	return err
}

// New returns a Store on db, keeping objects in opts.Storage. It fails with store.invalid_options for bad
// options.
func New(db *index.DB, opts Options) (*Store, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	newEncoder := func() (*zstd.Encoder, error) {
		return zstd.NewWriter(nil,
			zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(opts.Level)),
			zstd.WithEncoderConcurrency(1),
			// zstd's own level 3 uses a 2 MiB window for large input:
			// matches further back than that within a 4 MiB chunk are
			// rare, and the encoder keeps a window's worth of history.
			zstd.WithWindowSize(encoderWindow),
			zstd.WithLowerEncoderMem(true),
			zstd.WithEncoderCRC(false), // BLAKE3 verifies every read
			zstd.WithZeroFrames(true))
	}
	enc, err := newEncoder()
	if err != nil {
		return nil, fmt.Errorf("cas: zstd encoder: %w", err)
	}
	dec, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(runtime.GOMAXPROCS(0)),
		zstd.WithDecoderMaxMemory(128<<20))
	if err != nil {
		return nil, fmt.Errorf("cas: zstd decoder: %w", err)
	}
	if opts.Storage == nil {
		opts.Storage = NewSQLiteStorage()
	}
	s := &Store{db: db, opts: opts, dec: dec, st: opts.Storage, kick: make(chan struct{}, 1)}
	s.hist, _ = opts.Storage.(HistoryStorage)
	s.dicts.loaded = map[Hash]*dictCodec{}
	s.encs = freeList[*zstd.Encoder]{keep: 2, free: []*zstd.Encoder{enc}, new: func() *zstd.Encoder {
		e, err := newEncoder()
		if err != nil {
			panic(err) // the same options succeeded above
		}
		return e
	}}
	s.zbufs = freeList[*[]byte]{keep: 2, new: func() *[]byte { return new([]byte) }}
	bufLen := max(chunkerMin, opts.InlineMax+1)
	s.bufs = freeList[*[]byte]{keep: 2, new: func() *[]byte { b := make([]byte, bufLen); return &b }}
	return s, nil
}

// DB returns the index the store writes to.
func (s *Store) DB() *index.DB { return s.db }

func (s *Store) now() int64 { return s.opts.Now().UnixNano() }

func (s *Store) clock() time.Time { return s.opts.Now() }

// compress returns the stored form of b and its codec: zstd when it
// shrinks the data by at least 1/32, raw otherwise. The caller must call
// release once it no longer needs data.
func (s *Store) compress(b []byte) (data []byte, codec Codec, release func()) {
	s.compressions.Add(1)
	enc := s.encs.get()
	zp := s.zbufs.get()
	if need := zbound(len(b)); cap(*zp) < need {
		// A buffer for a chunk is made for the largest chunk, so a stream
		// of chunks allocates it once rather than again for every chunk
		// larger than all before it.
		if len(b) >= minChunk && len(b) <= maxChunk {
			need = zbound(maxChunk)
		}
		*zp = make([]byte, 0, need)
	}
	z := enc.EncodeAll(b, (*zp)[:0])
	s.encs.put(enc)
	*zp = z[:0]
	release = func() { s.zbufs.put(zp) }
	if len(z) < len(b)-len(b)/32 {
		return z, CodecZstd, release
	}
	return b, CodecRaw, release
}

// zbound is the room compress gives n bytes: zstd stores incompressible
// input in raw blocks with a few bytes of framing, so the output buffer
// never grows by doubling.
func zbound(n int) int { return n + n>>10 + 1<<10 }

// Put stores the content read from r and returns its address. Content
// larger than Options.InlineMax is split into chunks and streamed, so memory
// stays bounded whatever r's length. Storing content that is already present
// writes nothing new. On error nothing references what was written, so a
// failed Put leaves at most garbage for gc, never a partial blob; one that
// streamed frees the chunks it stored that no other Put in progress holds
// and no blob lists, whatever gc's grace (holds.go).
func (s *Store) Put(ctx context.Context, r io.Reader) (Hash, error) {
	if r == nil {
		return Hash{}, wserr.New(wserr.InvalidArgument, "put", "", "nil reader")
	}
	bp := s.bufs.get()
	defer s.bufs.put(bp)
	buf := *bp
	// Read one byte more than fits in a row to tell which kind this is;
	// what was read stays in buf for the chunker to go on from.
	n, err := fill(r, buf[:s.opts.InlineMax+1])
	switch {
	case err == io.EOF:
		return s.PutBytes(ctx, nil, buf[:n])
	case err != nil:
		return Hash{}, fmt.Errorf("put: read: %w", err)
	}
	return s.putChunked(ctx, nil, newChunker(r, buf, n))
}

// fill reads into b until it is full (err nil) or r ends (io.EOF, with
// what was read). Unlike io.ReadFull, it passes on every other error as
// it is: a source that fails with io.ErrUnexpectedEOF (a base64 or
// multipart stream cut short) must fail the Put, not end the content.
func fill(r io.Reader, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := r.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// PutBytes stores b and returns its address. If tx is not nil the objects
// are written in it, so the blob commits with whatever references it;
// otherwise PutBytes commits on its own. Errors are the storage's and the
// index's.
func (s *Store) PutBytes(ctx context.Context, tx *index.Tx, b []byte) (Hash, error) {
	if len(b) > s.opts.InlineMax {
		return s.putChunked(ctx, tx, bytesChunker(b))
	}
	h := s.sum(b)
	if err := s.putHashed(ctx, tx, h, b, nil); err != nil {
		return Hash{}, err
	}
	if err := s.trainInWrite(ctx, tx); err != nil {
		return Hash{}, fmt.Errorf("put %s: %w", h.Short(), err)
	}
	return h, nil
}

// putHashed stores b, of address h, as one blob object; pre, when not
// nil, is its stored form compressed already (Prepare).
func (s *Store) putHashed(ctx context.Context, tx *index.Tx, h Hash, b []byte, pre *storedForm) error {
	err := s.storeOnce(ctx, tx, KindBlob, h, b, pre, func(tx *index.Tx, f storedForm) error {
		release, err := s.settleDict(ctx, tx, b, &f)
		defer release()
		if err != nil {
			return err
		}
		return s.st.Put(ctx, tx, Object{Kind: KindBlob, Hash: h, Size: int64(len(b)), Stored: int64(len(f.data)),
			Codec: f.codec, Base: f.base, Data: f.data, Created: s.clock()})
	}, nil)
	if err != nil {
		return fmt.Errorf("put %s: %w", h.Short(), err)
	}
	return nil
}

// sum is the address of content a Put stores, counted so tests can prove
// a write hashes its content once.
func (s *Store) sum(b []byte) Hash {
	s.hashes.Add(1)
	return Sum(b)
}

// Collected is the error of a write whose content, stored by Put before
// the transaction that references it, a gc took in between: one in
// another process, or one with no grace (in this process, Hold keeps it).
// It is store.busy, since the same write succeeds when sent again; err is
// the cause (cas.ErrNotFound) and is kept in the chain.
func Collected(op string, h Hash, err error) error {
	return fmt.Errorf("%w: %w", wserr.New(wserr.Busy, op, "", "%s: a gc collected this content before the write referenced it (one in another process, or one with no grace); nothing was changed, write it again", h.Short()), err)
}

// GoneMeanwhile returns rc, a stream of the content h of the file named
// path, explaining a read that fails as store.corrupt (a chunk missing)
// when now, asked then, finds that the file no longer holds h: it holds
// other content, or it, its run or its checkpoint is gone (a not-found
// code). The file was changed or removed while it streamed and a gc
// collected its old chunks: that is store.conflict, read it again.
// Content missing from a file that still holds it stays the
// store.corrupt it is.
func GoneMeanwhile(rc io.ReadCloser, op, path string, h Hash, now func() (Hash, error)) io.ReadCloser {
	return &goneReader{ReadCloser: rc, op: op, path: path, h: h, now: now}
}

type goneReader struct {
	io.ReadCloser
	op, path string
	h        Hash
	now      func() (Hash, error)
}

func (r *goneReader) Read(b []byte) (int, error) {
	n, err := r.ReadCloser.Read(b)
	if err != nil && wserr.Is(err, wserr.Corrupt) && r.gone() {
		err = wserr.New(wserr.Conflict, r.op, r.path, "the file changed while it streamed, and a gc collected the content it had: read it again")
	}
	return n, err
}

// gone reports whether the file no longer holds the streamed content.
func (r *goneReader) gone() bool {
	cur, err := r.now()
	switch wserr.CodeOf(err) {
	case "":
		return cur != r.h
	case wserr.FileNotFound, wserr.NotFound, wserr.RunNotFound, wserr.CheckpointNotFound:
		return true
	}
	return false
}

// Touch refreshes the created time of the blob at h in tx, so a gc that
// runs after tx commits counts it as young: callers that stored a blob in
// an earlier transaction call it in the transaction that references it.
// A blob written under TouchSlack ago is left as it is. If the blob is
// gone, a gc took it after it was stored: it fails with Collected
// (store.busy, wrapping ErrNotFound).
func (s *Store) Touch(ctx context.Context, tx *index.Tx, h Hash) (bool, error) {
	ok, err := s.st.Touch(ctx, tx, KindBlob, h, s.clock())
	if err == nil && !ok {
		err = Collected("touch", h, notFound("touch", h))
	}
	return ok, err
}

// storeOnce stores content b at h as an object of kind unless one is there
// already: an existing object is only touched, so its content is never
// compressed again. also, if not nil, runs in the transaction that
// touches or stores it. Without tx it looks on the read pool first, so
// repeating a Put takes the write lock only for the touch. A blob's
// content is compressed as compressBlob does, a chunk's plainly.
func (s *Store) storeOnce(ctx context.Context, tx *index.Tx, kind Kind, h Hash, b []byte, pre *storedForm,
	insert func(tx *index.Tx, f storedForm) error, also func(tx *index.Tx) error) error {
	exists := true
	if tx == nil {
		_ = s.db.View(ctx, func(rtx *index.Tx) error {
			ok, err := s.st.Has(ctx, rtx, kind, h)
			exists = ok && err == nil
			return nil
		})
	}
	if exists {
		var touched bool
		err := s.update(ctx, tx, func(tx *index.Tx) error {
			var err error
			if touched, err = s.st.Touch(ctx, tx, kind, h, s.clock()); err != nil || !touched || also == nil {
				return err
			}
			return also(tx)
		})
		if err != nil || touched {
			return err
		}
	}
	// Not there (or swept since the look): store it.
	var f storedForm
	var release func()
	switch {
	case pre != nil:
		f, release = *pre, func() {}
	case kind == KindBlob:
		f, release = s.compressBlob(b)
	default:
		f.data, f.codec, release = s.compress(b)
	}
	defer release()
	return s.update(ctx, tx, func(tx *index.Tx) error {
		if err := insert(tx, f); err != nil || also == nil {
			return err
		}
		return also(tx)
	})
}

func (s *Store) update(ctx context.Context, tx *index.Tx, fn func(tx *index.Tx) error) error {
	if tx != nil {
		return fn(tx)
	}
	return s.db.Update(ctx, fn)
}

// putChunked stores the chunks c yields as chunk objects, each in its own
// transaction (or all in tx if given), then the blob object listing them.
// Chunks already present are not recompressed. Without tx, a Put that
// ends before its blob is stored frees the chunks it stored that nothing
// else uses (holds.go).
func (s *Store) putChunked(ctx context.Context, tx *index.Tx, c *chunker) (_ Hash, err error) {
	var hold *putHold
	if tx == nil {
		defer s.Hold()()
		hold = s.newPutHold()
		defer func() {
			if err != nil {
				s.abandon(ctx, hold)
			}
		}()
	}
	whole := newHasher()
	defer freeHasher(whole)
	var refs []ChunkRef
	var off int64
	for {
		if err := ctx.Err(); err != nil {
			return Hash{}, fmt.Errorf("put: %w", index.Translate(err))
		}
		b, err := c.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return Hash{}, fmt.Errorf("put: read: %w", err)
		}
		whole.Write(b)
		ch := Sum(b)
		if err := s.putChunk(ctx, tx, hold, ch, b); err != nil {
			return Hash{}, fmt.Errorf("put chunk %s: %w", ch.Short(), err)
		}
		refs = append(refs, ChunkRef{Hash: ch, Off: off, Size: int64(len(b))})
		off += int64(len(b))
	}
	h := whole.sum()
	err = s.update(ctx, tx, func(tx *index.Tx) error {
		if hold != nil {
			if err := hold.release(ctx, tx); err != nil {
				return err
			}
		}
		return s.st.Put(ctx, tx, Object{Kind: KindBlob, Hash: h, Size: off, Codec: CodecChunked, Chunks: refs, Created: s.clock()})
	})
	if tx == nil && index.IsForeignKey(err) {
		// Only a gc can take a chunk this Put committed, and one in this
		// process keeps them (OldestStream).
		return Hash{}, wserr.New(wserr.Busy, "put", "", "%s: a gc collected chunks of this content while it streamed (one in another process, or any whose grace is shorter than the write took); nothing was stored, write it again", h.Short())
	}
	if err != nil {
		return Hash{}, fmt.Errorf("put %s: %w", h.Short(), err)
	}
	return h, nil
}

// streams records when each Put streaming its chunks in transactions of
// their own began.
type streams struct {
	mu     sync.Mutex
	next   uint64
	starts map[uint64]int64
}

// begin records a stream beginning at start; end forgets it.
func (st *streams) begin(start int64) (end func()) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.starts == nil {
		st.starts = map[uint64]int64{}
	}
	id := st.next
	st.next++
	st.starts[id] = start
	return func() {
		st.mu.Lock()
		defer st.mu.Unlock()
		delete(st.starts, id)
	}
}

// Hold keeps every object this process commits from now on from any gc
// in this process until release is called, whatever the gc's grace (see
// OldestStream): for a writer that commits objects in transactions of
// their own and references them in a later one, such as an archive
// import. A gc in another process is held off only by its grace.
func (s *Store) Hold() (release func()) {
	// An idempotent put may leave a row up to TouchSlack older.
	return s.streams.begin(s.now() - int64(TouchSlack))
}

// OldestStream returns the earliest created time (the store's clock, in
// nanoseconds) that a row written by a Put still in progress in this
// Store may carry, and whether one is in progress (a large Put, or a
// Hold). A large Put commits each chunk on its own and lists them in the
// blob only at its end, so a gc in this process keeps rows at least this
// young whatever its grace: with no grace it would otherwise delete the
// chunks of an upload still streaming. A gc in another process cannot see them: its grace must
// outlast the longest upload (the default, 15 minutes, does).
func (s *Store) OldestStream() (int64, bool) {
	s.streams.mu.Lock()
	defer s.streams.mu.Unlock()
	oldest, ok := int64(0), false
	for _, t := range s.streams.starts {
		if !ok || t < oldest {
			oldest, ok = t, true
		}
	}
	return oldest, ok
}

// putChunk stores chunk b at h; hold, if not nil, holds it in the same
// transaction.
func (s *Store) putChunk(ctx context.Context, tx *index.Tx, hold *putHold, h Hash, b []byte) error {
	var also func(tx *index.Tx) error
	if hold != nil {
		also = func(tx *index.Tx) error { return hold.hold(ctx, tx, h, s.now()) }
	}
	err := s.storeOnce(ctx, tx, KindChunk, h, b, nil, func(tx *index.Tx, f storedForm) error {
		return s.st.Put(ctx, tx, Object{Kind: KindChunk, Hash: h, Size: int64(len(b)), Stored: int64(len(f.data)),
			Codec: f.codec, Data: f.data, Created: s.clock()})
	}, also)
	if err == nil && hold != nil {
		hold.chunks = append(hold.chunks, h)
	}
	return err
}

// HasIn reports whether a blob with address h is stored, as tx sees it.
func (s *Store) HasIn(ctx context.Context, tx *index.Tx, h Hash) (bool, error) {
	ok, err := s.st.Has(ctx, tx, KindBlob, h)
	if err != nil {
		return false, fmt.Errorf("has %s: %w", h.Short(), err)
	}
	return ok, nil
}

// Has reports whether a blob with address h is stored.
func (s *Store) Has(ctx context.Context, h Hash) (bool, error) {
	var ok bool
	err := s.db.View(ctx, func(tx *index.Tx) error {
		var err error
		ok, err = s.st.Has(ctx, tx, KindBlob, h)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("has %s: %w", h.Short(), err)
	}
	return ok, nil
}

// Info describes a stored blob.
type Info struct {
	Hash   Hash  `json:"hash"`
	Size   int64 `json:"size"`   // plain bytes
	Stored int64 `json:"stored"` // bytes held, each distinct chunk once
	Codec  Codec `json:"codec"`
	Chunks int   `json:"chunks"`
	Base   Hash  `json:"base,omitzero"` // delta base or zstd dictionary, zero otherwise
	Depth  int   `json:"depth"`         // delta applications to read
}

// Stat describes the blob at h. It fails with ErrNotFound if there is none,
// and with ErrCorrupt if a delta's chain of bases is broken.
func (s *Store) Stat(ctx context.Context, h Hash) (Info, error) {
	var info Info
	err := s.db.View(ctx, func(tx *index.Tx) error {
		o, err := s.st.Stat(ctx, tx, KindBlob, h)
		if errors.Is(err, ErrNotFound) {
			return notFound("stat", h)
		}
		if err != nil {
			return err
		}
		info = Info{Hash: h, Size: o.Size, Stored: o.Stored, Codec: o.Codec, Base: o.Base}
		if info.Codec == CodecDelta {
			chain, err := s.chainOf(ctx, tx, h)
			if err != nil {
				return err
			}
			info.Depth = len(chain) - 1
		}
		if info.Codec == CodecChunked {
			info.Chunks = len(o.Chunks)
			n, err := s.chunkBytes(ctx, tx, o.Chunks, nil)
			if err != nil {
				return err
			}
			info.Stored += n
		}
		return nil
	})
	if err != nil {
		return Info{}, wrapOp("stat", h, err)
	}
	return info, nil
}

// Size returns the plain size of blob h. Unlike Stat it reads no more of
// its row than that. It fails with ErrNotFound if there is no such blob.
func (s *Store) Size(ctx context.Context, h Hash) (int64, error) {
	var n int64
	err := s.db.View(ctx, func(tx *index.Tx) error {
		if ps, ok := s.st.(plainSizer); ok {
			var err error
			n, err = ps.plainSize(ctx, tx, h)
			return err
		}
		o, err := s.st.Stat(ctx, tx, KindBlob, h)
		n = o.Size
		return err
	})
	if errors.Is(err, ErrNotFound) {
		return 0, notFound("size", h)
	}
	if err != nil {
		return 0, wrapOp("size", h, err)
	}
	return n, nil
}

// StoredBytes returns the bytes blob h takes as stored, read in tx (so a
// write transaction sees its own rows): the row's stored size, plus, for a
// chunked blob, its distinct chunks'. Unlike Stat it does not walk a
// delta's chain. It fails with ErrNotFound if there is no such blob.
func (s *Store) StoredBytes(ctx context.Context, tx *index.Tx, h Hash) (int64, error) {
	return s.StoredBytesApart(ctx, tx, h, Hash{})
}

// StoredBytesApart is StoredBytes less what blob next holds too: the
// chunks of a chunked h that next also lists (a large file's next
// version, appended to or patched, keeps every chunk the edit did not
// reach) do not count, since dropping h frees none of them. A zero next,
// or one that is not stored or not chunked, shares nothing. It fails with
// ErrNotFound if there is no blob h.
func (s *Store) StoredBytesApart(ctx context.Context, tx *index.Tx, h, next Hash) (int64, error) {
	if next == h {
		next = Hash{}
	}
	if ss, ok := s.st.(storedSizer); ok {
		n, whole, err := ss.storedSize(ctx, tx, h, next)
		if errors.Is(err, ErrNotFound) {
			return 0, notFound("stat", h)
		}
		if err != nil {
			return 0, wrapOp("stat", h, err)
		}
		if whole {
			return n, nil
		}
	}
	o, err := s.st.Stat(ctx, tx, KindBlob, h)
	if errors.Is(err, ErrNotFound) {
		return 0, notFound("stat", h)
	}
	if err != nil {
		return 0, wrapOp("stat", h, err)
	}
	n := o.Stored
	if o.Codec == CodecChunked {
		shared, err := s.chunksOf(ctx, tx, next)
		if err != nil {
			return 0, wrapOp("stat", h, err)
		}
		c, err := s.chunkBytes(ctx, tx, o.Chunks, shared)
		if err != nil {
			return 0, wrapOp("stat", h, err)
		}
		n += c
	}
	return n, nil
}

// chunksOf returns the set of chunks blob h lists: none for a zero h, a
// blob not stored or one not chunked.
func (s *Store) chunksOf(ctx context.Context, tx *index.Tx, h Hash) (map[Hash]bool, error) {
	if h.IsZero() {
		return nil, nil
	}
	o, err := s.st.Stat(ctx, tx, KindBlob, h)
	if errors.Is(err, ErrNotFound) || (err == nil && o.Codec != CodecChunked) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	set := make(map[Hash]bool, len(o.Chunks))
	for _, ref := range o.Chunks {
		set[ref.Hash] = true
	}
	return set, nil
}

// chunkBytes sums the stored bytes of the distinct chunks of refs but
// those in skip: a chunk listed twice (repeated content) is held once. A
// missing chunk counts nothing; Verify reports it.
func (s *Store) chunkBytes(ctx context.Context, tx *index.Tx, refs []ChunkRef, skip map[Hash]bool) (int64, error) {
	var n int64
	seen := make(map[Hash]bool, len(refs))
	for _, ref := range refs {
		if seen[ref.Hash] || skip[ref.Hash] {
			continue
		}
		seen[ref.Hash] = true
		c, err := s.st.Stat(ctx, tx, KindChunk, ref.Hash)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return 0, err
		}
		n += c.Stored
	}
	return n, nil
}

func notFound(op string, h Hash) error {
	return &wserr.Error{Code: wserr.NotFound, Op: op, Path: h.String(), Msg: "no such blob"}
}

func corrupt(op string, h Hash, format string, args ...any) error {
	return &wserr.Error{Code: wserr.Corrupt, Op: op, Path: h.String(), Msg: fmt.Sprintf(format, args...)}
}

func wrapOp(op string, h Hash, err error) error {
	var we *wserr.Error
	if errors.As(err, &we) {
		return err
	}
	return fmt.Errorf("%s %s: %w", op, h.Short(), err)
}
