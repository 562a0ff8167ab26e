package vfs

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"

	"lukechampine.com/blake3"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/wserr"
)

// Entry is one name in a tree.
type Entry struct {
	Name string   `json:"name"`
	Kind Kind     `json:"kind"` // KindFile or KindDir
	Hash cas.Hash `json:"hash"` // blob address for files, tree address for dirs
	Size int64    `json:"size"` // file bytes; for a dir, total bytes of all files below it
}

// treeVersion is the first byte of every encoded tree. A new encoding gets a
// new version, and with it a new hash key, so old and new trees never share
// an address.
const treeVersion = 1

// hashLen is the size of an entry's hash in the encoding.
const hashLen = len(cas.Hash{})

// treeKey keys TreeHash. Keying BLAKE3 separates the domains: a tree and a
// blob with the same bytes never share an address, so a blob can never be
// mistaken for a tree (or a tree smuggled in as a blob) by its hash alone.
var treeKey = blake3.Sum256([]byte("wsstore tree v1"))

// EmptyTree is the address of the tree with no entries, the root of an
// empty workspace. Trees.Entries knows it without a stored row.
var EmptyTree = TreeHash([]byte{treeVersion})

// TreeHash returns the address of an encoded tree: keyed BLAKE3-256 of data,
// which never equals the blob address cas.Sum of the same bytes.
func TreeHash(data []byte) cas.Hash {
	h := blake3.New(hashLen, treeKey[:])
	h.Write(data)
	var out cas.Hash
	h.Sum(out[:0])
	return out
}

// EncodeTree returns the canonical encoding of entries, whose hash
// (TreeHash) is the tree's address. entries is not modified; the encoding
// holds them sorted by name in byte order, so the same set of entries always
// encodes to the same bytes.
//
// The format is a version byte (1), then for each entry in name order:
//
//	kind  1 byte   (1 file, 2 dir)
//	nlen  uvarint  length of name in bytes
//	name  nlen bytes
//	hash  32 bytes
//	size  uvarint  (at most math.MaxInt64)
//
// Uvarints are minimal, as encoding/binary writes them. There is no count
// and no trailer: the entries end with the data.
//
// EncodeTree fails with a *wserr.Error of code wserr.InvalidArgument if two
// entries share a name, a name is not one valid path segment, a kind is
// unknown or a size negative.
func EncodeTree(entries []Entry) ([]byte, error) {
	if !sortedByName(entries) {
		entries = slices.Clone(entries)
		slices.SortFunc(entries, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) })
	}
	return encodeSorted(entries)
}

// encodeSorted encodes entries already sorted by name.
func encodeSorted(entries []Entry) ([]byte, error) {
	for i, e := range entries {
		if err := checkEntry(e); err != nil {
			return nil, wserr.Wrap(wserr.InvalidArgument, "encode tree", "", err)
		}
		if i > 0 && entries[i-1].Name == e.Name {
			return nil, wserr.New(wserr.InvalidArgument, "encode tree", "", "duplicate name %q", e.Name)
		}
	}
	return encodeValid(entries), nil
}

// encodeValid encodes entries known to be valid and sorted by name, such
// as those of a verified tree with checked changes applied.
func encodeValid(entries []Entry) []byte {
	n := 1
	for _, e := range entries {
		n += 1 + binary.MaxVarintLen64 + len(e.Name) + hashLen + binary.MaxVarintLen64
	}
	b := make([]byte, 0, n)
	b = append(b, treeVersion)
	for _, e := range entries {
		b = append(b, byte(e.Kind))
		b = binary.AppendUvarint(b, uint64(len(e.Name)))
		b = append(b, e.Name...)
		b = append(b, e.Hash[:]...)
		b = binary.AppendUvarint(b, uint64(e.Size))
	}
	return b
}

func sortedByName(entries []Entry) bool {
	return slices.IsSortedFunc(entries, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) })
}

