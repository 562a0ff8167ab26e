package vfs

import (
	"encoding/binary"
	"math"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/wserr"
)

// A tree row holds either the tree's canonical encoding (EncodeTree) or a
// patch against another stored tree, its base: an earlier version of the
// same directory. A write changes one or a few entries of each directory on
// its path, so a patch holds those entries and the row costs bytes in
// proportion to the change, not to the size of the directory. The address
// is always TreeHash of the canonical encoding: storing a patch never
// changes a tree's identity, and a read rebuilds the canonical encoding and
// checks its hash.
//
// Versions of a directory are numbered from its last whole version (0),
// and version n is a patch against version n with its lowest set bit
// cleared (Subversion's skip-deltas): a chain from any version to the whole
// one has at most popcount(n) patches, at most maxPatchDepth, while a patch
// holds the changes of lowbit(n) writes, on average about half of
// maxPatchDepth of them, never more than the directory's entries. A
// directory written 2^maxPatchDepth times is stored whole again, and so is
// a version whose patch would not be smaller than its whole encoding.
// A plain chain (every version against the one before) would need a whole
// version every maxPatchDepth+1 writes, which for a wide directory costs
// far more than the patches.
//
// A patch starts with patchVersion and the version number n (uvarint),
// then lists the changed names in byte order, each as an entry of the tree
// encoding whose kind 0 means the name is deleted and has no hash and no
// size:
//
//	kind  1 byte   (0 delete, 1 file, 2 dir)
//	nlen  uvarint  length of name in bytes
//	name  nlen bytes
//	hash  32 bytes (not for kind 0)
//	size  uvarint  (not for kind 0)

// patchVersion is the first byte of every patch.
const patchVersion = 1

// kindDeleted marks a deleted name in a patch.
const kindDeleted Kind = 0

// maxPatchDepth bounds a patch chain: a cold read of any tree costs at
// most this many extra row reads (the decoded trees cache makes warm reads
// one lookup).
const maxPatchDepth = 8

// maxPatchSeq is the first version number that is stored whole again.
const maxPatchSeq = 1 << maxPatchDepth

// skipBase returns the version a patch numbered n is made against.
func skipBase(n int) int { return n & (n - 1) }

// maxPatchChain is the longest patch chain a read follows before it calls
// the store corrupt. It is far above the depth a store writes (8), so it
// only ever stops a cycle that a damaged store could hold.
const maxPatchChain = 64

// encodePatch returns patch number seq, which turns old into cur, both
// sorted by name and valid.
func encodePatch(old, cur []Entry, seq int) []byte {
	b := binary.AppendUvarint([]byte{patchVersion}, uint64(seq))
	add := func(e Entry) {
		b = append(b, byte(e.Kind))
		b = binary.AppendUvarint(b, uint64(len(e.Name)))
		b = append(b, e.Name...)
		b = append(b, e.Hash[:]...)
		b = binary.AppendUvarint(b, uint64(e.Size))
	}
	del := func(name string) {
		b = append(b, byte(kindDeleted))
		b = binary.AppendUvarint(b, uint64(len(name)))
		b = append(b, name...)
	}
	i, j := 0, 0
	for i < len(old) || j < len(cur) {
		switch {
		case j == len(cur) || i < len(old) && old[i].Name < cur[j].Name:
			del(old[i].Name)
			i++
		case i == len(old) || cur[j].Name < old[i].Name:
			add(cur[j])
			j++
		default:
			if old[i] != cur[j] {
				add(cur[j])
			}
			i++
			j++
		}
	}
	return b
}

// patchSeq returns the version number of a patch and the rest of it.
func patchSeq(patch []byte) (int, []byte, error) {
	if len(patch) == 0 || patch[0] != patchVersion {
		return 0, nil, wserr.New(wserr.Corrupt, "decode tree patch", "", "not a patch (version byte missing or unknown)")
	}
	seq, k := uvarint(patch[1:])
	if k <= 0 || seq == 0 || seq >= maxPatchSeq {
		return 0, nil, wserr.New(wserr.Corrupt, "decode tree patch", "", "bad version number")
	}
	return int(seq), patch[1+k:], nil
}

