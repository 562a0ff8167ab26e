package cas

import (
	"context"
	"fmt"
	"time"

	"github.com/wsstore/wsstore/index"
)

// Kind tells the two kinds of stored object apart: a blob (what a Hash
// names to callers of the Store) and a chunk (a piece of a chunked blob).
// A blob and a chunk with the same address are different objects.
type Kind uint8

// Kinds of stored object.
const (
	KindBlob  Kind = 0
	KindChunk Kind = 1
)

// String returns "blob" or "chunk", as verify reports name them.
func (k Kind) String() string {
	switch k {
	case KindBlob:
		return "blob"
	case KindChunk:
		return "chunk"
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Object is one stored object in its stored form: what a Storage keeps,
// opaque to it. Only the Store encodes and decodes Data.
type Object struct {
	Kind Kind
	Hash Hash
	// Size is the length of the plain content.
	Size int64
	// Stored is the number of bytes Data holds; 0 for a chunked blob,
	// whose chunks are objects of their own.
	Stored int64
	Codec  Codec
	// Base is the blob a CodecDelta object is a delta against; zero
	// otherwise.
	Base Hash
	// Data is the stored form; nil for a chunked blob.
	Data []byte
	// Chunks lists a chunked blob's chunks in order; nil otherwise.
	Chunks []ChunkRef
	// Created is when the object was last written or re-used, so a sweep
	// with a cutoff never deletes what a concurrent writer has just put.
	Created time.Time
}

// ChunkRef is one entry of a chunked blob's chunk list.
type ChunkRef struct {
	Hash Hash  `db:"chunk"`
	Off  int64 `db:"off"` // plain offset of the chunk in the blob
	// Size is the chunk's plain size as its own object records it; -1
	// when no chunk object has the address (a damaged store).
	Size int64 `db:"size"`
}

// TouchSlack is how much older than asked a Touch or an idempotent Put may
// leave an object's created time. Rewriting a row costs as much as writing
// it (SQLite rewrites the whole record, data included), and content stored
// a moment ago needs no newer time: gc's grace is minutes.
const TouchSlack = time.Second

// Storage keeps stored objects. It is what the Store writes blobs and
// chunks to and reads them from; everything above it (codecs, chunking,
// delta histories, verification) is the Store's, so no implementation can
// make Store.Get return bytes that do not hash to their address: an
// implementation that loses or alters bytes makes reads fail with
// ErrCorrupt or its own error, never succeed.
//
// Every method takes the caller's transaction, never nil: writes (Put,
// Touch, Delete) commit or roll back with it, so a blob commits with the
// rows that reference it, and reads see its snapshot. An implementation
// that keeps bytes elsewhere (an object store, write-once keys) writes
// them before it records them in tx; a rollback then leaves only bytes
// nothing records, which its own sweep may reclaim, never a record
// without its bytes. Reads work in a read or a write transaction; writes
// need a write one.
//
// Errors: Get and Stat fail with an error matching ErrNotFound (errors.Is)
// when there is no object of the kind at the address; every method
// returns ctx's error, or one wrapping it, when ctx is done. Methods are
// safe for concurrent use in separate transactions.
type Storage interface {
	// Put stores o. If an object of o's kind and hash is stored already,
	// Put leaves its stored form as it is and only raises its created
	// time to o.Created (less TouchSlack at most): content is stored once.
	// A chunked blob's chunks must be stored first, in tx or before.
	Put(ctx context.Context, tx *index.Tx, o Object) error
	// Get calls fn with the object of kind at h, Data and Chunks filled
	// in. o.Data is valid only until fn returns (it may be a driver's
	// buffer): fn copies or decodes what it keeps. Get returns fn's error
	// as it is.
	Get(ctx context.Context, tx *index.Tx, kind Kind, h Hash, fn func(o Object) error) error
	// Has reports whether an object of kind is stored at h.
	Has(ctx context.Context, tx *index.Tx, kind Kind, h Hash) (bool, error)
	// Stat returns the object of kind at h without Data (Chunks filled
	// in).
	Stat(ctx context.Context, tx *index.Tx, kind Kind, h Hash) (Object, error)
	// Touch raises the created time of the object of kind at h to now
	// (less TouchSlack at most) and reports whether there is one.
	Touch(ctx context.Context, tx *index.Tx, kind Kind, h Hash, now time.Time) (bool, error)
	// Delete removes the object of kind at h if it was created before
	// cutoff, and reports the bytes it held and whether it went. It never
	// removes a chunk that a blob stored as tx sees it lists (one put in
	// tx, or since the caller last looked, included), whatever its age:
	// maintenance relies on it to keep chunks a concurrent writer's blob
	// needs. A blob goes with its chunk list, not its chunks.
	Delete(ctx context.Context, tx *index.Tx, kind Kind, h Hash, cutoff time.Time) (stored int64, deleted bool, err error)
	// Iterate calls fn with every object of kind stored as tx sees it,
	// with its created time, as Stat returns it but without Chunks, in no
	// promised order, each exactly once. fn may use
	// tx, also to delete the object it was given. Iterate stops at fn's
	// first error and returns it.
	Iterate(ctx context.Context, tx *index.Tx, kind Kind, fn func(o Object) error) error
}

// HistoryStorage is the optional ability of a Storage that PutVersion's
// delta histories need (see delta.go): reading a blob with its place in a
// history, re-encoding an older version against a newer one in place of
// its stored form, and recording history numbers. The Store checks for it
// by type assertion; over a Storage without it PutVersion stores versions
// whole, as PutBytes does. An implementation whose keys are write-once may
// leave it out, or implement Reencode as a new object that supersedes the
// old one within tx.
type HistoryStorage interface {
	Storage
	// Version returns the blob at h with Data and its history; it fails
	// with ErrNotFound if there is none.
	Version(ctx context.Context, tx *index.Tx, h Hash) (Version, error)
	// Reencode replaces the stored form of the blob at h by data in codec
	// (a delta against base, or whole with base zero), keeping its
	// created time and history, and adds the bytes this saves to its
	// Saved count.
	Reencode(ctx context.Context, tx *index.Tx, h Hash, codec Codec, base Hash, data []byte) error
	// PutAt is Put of a blob not stored yet, at the position slot that a
	// Reencode in tx freed (a Version's Slot), so its bytes fill the room
	// the old form left; slot 0 means anywhere. The position is a hint:
	// an implementation may ignore it.
	PutAt(ctx context.Context, tx *index.Tx, o Object, slot Slot) error
	// SetHistory records hist for the blob at h and raises its created
	// time to created unless that is zero. A hist that is not Head clears
	// the open list.
	SetHistory(ctx context.Context, tx *index.Tx, h Hash, hist History, created time.Time) error
	// Gens calls fn with the hash and history number of every blob that
	// belongs to a history (Gen above 0), each once, in no promised
	// order; blobs in none are left out. A collector compares the numbers
	// its snapshot saw with those its sweep sees (see BlobRecord.Gen). fn
	// may use tx; Gens stops at fn's first error and returns it.
	Gens(ctx context.Context, tx *index.Tx, fn func(h Hash, gen int64) error) error
}

// Batcher is the optional ability of a Storage to make many single-object
// calls in one transaction for less than each costs on its own: a sweep
// re-reads and deletes thousands of objects in its write transaction.
// Maintenance checks for it by type assertion and otherwise calls the
// Storage's own methods, with the same results. SQLiteStorage's batch
// prepares its statements once in tx, which the index's statement cache
// cannot do in a process's first write transaction.
type Batcher interface {
	// Batch returns a Batch working in tx; Close it before tx ends.
	Batch(ctx context.Context, tx *index.Tx) (Batch, error)
}

// Batch makes single-object calls in the transaction it was opened in,
// with the contracts of the Storage methods of the same names.
type Batch interface {
	// Stat is Storage.Stat.
	Stat(ctx context.Context, kind Kind, h Hash) (Object, error)
	// Gen returns the history number of the blob at h (History.Gen), 0
	// when it belongs to no history or the storage keeps none. It fails
	// with ErrNotFound when there is no blob at h.
	Gen(ctx context.Context, h Hash) (int64, error)
	// Delete is Storage.Delete.
	Delete(ctx context.Context, kind Kind, h Hash, cutoff time.Time) (stored int64, deleted bool, err error)
	// Close releases what the batch holds.
	Close() error
}

// UsageStorage is the optional ability of a Storage to total what it
// holds without visiting each object, as Store.Usage reports it. Without
// it Store.Usage iterates (and, over a HistoryStorage, reads each blob's
// Version for its Saved count).
type UsageStorage interface {
	// Usage totals the objects stored as tx sees them.
	Usage(ctx context.Context, tx *index.Tx) (Usage, error)
}

// History is where a blob stands in the history of a file's versions.
type History struct {
	// Gen numbers the blob within its history, from 1; 0 when it belongs
	// to none.
	Gen int64
	// Head marks the newest version of a history, which alone lists the
	// open versions.
	Head bool
	// Opens lists, on the head, the older versions whose delta base will
	// change as the history grows, oldest first.
	Opens []Hash
}

// Version is a blob as the delta history reads it.
type Version struct {
	Object
	History
	// Saved counts the bytes delta encoding saved over the forms the blob
	// was stored in before, so Stored + Saved is its first stored size.
	Saved int64
	// Depth is the delta depth an earlier build's scheme recorded; 0 for
	// rows of this one.
	Depth int
	// Slot is the blob's position in the implementation's layout, for
	// PutAt; 0 if it has none.
	Slot Slot
	// Unreadable reports that the head's open list is damaged (Opens is
	// then nil): its history cannot grow, and the next version starts one
	// of its own.
	Unreadable bool
}

// Slot is an implementation's position of a stored object (SQLite: its
// rowid), opaque to the Store.
type Slot int64

// ReferenceStorage is the optional ability of a Storage to say, through
// an index, whether a stored blob names an object: a blob as its delta
// base, a chunk in its chunk list. A collection after a deletion checks
// each object it doubts that way instead of reading every blob; over a
// Storage without it, maintenance marks the whole store instead.
type ReferenceStorage interface {
	// Referenced reports whether a blob stored as tx sees it names the
	// object of kind at h.
	Referenced(ctx context.Context, tx *index.Tx, kind Kind, h Hash) (bool, error)
}
