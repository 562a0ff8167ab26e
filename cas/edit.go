package cas

import (
	"bytes"
	"encoding/binary"
	"errors"
)

// An edit is the form a delta takes when a version differs from its base
// by a few bytes here and there, as a version does from the next after an
// append or a patch of a word or two: the stretches the two share are
// copied from the base, and only the few bytes between them are stored.
// Building one compares the two versions from each end, and finds where
// they meet again after a change by looking a short run of the version up
// in the base, at memory speed, where a zstd delta first indexes the whole
// base as its dictionary; reading one is a few copies. It is a CodecDelta
// row like any delta (its base, chain and history rules are the same),
// told from a zstd frame by its first four bytes. One change:
//
//	editMagic | uvarint prefix | uvarint suffix | the middle bytes
//
// (the plain bytes are base[:prefix] + middle + base[len(base)-suffix:]);
// several:
//
//	editsMagic | ops, each uvarint n<<1|1 then n bytes of its own, or
//	             uvarint n<<1 then uvarint offset: n bytes of the base
//
// Like every delta it is read by verifying the result against the
// version's address.
const (
	editMagic  = "wsE\x01"
	editsMagic = "wsE\x02"
)

// maxEditsOwn bounds the bytes of its own an edit of several changes
// keeps, and maxEditOps its ops; editAnchor is the run looked up in the
// base to find where the two versions meet again, editReach how far into
// the base it is looked for.
const (
	maxEditsOwn = 128
	maxEditOps  = 24
	editAnchor  = 32
	editReach   = 64 << 10
)

// maxEditMiddle is the most bytes an edit keeps of its own: an edit's
// middle is stored as it is, where a zstd delta finds what it shares with
// the base (a patched line keeps most of its words) and compresses the
// rest, which beyond a few dozen bytes is worth the delta's cost. So an
// edit is what the versions before an append, a truncation or a deletion
// become, and what a patch leaves goes to zstd.
const maxEditMiddle = 32

// editBlock is the stretch compared at a time while looking for the first
// difference: bytes.Equal runs at memory speed, a byte loop at a tenth.
const editBlock = 4 << 10

// isEdit reports whether delta data is an edit.
func isEdit(data []byte) bool {
	return bytes.HasPrefix(data, []byte(editMagic)) || bytes.HasPrefix(data, []byte(editsMagic))
}

// encodeEdit returns old as an edit against base: of one change when what
// lies between their common prefix and suffix is at most maxEditMiddle
// bytes (exact by construction: both ends were compared byte for byte),
// else of several (encodeEdits), or false.
func encodeEdit(old, base []byte) ([]byte, bool) {
	p := commonPrefix(old, base)
	q := commonSuffix(old[p:], base[p:])
	mid := old[p : len(old)-q]
	if len(mid) > maxEditMiddle {
		return encodeEdits(old, base, p, q)
	}
	b := make([]byte, 0, len(editMagic)+2*binary.MaxVarintLen64+len(mid))
	b = append(b, editMagic...)
	b = binary.AppendUvarint(b, uint64(p))
	b = binary.AppendUvarint(b, uint64(q))
	return append(b, mid...), true
}

// encodeEdits returns old as an edit of several changes against base,
// whose first p bytes and last q bytes old shares, or false when that
// takes more than maxEditsOwn bytes of its own or maxEditOps ops. After
// each change it looks a run of old a little further on up in the base,
// ahead of where the last copy ended, and copies from there as far as
// the two agree. The caller proves the result decodes back to old
// (provenEdit): a run found twice in the base copies equal bytes either
// way, but the proof keeps a mistake here from costing a version.
func encodeEdits(old, base []byte, p, q int) ([]byte, bool) {
	b := append(make([]byte, 0, 64), editsMagic...)
	ops, used := 0, 0
	copyOp := func(off, n int) {
		b = binary.AppendUvarint(b, uint64(n)<<1)
		b = binary.AppendUvarint(b, uint64(off))
		ops++
	}
	own := func(lit []byte) {
		b = binary.AppendUvarint(b, uint64(len(lit))<<1|1)
		b = append(b, lit...)
		ops++
	}
	if p > 0 {
		copyOp(0, p)
	}
	end, bEnd := len(old)-q, len(base)-q
	i, at := p, p // the next byte of old, and where the base is expected to go on
	for i < end {
		if ops >= maxEditOps-2 {
			return nil, false
		}
		found := false
		for _, a := range [...]int{8, 24, 56, 120} {
			if i+a+editAnchor > end {
				break
			}
			x := bytes.Index(base[at:min(bEnd, at+editReach)], old[i+a:i+a+editAnchor])
			if x < 0 {
				continue
			}
			x += at
			back := 0 // the run agrees further back too
			for back < a && x-back > at && old[i+a-back-1] == base[x-back-1] {
				back++
			}
			lit := old[i : i+a-back]
			if used += len(lit); used > maxEditsOwn {
				return nil, false
			}
			if len(lit) > 0 {
				own(lit)
			}
			n := back + commonPrefix(old[i+a:end], base[x:bEnd])
			copyOp(x-back, n)
			i, at = i+a-back+n, x-back+n
			found = true
			break
		}
		if !found {
			lit := old[i:end]
			if used += len(lit); used > maxEditsOwn {
				return nil, false
			}
			own(lit)
			i = end
		}
	}
	if q > 0 {
		copyOp(len(base)-q, q)
	}
	return b, true
}

