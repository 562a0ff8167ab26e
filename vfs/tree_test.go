package vfs_test

import (
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"lukechampine.com/blake3"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// rawEntry appends one entry in the documented encoding, without any of
// EncodeTree's checks, so tests can build encodings it would refuse.
func rawEntry(b []byte, kind byte, name string, h cas.Hash, size uint64) []byte {
	b = append(b, kind)
	b = binary.AppendUvarint(b, uint64(len(name)))
	b = append(b, name...)
	b = append(b, h[:]...)
	return binary.AppendUvarint(b, size)
}

func TestEncodeTreeRoundTrip(t *testing.T) {
	h1, h2 := cas.Sum([]byte("one")), cas.Sum([]byte("two"))
	in := []vfs.Entry{
		{Name: "é.md", Kind: vfs.KindFile, Hash: h1, Size: 3},
		{Name: "a", Kind: vfs.KindDir, Hash: h2, Size: math.MaxInt64},
		{Name: "B", Kind: vfs.KindFile, Hash: h2, Size: 0},
		{Name: "a-x", Kind: vfs.KindFile, Hash: h1, Size: 300},
		{Name: "c:notes", Kind: vfs.KindFile, Hash: h1, Size: 1},
	}
	orig := append([]vfs.Entry(nil), in...)

	b, err := vfs.EncodeTree(in)
	require.NoError(t, err)
	assert.Equal(t, orig, in, "EncodeTree must not reorder its argument")

	got, err := vfs.DecodeTree(b)
	require.NoError(t, err)
	names := make([]string, len(got))
	for i, e := range got {
		names[i] = e.Name
	}
	assert.Equal(t, []string{"B", "a", "a-x", "c:notes", "é.md"}, names, "sorted by name in byte order")
	assert.ElementsMatch(t, orig, got)

	again, err := vfs.EncodeTree(got)
	require.NoError(t, err)
	assert.Equal(t, b, again, "one set of entries has one encoding")
}

func TestEncodeTreeFormat(t *testing.T) {
	h := cas.Sum([]byte("x"))
	b, err := vfs.EncodeTree([]vfs.Entry{
		{Name: "z", Kind: vfs.KindDir, Hash: h, Size: 300},
		{Name: "ab", Kind: vfs.KindFile, Hash: h, Size: 5},
	})
	require.NoError(t, err)
	want := []byte{1}                   // version
	want = append(want, 1, 2, 'a', 'b') // file, name length 2, "ab"
	want = append(want, h[:]...)        // hash
	want = append(want, 5)              // size
	want = append(want, 2, 1, 'z')      // dir, name length 1, "z"
	want = append(want, h[:]...)        // hash
	want = append(want, 0xac, 0x02)     // size 300 as uvarint
	assert.Equal(t, want, b)

	empty, err := vfs.EncodeTree(nil)
	require.NoError(t, err)
	assert.Equal(t, []byte{1}, empty)
	assert.Equal(t, vfs.EmptyTree, vfs.TreeHash(empty))
	es, err := vfs.DecodeTree(empty)
	require.NoError(t, err)
	assert.Empty(t, es)
}

func TestEncodeTreeRejects(t *testing.T) {
	h := cas.Sum([]byte("x"))
	file := func(name string) vfs.Entry { return vfs.Entry{Name: name, Kind: vfs.KindFile, Hash: h, Size: 1} }
	cases := []struct {
		name    string
		entries []vfs.Entry
	}{
		{"ErrDuplicateName", []vfs.Entry{file("a"), file("b"), file("a")}},
		{"ErrDuplicateNameOfOtherKind", []vfs.Entry{file("a"), {Name: "a", Kind: vfs.KindDir, Hash: h}}},
		{"ErrEmptyName", []vfs.Entry{file("")}},
		{"ErrDotName", []vfs.Entry{file(".")}},
		{"ErrDotDotName", []vfs.Entry{file("..")}},
		{"ErrNameWithSlash", []vfs.Entry{file("a/b")}},
		{"ErrNameWithBackslash", []vfs.Entry{file(`a\b`)}},
		{"ErrNameWithNUL", []vfs.Entry{file("a\x00b")}},
		{"ErrNameWithControl", []vfs.Entry{file("a\nb")}},
		{"ErrNameNotUTF8", []vfs.Entry{file("a\xffb")}},
		{"ErrNameTooLong", []vfs.Entry{file(strings.Repeat("a", vfs.MaxSegmentLen+1))}},
		{"ErrKindZero", []vfs.Entry{{Name: "a", Hash: h}}},
		{"ErrKindUnknown", []vfs.Entry{{Name: "a", Kind: 3, Hash: h}}},
		{"ErrNegativeSize", []vfs.Entry{{Name: "a", Kind: vfs.KindFile, Hash: h, Size: -1}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := vfs.EncodeTree(tc.entries)
			requireCode(t, err, wserr.InvalidArgument)
			assert.Nil(t, b)
		})
	}
	t.Run("OKLongestName", func(t *testing.T) {
		_, err := vfs.EncodeTree([]vfs.Entry{file(strings.Repeat("a", vfs.MaxSegmentLen))})
		require.NoError(t, err)
	})
}

func TestDecodeTreeRejects(t *testing.T) {
	h := cas.Sum([]byte("x"))
	v := []byte{1}
	valid := rawEntry(append([]byte(nil), v...), 1, "a", h, 1)
	cases := []struct {
		name string
		data []byte
	}{
		{"ErrEmpty", nil},
		{"ErrVersionZero", []byte{0}},
		{"ErrVersionTwo", rawEntry([]byte{2}, 1, "a", h, 1)},
		{"ErrKindZero", rawEntry(v, 0, "a", h, 1)},
		{"ErrKindThree", rawEntry(v, 3, "a", h, 1)},
		{"ErrNoNameLength", []byte{1, 1}},
		{"ErrNameLengthUnterminated", []byte{1, 1, 0x80}},
		{"ErrNameLengthNotMinimal", append([]byte{1, 1, 0x81, 0x00, 'a'}, append(h[:], 1)...)},
		{"ErrNameLengthOverruns", []byte{1, 1, 5, 'a', 'b'}},
		{"ErrNameLengthOverLimit", append([]byte{1, 1, 0x80, 0x02}, make([]byte, 256+33)...)},
		{"ErrEmptyName", rawEntry(v, 1, "", h, 1)},
		{"ErrDotName", rawEntry(v, 1, ".", h, 1)},
		{"ErrNameWithSlash", rawEntry(v, 1, "a/b", h, 1)},
		{"ErrNameNotUTF8", rawEntry(v, 1, "\xff", h, 1)},
		{"ErrTruncatedHash", append([]byte{1, 1, 1, 'a'}, h[:31]...)},
		{"ErrNoSize", append([]byte{1, 1, 1, 'a'}, h[:]...)},
		{"ErrSizeNotMinimal", append(append([]byte{1, 1, 1, 'a'}, h[:]...), 0x85, 0x00)},
		{"ErrSizeOverInt64", rawEntry(v, 1, "a", h, 1<<63)},
		{"ErrSizeOverflowsUint64", append(append([]byte{1, 1, 1, 'a'}, h[:]...), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f)},
		{"ErrUnsorted", rawEntry(rawEntry(v, 1, "b", h, 1), 1, "a", h, 1)},
		{"ErrUnsortedByBytes", rawEntry(rawEntry(v, 1, "a", h, 1), 1, "B", h, 1)},
		{"ErrDuplicate", rawEntry(rawEntry(v, 1, "a", h, 1), 2, "a", h, 1)},
		{"ErrTrailingByte", append(append([]byte(nil), valid...), 0)},
		{"ErrTrailingKind", append(append([]byte(nil), valid...), 1)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			es, err := vfs.DecodeTree(tc.data)
			requireCode(t, err, wserr.Corrupt)
			assert.Nil(t, es)
		})
	}
	t.Run("OKValid", func(t *testing.T) {
		es, err := vfs.DecodeTree(valid)
		require.NoError(t, err)
		assert.Equal(t, []vfs.Entry{{Name: "a", Kind: vfs.KindFile, Hash: h, Size: 1}}, es)
	})
}

