package cas

import (
	"bytes"
	"encoding/binary"
	"errors"
)

// An edit is the form a delta takes when a version differs from its base
// in one place by a few bytes at most, as a version does from the next
// after an append: the bytes before and after the change are the base's,
// and only the few bytes in between are stored. Building one
// compares the two versions from each end, at memory speed, where a zstd
// delta first indexes the whole base as its dictionary; reading one is
// two copies. It is a CodecDelta row like any delta (its base, chain and
// history rules are the same), told from a zstd frame by its first four
// bytes:
//
//	editMagic | uvarint prefix | uvarint suffix | the middle bytes
//
// The plain bytes are base[:prefix] + middle + base[len(base)-suffix:].
// Like every delta it is read by verifying the result against the
// version's address.
const editMagic = "wsE\x01"

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
func isEdit(data []byte) bool { return bytes.HasPrefix(data, []byte(editMagic)) }

// encodeEdit returns old as an edit against base, or false when what lies
// between their common prefix and suffix is more than maxEditMiddle bytes.
// The result is exact by construction: both ends were compared byte for
// byte.
func encodeEdit(old, base []byte) ([]byte, bool) {
	p := commonPrefix(old, base)
	q := commonSuffix(old[p:], base[p:])
	mid := old[p : len(old)-q]
	if len(mid) > maxEditMiddle {
		return nil, false
	}
	b := make([]byte, 0, len(editMagic)+2*binary.MaxVarintLen64+len(mid))
	b = append(b, editMagic...)
	b = binary.AppendUvarint(b, uint64(p))
	b = binary.AppendUvarint(b, uint64(q))
	return append(b, mid...), true
}

// decodeEdit returns the plain bytes of edit data against base; size is
// the version's recorded size.
func decodeEdit(data, base []byte, size int64) ([]byte, error) {
	rest := data[len(editMagic):]
	p, n := binary.Uvarint(rest)
	if n <= 0 {
		return nil, errEdit
	}
	rest = rest[n:]
	q, n := binary.Uvarint(rest)
	if n <= 0 {
		return nil, errEdit
	}
	mid := rest[n:]
	if p > uint64(len(base)) || q > uint64(len(base))-p || p+q+uint64(len(mid)) != uint64(size) {
		return nil, errEdit
	}
	out := make([]byte, 0, size)
	out = append(out, base[:p]...)
	out = append(out, mid...)
	return append(out, base[uint64(len(base))-q:]...), nil
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
