package cas

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEditRoundTrips(t *testing.T) {
	base := []byte(strings.Repeat("The keeper lit the lamp at dusk and watched the ships. ", 400))
	for name, old := range map[string][]byte{
		"prefix (an append followed)":  base[:len(base)-300],
		"suffix":                       base[9000:],
		"a few bytes replaced":         append(append(bytes.Clone(base[:5000]), "lantern"...), base[5004:]...),
		"a few bytes the base dropped": append(append(bytes.Clone(base[:7000]), "twenty-nine bytes of old text"...), base[7000:]...),
		"equal":                        base,
		"empty":                        {},
	} {
		t.Run(name, func(t *testing.T) {
			d, ok := encodeEdit(old, base)
			require.True(t, ok)
			assert.True(t, isEdit(d))
			assert.LessOrEqual(t, len(d), len(editMagic)+2*3+maxEditMiddle)
			back, err := decodeEdit(d, base, int64(len(old)))
			require.NoError(t, err)
			assert.Equal(t, old, back)
		})
	}
}

func TestEditRefusesMoreThanAFewBytes(t *testing.T) {
	base := []byte(strings.Repeat("abcdefgh", 1000))
	old := append(append(bytes.Clone(base[:100]), strings.Repeat("x", maxEditsOwn+1)...), base[100:]...)
	_, ok := encodeEdit(old, base)
	assert.False(t, ok, "more bytes of its own than an edit keeps")
	// Changes everywhere take more ops than an edit has.
	many := bytes.Clone(base)
	for i := 100; i < len(many); i += 200 {
		many[i] = 'Z'
	}
	_, ok = encodeEdit(many, base)
	assert.False(t, ok, "more changes than an edit has ops")
}

// TestEditsOfSeveralChanges: versions that differ from the base in a few
// places, as an older version of a draft does from a newer one after a
// patch of a word and an append, are edits that rebuild them exactly and
// keep only the differing bytes.
func TestEditsOfSeveralChanges(t *testing.T) {
	var doc strings.Builder
	for i := range 400 {
		fmt.Fprintf(&doc, "Paragraph %d: the keeper lit the lamp at dusk and watched ship %d pass.\n", i, i*7)
	}
	base := []byte(doc.String())
	patched := bytes.Replace(base, []byte("ship 700 pass"), []byte("vessel 700 slip by"), 1)
	for name, old := range map[string][]byte{
		// base = old with a word patched and a paragraph appended
		"a patch and an append": bytes.Replace(base[:len(base)-80], []byte("ship 1400 pass"), []byte("ship 1400 sail"), 1),
		"two patches far apart": bytes.Replace(bytes.Replace(base, []byte("ship 70 "), []byte("boat 70 "), 1), []byte("ship 2100 "), []byte("raft 2100 "), 1),
		"a deleted line":        append(append(bytes.Clone(base[:7000]), "Paragraph X: gone.\n"...), base[7000:len(base)-200]...),
		"the base's own patch":  patched,
	} {
		t.Run(name, func(t *testing.T) {
			d, ok := provenEdit(old, base)
			require.True(t, ok)
			assert.Less(t, len(d), 80, "an edit keeps only what differs")
			back, err := decodeEdit(d, base, int64(len(old)))
			require.NoError(t, err)
			assert.Equal(t, old, back)
		})
	}
}

func TestEditFindsDifferencesAcrossBlocks(t *testing.T) {
	base := bytes.Repeat([]byte{7}, 3*editBlock+123)
	for _, at := range []int{0, 1, editBlock - 1, editBlock, editBlock + 1, 2*editBlock + 5, len(base) - 1} {
		old := bytes.Clone(base)
		old[at] = 8
		d, ok := encodeEdit(old, base)
		require.True(t, ok, "at %d", at)
		back, err := decodeEdit(d, base, int64(len(old)))
		require.NoError(t, err)
		require.Equal(t, old, back, "at %d", at)
	}
}

func TestEditRejectsDamage(t *testing.T) {
	base := []byte(strings.Repeat("0123456789", 100))
	d, ok := encodeEdit(base[:900], base)
	require.True(t, ok)
	for name, c := range map[string]struct {
		data []byte
		size int64
	}{
		"wrong size":        {d, 901},
		"truncated":         {d[:len(editMagic)+1], 900},
		"no varints":        {[]byte(editMagic), 900},
		"prefix past base":  {append([]byte(editMagic), 0xff, 0x0f, 0), 2047},
		"suffix past base":  {append([]byte(editMagic), 0x90, 0x07, 0x90, 0x07), 1800},
		"bytes after sizes": {append(bytes.Clone(d), 'x'), 900},
		"copy past base":    {append([]byte(editsMagic), 0x10, 0xe8, 0x07), 8},
		"own past the data": {append([]byte(editsMagic), 0x21, 'a'), 16},
		"ops short of size": {append([]byte(editsMagic), 0x10, 0x00), 9},
		"ops past size":     {append([]byte(editsMagic), 0x10, 0x00, 0x10, 0x00), 9},
		"cut op":            {append([]byte(editsMagic), 0x10), 8},
		"a size past reach": {append([]byte(editsMagic), 0x10, 0x00), 1 << 62},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := decodeEdit(c.data, base, c.size)
			assert.ErrorIs(t, err, errEdit)
		})
	}
}

// FuzzDecodeEdit: whatever the stored bytes, decoding an edit returns an
// error or exactly size bytes, never a panic; an edit that encodeEdit
// built from a version rebuilds it.
func FuzzDecodeEdit(f *testing.F) {
	base := []byte(strings.Repeat("The keeper lit the lamp at dusk. ", 40))
	for _, old := range [][]byte{base[:700], bytes.Replace(base, []byte("lamp"), []byte("fire"), 3)} {
		d, ok := encodeEdit(old, base)
		if ok {
			f.Add(d, int64(len(old)), old)
		}
	}
	f.Add([]byte(editsMagic+"\x10\x00"), int64(8), []byte("x"))
	f.Fuzz(func(t *testing.T, data []byte, size int64, old []byte) {
		if !isEdit(data) {
			data = append([]byte(editsMagic), data...)
		}
		if b, err := decodeEdit(data, base, size); err == nil && int64(len(b)) != size {
			t.Fatalf("%d bytes for size %d", len(b), size)
		}
		if d, ok := provenEdit(old, base); ok {
			b, err := decodeEdit(d, base, int64(len(old)))
			if err != nil || !bytes.Equal(b, old) {
				t.Fatalf("a proven edit does not rebuild its version: %v", err)
			}
		}
	})
}