// PatchNumber returns the version number a stored patch carries (see
// above); a patch that does not start with one fails with wserr.Corrupt.
func PatchNumber(patch []byte) (int, error) {
	seq, _, err := patchSeq(patch)
	return seq, err
}

// applyPatch returns base with patch applied. base is not modified. A
// patch that does not parse, is not in strict name order, deletes a name
// base lacks or changes nothing fails with wserr.Corrupt: encodePatch never
// writes one.
func applyPatch(base []Entry, patch []byte) ([]Entry, error) {
	corrupt := func(format string, args ...any) error {
		return wserr.New(wserr.Corrupt, "decode tree patch", "", format, args...)
	}
	_, rest, err := patchSeq(patch)
	if err != nil {
		return nil, err
	}
	out := make([]Entry, 0, len(base)+1)
	i := 0
	prev := ""
	for n := 0; len(rest) > 0; n++ {
		kind := Kind(rest[0])
		rest = rest[1:]
		nlen, k := uvarint(rest)
		if k <= 0 || nlen > MaxSegmentLen || nlen > uint64(len(rest)-k) {
			return nil, corrupt("bad name length in change %d", n)
		}
		rest = rest[k:]
		name := string(rest[:nlen])
		rest = rest[nlen:]
		if n > 0 && name <= prev {
			return nil, corrupt("change %q does not sort after %q", name, prev)
		}
		prev = name
		for i < len(base) && base[i].Name < name {
			out = append(out, base[i])
			i++
		}
		present := i < len(base) && base[i].Name == name
		if kind == kindDeleted {
			if !present {
				return nil, corrupt("deletes %q, which its base does not hold", name)
			}
			i++
			continue
		}
		e := Entry{Name: name, Kind: kind}
		if len(rest) < hashLen {
			return nil, corrupt("truncated hash of %q", name)
		}
		copy(e.Hash[:], rest)
		rest = rest[hashLen:]
		size, k := uvarint(rest)
		if k <= 0 || size > math.MaxInt64 {
			return nil, corrupt("bad size of %q", name)
		}
		rest = rest[k:]
		e.Size = int64(size)
		if err := checkEntry(e); err != nil {
			return nil, wserr.Wrap(wserr.Corrupt, "decode tree patch", "", err)
		}
		if present {
			if base[i] == e {
				return nil, corrupt("changes %q to what its base holds", name)
			}
			i++
		}
		out = append(out, e)
	}
	return append(out, base[i:]...), nil
}

// decodeTreeRow returns the entries of the tree at h from its stored row,
// and the row's patch number (0 for a whole tree): data is the canonical
// encoding when the row has no base, or a patch against the entries of the
// row's base tree (isPatch true, base those entries, baseSeq the base's
// patch number, which the patch's must exceed). Either way it checks that
// the canonical encoding of the result hashes to h. Failures are
// *wserr.Error with code wserr.Corrupt. Trees reads through its cache;
// RowReader (for gc and fsck) reads the rows as they are.
func decodeTreeRow(h cas.Hash, data []byte, isPatch bool, base []Entry, baseSeq int) ([]Entry, int, error) {
	if !isPatch {
		if TreeHash(data) != h {
			return nil, 0, wserr.New(wserr.Corrupt, "read tree", "", "tree %s does not hash to its address", h)
		}
		es, err := DecodeTree(data)
		return es, 0, err
	}
	seq, _, err := patchSeq(data)
	if err != nil {
		return nil, 0, err
	}
	if seq <= baseSeq {
		return nil, 0, wserr.New(wserr.Corrupt, "read tree", "", "patch number %d does not follow its base's %d", seq, baseSeq)
	}
	// base is a verified tree and applyPatch checks every entry it adds and
	// keeps the names in order, so the result needs no second check.
	es, err := applyPatch(base, data)
	if err != nil {
		return nil, 0, err
	}
	if TreeHash(encodeValid(es)) != h {
		return nil, 0, wserr.New(wserr.Corrupt, "read tree", "", "tree %s does not hash to its address once patched", h)
	}
	return es, seq, nil
}

// patchWorth reports whether a patch of np bytes (plus its base's address
// in the row) is smaller than the whole encoding of nw bytes.
func patchWorth(np, nw int) bool { return np+hashLen < nw }