// segmentParent is the parent used to check that a name is one path
// segment. It is not the root, because Root().Join rejects names like
// "c:notes" (a drive prefix is only refused in a path's first segment), yet
// "docs/c:notes" is a valid Path whose tree must be able to hold it. Names
// at the root that look like drives can still never be reached by a Path,
// which ParsePath guarantees at the boundary.
var segmentParent = Path{s: "x"}

// checkEntry reports what makes e unstorable, as a plain error for the
// caller to wrap with its own code.
func checkEntry(e Entry) error {
	if e.Kind != KindFile && e.Kind != KindDir {
		return fmt.Errorf("entry %q has unknown kind %d", e.Name, e.Kind)
	}
	if e.Size < 0 {
		return fmt.Errorf("entry %q has negative size %d", e.Name, e.Size)
	}
	// The structural rules only: a stored name stays readable whatever
	// ParsePath has come to refuse at the boundary since it was written.
	if e.Name == "" || e.Name == "." || strings.IndexByte(e.Name, '/') >= 0 {
		return fmt.Errorf("entry name is not one path segment: %q", e.Name)
	}
	if _, err := parseRules("join path", segmentParent.s+"/"+e.Name, false); err != nil {
		return fmt.Errorf("entry name is not one path segment: %s", wserr.MessageOf(err))
	}
	return nil
}

// DecodeTree parses an encoding made by EncodeTree. It is strict: anything
// EncodeTree would not produce (another version, unsorted or duplicate
// names, invalid names or kinds, non-minimal uvarints, sizes above
// math.MaxInt64, truncated or trailing bytes) fails with a *wserr.Error of
// code wserr.Corrupt, so every tree has exactly one encoding and one
// address.
func DecodeTree(b []byte) ([]Entry, error) {
	corrupt := func(format string, args ...any) error {
		return wserr.New(wserr.Corrupt, "decode tree", "", format, args...)
	}
	if len(b) == 0 {
		return nil, corrupt("empty encoding")
	}
	if b[0] != treeVersion {
		return nil, corrupt("unknown tree version %d", b[0])
	}
	rest := b[1:]
	var entries []Entry
	for len(rest) > 0 {
		off := len(b) - len(rest)
		var e Entry
		e.Kind = Kind(rest[0])
		rest = rest[1:]
		nlen, n := uvarint(rest)
		if n <= 0 {
			return nil, corrupt("bad name length at byte %d", off+1)
		}
		rest = rest[n:]
		if nlen > MaxSegmentLen || nlen > uint64(len(rest)) {
			return nil, corrupt("name length %d at byte %d overruns the data or the limit", nlen, off+1)
		}
		e.Name = string(rest[:nlen])
		rest = rest[nlen:]
		if len(rest) < hashLen {
			return nil, corrupt("truncated hash of entry %q", e.Name)
		}
		copy(e.Hash[:], rest)
		rest = rest[hashLen:]
		size, n := uvarint(rest)
		if n <= 0 || size > math.MaxInt64 {
			return nil, corrupt("bad size of entry %q", e.Name)
		}
		rest = rest[n:]
		e.Size = int64(size)
		if err := checkEntry(e); err != nil {
			return nil, wserr.Wrap(wserr.Corrupt, "decode tree", "", err)
		}
		if k := len(entries); k > 0 && entries[k-1].Name >= e.Name {
			return nil, corrupt("entry %q does not sort after %q", e.Name, entries[k-1].Name)
		}
		entries = append(entries, e)
	}
	return entries, nil
}

// uvarint reads a minimal uvarint from b; n <= 0 means malformed,
// truncated, overlong or not minimal (a final zero byte after the first),
// since a second spelling of the same number would give a tree a second
// address.
func uvarint(b []byte) (uint64, int) {
	v, n := binary.Uvarint(b)
	if n > 1 && b[n-1] == 0 {
		return 0, -1
	}
	return v, n
}
