package cas

import (
	"bytes"
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
	old := append(append(bytes.Clone(base[:100]), strings.Repeat("x", maxEditMiddle+1)...), base[100:]...)
	_, ok := encodeEdit(old, base)
	assert.False(t, ok)
	// Two changes far apart leave everything between them in the middle.
	two := bytes.Clone(base)
	two[10], two[len(two)-10] = 'X', 'Y'
	_, ok = encodeEdit(two, base)
	assert.False(t, ok)
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
	} {
		t.Run(name, func(t *testing.T) {
			_, err := decodeEdit(c.data, base, c.size)
			assert.ErrorIs(t, err, errEdit)
		})
	}
}