// provenEdit is encodeEdit's result when its pieces are old's bytes; the
// proof compares them in place, allocating nothing.
func provenEdit(old, base []byte) ([]byte, bool) {
	d, ok := encodeEdit(old, base)
	if !ok {
		return nil, false
	}
	pos, same := 0, true
	err := editPieces(d, base, int64(len(old)), func(piece []byte) {
		same = same && bytes.Equal(piece, old[pos:pos+len(piece)])
		pos += len(piece)
	})
	return d, err == nil && same
}

// decodeEdit returns the plain bytes of edit data against base; size is
// the version's recorded size.
func decodeEdit(data, base []byte, size int64) ([]byte, error) {
	if size < 0 {
		return nil, errEdit
	}
	// The recorded size is not trusted for the allocation: a damaged row
	// could name any; the pieces are checked against it as they come.
	out := make([]byte, 0, capHint(size, int64(len(base)+len(data))))
	err := editPieces(data, base, size, func(piece []byte) { out = append(out, piece...) })
	if err != nil {
		return nil, err
	}
	return out, nil
}

// editPieces calls fn with the pieces of the plain bytes of edit data
// against base, in order, after checking that they fit the base and come
// to size bytes in all; a piece is a slice of data or of base.
func editPieces(data, base []byte, size int64, fn func(piece []byte)) error {
	if size < 0 {
		return errEdit
	}
	if bytes.HasPrefix(data, []byte(editsMagic)) {
		return editOps(data[len(editsMagic):], base, uint64(size), fn)
	}
	rest := data[len(editMagic):]
	p, n := binary.Uvarint(rest)
	if n <= 0 {
		return errEdit
	}
	rest = rest[n:]
	q, n := binary.Uvarint(rest)
	if n <= 0 {
		return errEdit
	}
	mid := rest[n:]
	if p > uint64(len(base)) || q > uint64(len(base))-p || p+q+uint64(len(mid)) != uint64(size) {
		return errEdit
	}
	fn(base[:p])
	fn(mid)
	fn(base[uint64(len(base))-q:])
	return nil
}

// editOps is editPieces for the ops of an edit of several changes.
func editOps(ops, base []byte, size uint64, fn func(piece []byte)) error {
	var done uint64
	for len(ops) > 0 {
		v, k := binary.Uvarint(ops)
		if k <= 0 {
			return errEdit
		}
		ops = ops[k:]
		n := v >> 1
		if n > size-done {
			return errEdit
		}
		if v&1 == 1 {
			if n > uint64(len(ops)) {
				return errEdit
			}
			fn(ops[:n])
			ops, done = ops[n:], done+n
			continue
		}
		off, k := binary.Uvarint(ops)
		if k <= 0 || off > uint64(len(base)) || n > uint64(len(base))-off {
			return errEdit
		}
		fn(base[off : off+n])
		ops, done = ops[k:], done+n
	}
	if done != size {
		return errEdit
	}
	return nil
}

var errEdit = errors.New("edit delta does not fit its base or its size")

// commonPrefix is the length of the longest common prefix of a and b.
func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for i+editBlock <= n && bytes.Equal(a[i:i+editBlock], b[i:i+editBlock]) {
		i += editBlock
	}
	for i < n && a[i] == b[i] {
		i++
	}
	return i
}

// commonSuffix is the length of the longest common suffix of a and b.
func commonSuffix(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for i+editBlock <= n && bytes.Equal(a[len(a)-i-editBlock:len(a)-i], b[len(b)-i-editBlock:len(b)-i]) {
		i += editBlock
	}
	for i < n && a[len(a)-1-i] == b[len(b)-1-i] {
		i++
	}
	return i
}
