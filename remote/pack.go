package remote

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/wsstore/wsstore/cas"
)

// Object-store layout under the location's prefix (see docs/remote.md):
//
//	data/HH/HASH   a pack: stored forms back to back, then its index
//	               (JSON), then the index's length (4 bytes, big endian)
//	index/HASH     the same index, alone, so a device with nothing reads
//	               the indexes without the packs
//
// HASH is the BLAKE3-256 of the object's own bytes (HH its first byte in
// hex), so every key names its content and is written once.
const (
	dataDir  = "data/"
	indexDir = "index/"
)

// packIndex lists what one pack holds, or (Pack "") chunked blobs, whose
// chunk lists are all they are. Device names the store that pushed it
// (its sync device id; absent in an older build's) and Pushed when (Unix
// nanoseconds), so each push writes an index object of its own, dated by
// the object store, even of a pack that is there already: reclaim keeps a
// pack until the device of every index naming it has published a segment
// since (docs/remote.md). The copy at the end of a pack carries neither.
type packIndex struct {
	Version int     `json:"version"`
	Pack    string  `json:"pack,omitempty"`
	Device  string  `json:"device,omitempty"`
	Pushed  int64   `json:"pushed,omitempty"`
	Objects []entry `json:"objects"`
}

// entry is one object of a packIndex.
type entry struct {
	Kind   cas.Kind   `json:"kind"`
	Hash   cas.Hash   `json:"hash"`
	Size   int64      `json:"size"`
	Codec  cas.Codec  `json:"-"`
	CodecN int        `json:"codec"`
	Base   *cas.Hash  `json:"base,omitempty"`
	Off    int64      `json:"off"`
	Len    int64      `json:"len"`
	Sum    *cas.Hash  `json:"sum,omitempty"`
	Chunks []chunkRef `json:"chunks,omitempty"`
}

type chunkRef struct {
	Hash cas.Hash `json:"hash"`
	Off  int64    `json:"off"`
}

const indexVersion = 1

// packKey names a pack by the hash of its bytes.
func packKey(h cas.Hash) string { s := h.String(); return dataDir + s[:2] + "/" + s }

// indexKey names an index object by the hash of its bytes.
func indexKey(h cas.Hash) string { return indexDir + h.String() }

// buildPack lays out objs (stored forms in order) as a pack and returns its
// bytes and its index (Pack filled in).
func buildPack(objs []cas.Object) ([]byte, packIndex) {
	idx := packIndex{Version: indexVersion}
	var n int
	for _, o := range objs {
		n += len(o.Data)
	}
	pack := make([]byte, 0, n+len(objs)*200)
	for _, o := range objs {
		e := newEntry(o)
		e.Off, e.Len = int64(len(pack)), int64(len(o.Data))
		sum := cas.Sum(o.Data)
		e.Sum = &sum
		pack = append(pack, o.Data...)
		idx.Objects = append(idx.Objects, e)
	}
	trailer, _ := json.Marshal(idx) // entries marshal without error
	pack = append(pack, trailer...)
	pack = binary.BigEndian.AppendUint32(pack, uint32(len(trailer)))
	idx.Pack = packKey(cas.Sum(pack))
	return pack, idx
}

func newEntry(o cas.Object) entry {
	e := entry{Kind: o.Kind, Hash: o.Hash, Size: o.Size, Codec: o.Codec, CodecN: int(o.Codec)}
	if !o.Base.IsZero() {
		b := o.Base
		e.Base = &b
	}
	for _, c := range o.Chunks {
		e.Chunks = append(e.Chunks, chunkRef{Hash: c.Hash, Off: c.Off})
	}
	return e
}

func encodeIndex(idx packIndex) ([]byte, string) {
	b, _ := json.Marshal(idx)
	return b, indexKey(cas.Sum(b))
}

// check refuses an entry no build writes (no address, a kind or codec
// that is none, a size, length or offset below zero, a chunk without its
// address, more chunks than maxEntryChunks), which the local index could
// not record, and fills in its Codec.
func (e *entry) check() error {
	switch {
	case e.Hash.IsZero():
		return errors.New("an object without its address")
	case e.Kind != cas.KindBlob && e.Kind != cas.KindChunk:
		return fmt.Errorf("object %s of kind %d", e.Hash.Short(), e.Kind)
	case e.CodecN < int(cas.CodecRaw) || e.CodecN > int(cas.CodecDelta):
		return fmt.Errorf("object %s of codec %d", e.Hash.Short(), e.CodecN)
	case e.Size < 0 || e.Len < 0 || e.Off < 0:
		return fmt.Errorf("object %s of size %d at %d+%d", e.Hash.Short(), e.Size, e.Off, e.Len)
	case len(e.Chunks) > maxEntryChunks:
		return fmt.Errorf("object %s of %d chunks, more than %d", e.Hash.Short(), len(e.Chunks), maxEntryChunks)
	}
	for _, c := range e.Chunks {
		if c.Off < 0 || c.Hash.IsZero() {
			return fmt.Errorf("object %s with a chunk %s at %d", e.Hash.Short(), c.Hash.Short(), c.Off)
		}
	}
	e.Codec = cas.Codec(e.CodecN)
	return nil
}
