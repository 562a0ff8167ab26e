package remote

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/wserr"
)

// Sentinel errors, matched with errors.Is. Each comes wrapped with a
// wserr code: ErrUnavailable with store.busy, ErrMissing with
// store.corrupt.
var (
	// ErrUnavailable: the object store did not answer, or answered with a
	// server error, after every retry. Nothing was recorded as pushed; a
	// later call picks up where this one stopped.
	ErrUnavailable = errors.New("object store unavailable")
	// ErrMissing: the local index says the object store holds an object
	// it does not have.
	ErrMissing = errors.New("object missing from the object store")
)

// Options configure a Storage. The zero value means the defaults given.
type Options struct {
	// PackSize is the size at which a pack is closed, default 8 MiB
	// (restic's range); an object at least this large is a pack of its
	// own.
	PackSize int
	// WriteThrough makes Put upload each object (as a pack of one) before
	// it records it, instead of keeping it in the local cache until Push
	// gathers it into packs. It costs a round trip per object inside the
	// write transaction; it is there for tests that read every object
	// back from the object store, and for stores that must never hold an
	// object only locally.
	WriteThrough bool
	// Uncached makes a read of a pushed object fetch it from the object
	// store even when the cache holds it, and keep nothing it fetched:
	// for checking what the object store holds (wsctl restore --verify).
	// An object not pushed yet is read from the cache, its one copy.
	Uncached bool
	// MaxAttempts bounds the attempts of one request (the SDK's standard
	// retryer, exponential backoff with jitter); default 5.
	MaxAttempts int
	// MaxBackoff bounds the wait between two attempts; default 2s.
	MaxBackoff time.Duration
	// HTTPClient, when set, carries the requests (tests).
	HTTPClient *http.Client
	// IdleTimeout is how long a request, once sent, may wait for the
	// first byte of its answer, and ten times it how long a connection
	// may go without a byte read (an upload or download stalled part
	// way), before the attempt is given up and retried, so that a server
	// that stops answering fails the request with ErrUnavailable
	// (store.busy) instead of holding it for good; default 30 seconds.
	// It does not apply to an HTTPClient given.
	IdleTimeout time.Duration
	// Now stamps objects Pull takes in and the locks on the object
	// store; default time.Now.
	Now func() time.Time
	// LockTTL is how long a sync or push lock holds unless released (a
	// device that crashed holding one blocks reclaims that long); default
	// one hour. It must exceed the longest sync: a sync lock is not
	// renewed.
	LockTTL time.Duration
	// LeaseTTL is how long the reclaim lease holds unless renewed or
	// released (a device that crashed holding it blocks every sync that
	// long); default DefaultLeaseTTL. A reclaim renews its lease once a
	// third of this has passed since the lease was written, as it goes and
	// from a heartbeat every tenth of it.
	LeaseTTL time.Duration
}

const defaultPackSize = 8 << 20

// Validate refuses, with store.invalid_options, a negative PackSize or
// MaxAttempts: zero asks for the default, and no negative one means
// anything. Open checks it.
func (o Options) Validate() error {
	if o.PackSize < 0 || o.MaxAttempts < 0 {
		return wserr.New(wserr.InvalidOptions, "remote", "", "pack size %d and max attempts %d must not be negative (0: the defaults)", o.PackSize, o.MaxAttempts)
	}
	return nil
}

