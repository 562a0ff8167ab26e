package cas

import (
	"math/bits"

	"lukechampine.com/blake3/guts"
)

// groupSize is what the BLAKE3 compressor takes at once: MaxSIMD chunks,
// compressed side by side.
const groupSize = guts.MaxSIMD * guts.ChunkSize

// hasher computes the unkeyed BLAKE3-256 of what is written to it, as
// blake3.Hasher does, without allocating: blake3.Hasher copies a buffer
// of 16 chunks for the last subtree of every Write whose slice has less
// room past it, and starts goroutines for larger ones, which for a store
// that hashes every version it reads and writes was a tenth of all it
// allocated. hasher compresses whole groups of 16 chunks straight from
// the caller's bytes, one after another, and keeps the last, possibly
// partial, group in its own buffer, since it becomes the tree's root.
type hasher struct {
	// stack holds the chaining values of complete subtrees of groups, at
	// most one per height (height 0: one group); bit i of groups tells
	// whether stack[i] holds one.
	stack  [64][8]uint32
	groups uint64
	buf    [groupSize]byte
	buflen int
}

// hashers keeps a few hashers for reuse, each too large for a
// goroutine's stack. Unlike a sync.Pool it keeps them across collections,
// which a store under a soft memory limit runs often.
var hashers = freeList[*hasher]{keep: 4, new: func() *hasher { return new(hasher) }}

// newHasher returns an empty hasher; the caller gives it back with
// freeHasher once done.
func newHasher() *hasher {
	h := hashers.get()
	h.reset()
	return h
}

func freeHasher(h *hasher) { hashers.put(h) }

func (h *hasher) reset() { h.groups, h.buflen = 0, 0 }

// Write adds p to the hashed content; it never fails.
func (h *hasher) Write(p []byte) (int, error) {
	n := len(p)
	if h.buflen > 0 {
		c := copy(h.buf[h.buflen:], p)
		h.buflen += c
		p = p[c:]
		if len(p) == 0 {
			// A full group stays buffered until more follows: the last
			// one is not compressed as the others are.
			return n, nil
		}
		h.push(&h.buf)
		h.buflen = 0
	}
	for len(p) > groupSize {
		h.push((*[groupSize]byte)(p))
		p = p[groupSize:]
	}
	h.buflen = copy(h.buf[:], p)
	return n, nil
}

// push compresses g, a whole group that more content follows, and merges
// it into the stack.
func (h *hasher) push(g *[groupSize]byte) {
	cv := guts.ChainingValue(guts.CompressBuffer(g, groupSize, &guts.IV, h.groups*guts.MaxSIMD, 0))
	i := 0
	for ; h.groups&(1<<i) != 0; i++ {
		cv = guts.ChainingValue(guts.ParentNode(h.stack[i], cv, &guts.IV, 0))
	}
	h.stack[i] = cv
	h.groups++
}

// sum returns the address of what was written.
func (h *hasher) sum() Hash {
	n := guts.CompressBuffer(&h.buf, h.buflen, &guts.IV, h.groups*guts.MaxSIMD, 0)
	for i := bits.TrailingZeros64(h.groups); i < bits.Len64(h.groups); i++ {
		if h.groups&(1<<i) != 0 {
			n = guts.ParentNode(h.stack[i], guts.ChainingValue(n), &guts.IV, 0)
		}
	}
	n.Flags |= guts.FlagRoot
	out := guts.WordsToBytes(guts.CompressNode(n))
	return Hash(out[:len(Hash{})])
}

// sumLarge is Sum for content of more than one chunk.
func sumLarge(b []byte) Hash {
	h := newHasher()
	h.Write(b)
	s := h.sum()
	freeHasher(h)
	return s
}

// Hasher computes an address, the BLAKE3-256 of what is written to it,
// as Sum does, for content that streams by rather than sits in one
// slice; it allocates nothing per Write. Release it once done.
type Hasher struct {
	h *hasher
	n int64
}

// NewHasher returns an empty Hasher.
func NewHasher() *Hasher { return &Hasher{h: newHasher()} }

// Write adds p to the hashed content; it never fails.
func (h *Hasher) Write(p []byte) (int, error) {
	h.n += int64(len(p))
	return h.h.Write(p)
}

// Sum returns the address of what was written so far.
func (h *Hasher) Sum() Hash { return h.h.sum() }

// Len returns how many bytes were written so far.
func (h *Hasher) Len() int64 { return h.n }

// Release gives the Hasher's state back for reuse; h must not be used
// after.
func (h *Hasher) Release() {
	if h.h != nil {
		freeHasher(h.h)
		h.h = nil
	}
}
