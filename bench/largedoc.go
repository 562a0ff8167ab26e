package main

import "io"

// piece is one run of a large document's bytes: a range of the base text,
// or bytes an edit inserted.
type piece struct {
	base bool
	off  int64  // base: offset in the base text
	n    int64  // length
	ins  []byte // !base: the bytes themselves (len n)
}

// slice returns the part [a, b) of p.
func (p piece) slice(a, b int64) piece {
	if p.base {
		return piece{base: true, off: p.off + a, n: b - a}
	}
	return piece{ins: p.ins[a:b], n: b - a}
}

// largeDoc is a large file's content as a piece table over the seeded base
// text: an edit adds a piece or two instead of copying the bytes, so the
// generator tracks a 256 MiB file in a few KB and streams it (to hash it,
// or to write it) whenever it needs the bytes. A largeDoc is immutable:
// splice returns a new one and never changes the pieces of the old, so
// every checkpoint can keep its version.
type largeDoc struct {
	seed   uint64
	pieces []piece
	size   int64
}

func newLargeDoc(seed uint64, size int64) largeDoc {
	return largeDoc{seed: seed, pieces: []piece{{base: true, n: size}}, size: size}
}

// Size returns the document's length in bytes.
func (d largeDoc) Size() int64 { return d.size }

// Open returns a reader of the document's bytes.
func (d largeDoc) Open() io.Reader {
	return &docReader{doc: d, base: newBaseReader(d.seed, 0, 0, make([]byte, baseBlock))}
}

// cut returns the pieces covering [from, to).
func (d largeDoc) cut(from, to int64) []piece {
	var out []piece
	var pos int64
	for _, p := range d.pieces {
		start, end := pos, pos+p.n
		pos = end
		lo, hi := max(start, from), min(end, to)
		if lo < hi {
			out = append(out, p.slice(lo-start, hi-start))
		}
	}
	return out
}

// splice returns the document with del bytes at off replaced by ins.
func (d largeDoc) splice(off, del int64, ins []byte) largeDoc {
	out := d.cut(0, off)
	if len(ins) > 0 {
		out = append(out, piece{ins: ins, n: int64(len(ins))})
	}
	out = append(out, d.cut(off+del, d.size)...)
	return largeDoc{seed: d.seed, pieces: out, size: d.size - del + int64(len(ins))}
}

// apply returns the document after edits, which are sorted by offset, do
// not overlap, and give offsets in the document before any of them.
func (d largeDoc) apply(edits []Edit) largeDoc {
	for i := len(edits) - 1; i >= 0; i-- {
		e := edits[i]
		d = d.splice(e.Off, e.Del, e.Ins)
	}
	return d
}

// docReader streams a largeDoc piece by piece.
type docReader struct {
	doc  largeDoc
	i    int   // current piece
	at   int64 // offset within it
	base *baseReader
}

func (r *docReader) Read(p []byte) (int, error) {
	for r.i < len(r.doc.pieces) && r.at == r.doc.pieces[r.i].n {
		r.i, r.at = r.i+1, 0
	}
	if r.i == len(r.doc.pieces) {
		return 0, io.EOF
	}
	pc := r.doc.pieces[r.i]
	var n int
	if pc.base {
		// The base reader keeps its current block across pieces, so
		// neighbouring pieces of one block generate it once.
		r.base.off, r.base.end = pc.off+r.at, pc.off+pc.n
		n, _ = r.base.Read(p)
	} else {
		n = copy(p, pc.ins[r.at:])
	}
	r.at += int64(n)
	return n, nil
}