func (o Options) withDefaults() Options {
	if o.PackSize <= 0 {
		o.PackSize = defaultPackSize
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 5
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = defaultMaxBackoff
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.LockTTL <= 0 {
		o.LockTTL = defaultLockTTL
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = DefaultLeaseTTL
	}
	return o
}

// Storage is the remote blob tier: a cas.Storage whose objects live on an
// S3-compatible object store, gathered into write-once packs, with its
// index (and the bytes not pushed yet) in the store's SQLite database,
// tables remote_objects, remote_chunks and remote_cache,
// which no other package names.
//
// Put records the object and keeps its stored form in remote_cache, in
// the caller's transaction, so a write never waits on the network and a
// failed upload loses nothing; Push uploads what is pending. Get reads the
// cache, else the object's byte range of its pack, checking the range's
// BLAKE3 against the index (the cas Store above verifies the content as
// always). It does not implement cas.HistoryStorage: its keys are
// write-once, so versions are stored whole.
type Storage struct {
	b    bucket
	loc  Location
	opts Options
	push sync.Mutex // one Push or Pull at a time
}

var _ cas.Storage = (*Storage)(nil)

// Open returns the tier at the s3:// URL (see ParseURL). It does not
// contact the object store. It fails with store.invalid_options for a bad
// URL or AWS configuration.
func Open(ctx context.Context, url string, opts Options) (*Storage, error) {
	loc, err := ParseURL(url)
	if err != nil {
		return nil, err
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	b, err := newS3Bucket(ctx, loc, opts)
	if err != nil {
		return nil, err
	}
	return &Storage{b: b, loc: loc, opts: opts}, nil
}

// Location returns where the tier keeps its objects.
func (s *Storage) Location() Location { return s.loc }

// Uploads returns how many objects this Storage wrote to the object store
// and how many writes found their key taken (a 412: the bytes were there).
func (s *Storage) Uploads() (written, existed int64) {
	if sb, ok := s.b.(*s3Bucket); ok {
		return sb.puts.Load(), sb.exists.Load()
	}
	return 0, 0
}

func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromNanos(n int64) time.Time { return time.Unix(0, n) }

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

func notFound(op string, h cas.Hash) error {
	return wserr.New(wserr.NotFound, op, h.String(), "no object at this address")
}

func corrupt(key, msg string) error { return wserr.New(wserr.Corrupt, "remote get", key, "%s", msg) }

// baseArg stores a zero base as NULL.
func baseArg(h cas.Hash) any {
	if h.IsZero() {
		return nil
	}
	return h
}

// Put records o, as cas.Storage.Put says: with its stored form in the
// cache, or (WriteThrough) after uploading it.
func (s *Storage) Put(ctx context.Context, tx *index.Tx, o cas.Object) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	res, err := tx.ExecContext(ctx, `UPDATE remote_objects SET created = max(created, ?) WHERE kind = ? AND hash = ?`,
		nanos(o.Created), int(o.Kind), o.Hash)
	if err != nil {
		return index.Translate(err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return nil
	}
	chunked := o.Kind == cas.KindBlob && o.Codec == cas.CodecChunked
	var pack any // NULL: pending
	var off int64
	var sum any
	if s.opts.WriteThrough {
		dev, err := deviceIn(ctx, tx)
		if err != nil {
			return err
		}
		idx, err := s.upload(ctx, []cas.Object{o}, chunked, dev)
		if err != nil {
			return err
		}
		pack, off, sum = idx.Pack, idx.Objects[0].Off, idx.Objects[0].Sum
		if chunked {
			pack = ""
		}
	}
	stored := int64(len(o.Data))
	if chunked {
		stored = 0
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO remote_objects (kind, hash, size, stored, codec, base, created, pack, off, sum)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		int(o.Kind), o.Hash, o.Size, stored, int(o.Codec), baseArg(o.Base), nanos(o.Created), pack, off, sum); err != nil {
		return index.Translate(err)
	}
	if chunked {
		for i, c := range o.Chunks {
			if _, err := tx.ExecContext(ctx, `INSERT INTO remote_chunks (blob, idx, chunk, off) VALUES (?, ?, ?, ?)`,
				o.Hash, i, c.Hash, c.Off); err != nil {
				return index.Translate(err)
			}
		}
		return nil
	}
	if pack == nil {
		_, err := tx.ExecContext(ctx, `INSERT INTO remote_cache (kind, hash, data) VALUES (?, ?, ?)`, int(o.Kind), o.Hash, nonNil(o.Data))
		return index.Translate(err)
	}
	return nil
}

// row is an object's record in remote_objects.
type row struct {
	Size    int64          `db:"size"`
	Stored  int64          `db:"stored"`
	Codec   int            `db:"codec"`
	Base    cas.Hash       `db:"base"`
	Created int64          `db:"created"`
	Pack    sql.NullString `db:"pack"`
	Off     int64          `db:"off"`
	Sum     cas.Hash       `db:"sum"`
}

func (r row) object(kind cas.Kind, h cas.Hash) cas.Object {
	return cas.Object{Kind: kind, Hash: h, Size: r.Size, Stored: r.Stored, Codec: cas.Codec(r.Codec), Base: r.Base, Created: fromNanos(r.Created)}
}

func findRow(ctx context.Context, tx *index.Tx, op string, kind cas.Kind, h cas.Hash) (row, error) {
	var r row
	err := tx.GetContext(ctx, &r, `SELECT size, stored, codec, base, created, pack, off, sum FROM remote_objects WHERE kind = ? AND hash = ?`, int(kind), h)
	if errors.Is(err, sql.ErrNoRows) {
		return row{}, notFound(op, h)
	}
	return r, index.Translate(err)
}

func chunkList(ctx context.Context, tx *index.Tx, h cas.Hash) ([]cas.ChunkRef, error) {
	var refs []cas.ChunkRef
	err := tx.SelectContext(ctx, &refs, `SELECT rc.chunk, rc.off, coalesce(o.size, -1) AS size FROM remote_chunks rc
		LEFT JOIN remote_objects o ON o.kind = 1 AND o.hash = rc.chunk WHERE rc.blob = ? ORDER BY rc.idx`, h)
	return refs, index.Translate(err)
}

// Get calls fn with the object at h, reading its bytes from the cache or
// its pack. A read in a write transaction keeps what it fetched in the
// cache. A pack the object store lacks fails with ErrMissing, a range
// whose hash is not the index's with store.corrupt.
func (s *Storage) Get(ctx context.Context, tx *index.Tx, kind cas.Kind, h cas.Hash, fn func(o cas.Object) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r, err := findRow(ctx, tx, "get", kind, h)
	if err != nil {
		return err
	}
	o := r.object(kind, h)
	if kind == cas.KindBlob && o.Codec == cas.CodecChunked {
		if o.Chunks, err = chunkList(ctx, tx, h); err != nil {
			return err
		}
		return fn(o)
	}
	pushed := r.Pack.Valid && r.Pack.String != ""
	if !s.opts.Uncached || !pushed {
		err = tx.GetContext(ctx, &o.Data, `SELECT data FROM remote_cache WHERE kind = ? AND hash = ?`, int(kind), h)
		switch {
		case err == nil:
			return fn(o)
		case !errors.Is(err, sql.ErrNoRows):
			return index.Translate(err)
		case !pushed:
			return wserr.New(wserr.Corrupt, "get", h.String(), "object neither cached nor pushed")
		}
	}
	if o.Data, err = s.fetch(ctx, r.Pack.String, r.Off, r.Stored, r.Sum); err != nil {
		return fmt.Errorf("%s %s: %w", kind, h.Short(), err)
	}
	if tx.Writable() && !s.opts.Uncached {
		if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO remote_cache (kind, hash, data) VALUES (?, ?, ?)`, int(kind), h, o.Data); err != nil {
			return index.Translate(err)
		}
	}
	return fn(o)
}

// fetch reads n bytes at off of the pack at key and checks them against
// sum.
func (s *Storage) fetch(ctx context.Context, key string, off, n int64, sum cas.Hash) ([]byte, error) {
	b, err := s.b.get(ctx, key, off, n)
	if err != nil {
		return nil, err
	}
	if int64(len(b)) != n || cas.Sum(b) != sum {
		return nil, fmt.Errorf("%w: %w", corrupt(key, fmt.Sprintf("bytes %d+%d do not hash to the index's sum", off, n)), cas.ErrCorrupt)
	}
	return b, nil
}

// Has reports whether an object of kind is recorded at h.
func (s *Storage) Has(ctx context.Context, tx *index.Tx, kind cas.Kind, h cas.Hash) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	var one int
	err := tx.GetContext(ctx, &one, `SELECT 1 FROM remote_objects WHERE kind = ? AND hash = ?`, int(kind), h)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, index.Translate(err)
}

// Stat returns the object at h without its data, from the local index.
func (s *Storage) Stat(ctx context.Context, tx *index.Tx, kind cas.Kind, h cas.Hash) (cas.Object, error) {
	if err := ctx.Err(); err != nil {
		return cas.Object{}, err
	}
	r, err := findRow(ctx, tx, "stat", kind, h)
	if err != nil {
		return cas.Object{}, err
	}
	o := r.object(kind, h)
	if kind == cas.KindBlob && o.Codec == cas.CodecChunked {
		if o.Chunks, err = chunkList(ctx, tx, h); err != nil {
			return cas.Object{}, err
		}
	}
	return o, nil
}

// Touch raises the created time of the object at h.
func (s *Storage) Touch(ctx context.Context, tx *index.Tx, kind cas.Kind, h cas.Hash, now time.Time) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	res, err := tx.ExecContext(ctx, `UPDATE remote_objects SET created = ?1 WHERE kind = ?2 AND hash = ?3 AND created < ?1 - ?4`,
		nanos(now), int(kind), h, int64(cas.TouchSlack))
	if err != nil {
		return false, index.Translate(err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return true, nil
	}
	return s.Has(ctx, tx, kind, h)
}

// Delete removes the record of the object at h (and its cached bytes) if
// it is older than cutoff; a chunk a blob lists stays. Its bytes on the
// object store stay too: packs are write-once, and a pack may hold objects
// other devices still use (docs/remote.md).
func (s *Storage) Delete(ctx context.Context, tx *index.Tx, kind cas.Kind, h cas.Hash, cutoff time.Time) (int64, bool, error) {
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	q := `DELETE FROM remote_objects WHERE kind = 0 AND hash = ?1 AND created < ?2 RETURNING stored, listed`
	if kind == cas.KindChunk {
		q = `DELETE FROM remote_objects WHERE kind = 1 AND hash = ?1 AND created < ?2
		AND NOT EXISTS (SELECT 1 FROM remote_chunks WHERE chunk = ?1) RETURNING stored, listed`
	}
	var stored, listed int64
	err := tx.QueryRowContext(ctx, q, h, nanos(cutoff)).Scan(&stored, &listed)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, index.Translate(err)
	}
	if listed != 0 {
		// The device's published object set names it: the next sync
		// segment says it is gone (reclaim reads it).
		if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO remote_dropped (kind, hash) VALUES (?, ?)`, int(kind), h); err != nil {
			return 0, false, index.Translate(err)
		}
	}
	if kind == cas.KindBlob {
		if _, err := tx.ExecContext(ctx, `DELETE FROM remote_chunks WHERE blob = ?`, h); err != nil {
			return 0, false, index.Translate(err)
		}
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM remote_cache WHERE kind = ? AND hash = ?`, int(kind), h); err != nil {
		return 0, false, index.Translate(err)
	}
	return stored, true, nil
}

const iteratePage = 512

// Iterate calls fn with every object of kind, in hash order, a page at a
// time with no cursor open while fn runs.
func (s *Storage) Iterate(ctx context.Context, tx *index.Tx, kind cas.Kind, fn func(o cas.Object) error) error {
	after := []byte{}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		var page []struct {
			Hash cas.Hash `db:"hash"`
			row
		}
		if err := tx.SelectContext(ctx, &page, `SELECT hash, size, stored, codec, base, created, pack, off, sum FROM remote_objects
			WHERE kind = ? AND hash > ? ORDER BY hash LIMIT ?`, int(kind), after, iteratePage); err != nil {
			return index.Translate(err)
		}
		for _, p := range page {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := fn(p.object(kind, p.Hash)); err != nil {
				return err
			}
		}
		if len(page) < iteratePage {
			return nil
		}
		last := page[len(page)-1].Hash
		after = last[:]
	}
}