func TestTreeHashDomainSeparation(t *testing.T) {
	data, err := vfs.EncodeTree([]vfs.Entry{{Name: "a", Kind: vfs.KindFile, Hash: cas.Sum([]byte("a")), Size: 1}})
	require.NoError(t, err)

	t.Run("OKKeyedBLAKE3", func(t *testing.T) {
		key := blake3.Sum256([]byte("wsstore tree v1"))
		h := blake3.New(32, key[:])
		h.Write(data)
		th := vfs.TreeHash(data)
		assert.Equal(t, h.Sum(nil), th[:])
	})
	t.Run("OKDiffersFromBlobAddress", func(t *testing.T) {
		assert.NotEqual(t, cas.Sum(data), vfs.TreeHash(data))
		assert.NotEqual(t, cas.Sum([]byte{1}), vfs.EmptyTree)
	})
	t.Run("ErrBlobIsNotATree", func(t *testing.T) {
		// The same bytes stored as a blob and as a tree get two addresses,
		// and the blob's address does not read as a tree.
		env := newTreeEnv(t, cas.Options{})
		var blob, tree cas.Hash
		env.update(t, func(tx *index.Tx) error {
			var err error
			blob, err = env.blobs.PutBytes(env.ctx, tx, data)
			require.NoError(t, err)
			es, err := vfs.DecodeTree(data)
			require.NoError(t, err)
			tree, err = env.trees.Put(env.ctx, tx, es)
			return err
		})
		assert.Equal(t, vfs.TreeHash(data), tree)
		assert.NotEqual(t, blob, tree)
		_, err := env.trees.Entries(env.ctx, nil, blob)
		requireCode(t, err, wserr.Corrupt)
		_, err = env.blobs.Stat(env.ctx, tree)
		assert.True(t, errors.Is(err, cas.ErrNotFound), "tree address is not a blob: %v", err)
	})
}

// FuzzDecodeTree checks that DecodeTree never panics, refuses with
// wserr.Corrupt, and accepts only canonical encodings: anything it decodes
// re-encodes to the same bytes. The seed corpus is in
// testdata/fuzz/FuzzDecodeTree.
func FuzzDecodeTree(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		es, err := vfs.DecodeTree(data)
		if err != nil {
			requireCode(t, err, wserr.Corrupt)
			return
		}
		b, err := vfs.EncodeTree(es)
		require.NoError(t, err)
		require.Equal(t, data, b)
	})
}
