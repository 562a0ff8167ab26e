package cas_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/wserr"
)

// emptyHex is BLAKE3-256 of no bytes, from the BLAKE3 test vectors.
const emptyHex = "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"

func TestSum(t *testing.T) {
	assert.Equal(t, emptyHex, cas.Sum(nil).String())
	assert.Equal(t, cas.Sum(nil), cas.Sum([]byte{}))
	assert.NotEqual(t, cas.Sum([]byte("a")), cas.Sum([]byte("b")))
}

func TestParseHash(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string // "" means an error
	}{
		{name: "OK/Lowercase", in: emptyHex, want: emptyHex},
		{name: "OK/Uppercase", in: strings.ToUpper(emptyHex), want: emptyHex},
		{name: "OK/Zero", in: strings.Repeat("0", 64), want: strings.Repeat("0", 64)},
		{name: "ErrEmpty", in: ""},
		{name: "ErrShort", in: emptyHex[:63]},
		{name: "ErrLong", in: emptyHex + "0"},
		{name: "ErrShortForm", in: emptyHex[:cas.ShortLen]},
		{name: "ErrNotHex", in: "g" + emptyHex[1:]},
		{name: "ErrSpace", in: " " + emptyHex[1:]},
		{name: "ErrPrefixed", in: "0x" + emptyHex[2:]},
		{name: "ErrVeryLong", in: strings.Repeat("ab", 1000)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := cas.ParseHash(tt.in)
			if tt.want == "" {
				require.Error(t, err)
				assert.Equal(t, wserr.InvalidArgument, wserr.CodeOf(err))
				assert.True(t, h.IsZero())
				assert.Less(t, len(err.Error()), 200, "the message quotes at most a bounded part of the input")
				assert.Panics(t, func() { cas.MustParseHash(tt.in) })
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, h.String())
			assert.Equal(t, h, cas.MustParseHash(tt.in))
		})
	}
}

func TestHashForms(t *testing.T) {
	h := cas.Sum(nil)
	assert.Equal(t, emptyHex, h.String())
	assert.Equal(t, emptyHex[:cas.ShortLen], h.Short())
	assert.Len(t, h.Short(), cas.ShortLen)
	assert.False(t, h.IsZero())
	assert.True(t, cas.Hash{}.IsZero())

	t.Run("JSON", func(t *testing.T) {
		b, err := json.Marshal(h)
		require.NoError(t, err)
		assert.Equal(t, `"`+emptyHex+`"`, string(b))
		var back cas.Hash
		require.NoError(t, json.Unmarshal(b, &back))
		assert.Equal(t, h, back)

		type doc struct {
			H    cas.Hash   `json:"h"`
			Opt  cas.Hash   `json:"opt,omitzero"`
			Hs   []cas.Hash `json:"hs"`
			MapK map[cas.Hash]int
		}
		in := doc{H: h, Hs: []cas.Hash{h, cas.Sum([]byte("x"))}, MapK: map[cas.Hash]int{h: 1}}
		b, err = json.Marshal(in)
		require.NoError(t, err)
		assert.NotContains(t, string(b), `"opt"`, "omitzero drops the zero Hash")
		var out doc
		require.NoError(t, json.Unmarshal(b, &out))
		assert.Equal(t, in, out)
	})
	t.Run("JSONErrors", func(t *testing.T) {
		for _, in := range []string{`""`, `"abc"`, `"` + strings.Repeat("z", 64) + `"`, `12`, `[1,2]`} {
			var back cas.Hash
			assert.Error(t, json.Unmarshal([]byte(in), &back), in)
			assert.True(t, back.IsZero(), in)
		}
	})
	t.Run("Value", func(t *testing.T) {
		v, err := h.Value()
		require.NoError(t, err)
		assert.Equal(t, h[:], v)
		v, err = cas.Hash{}.Value()
		require.NoError(t, err)
		assert.Nil(t, v, "the zero Hash is stored as NULL")
	})
	t.Run("Scan", func(t *testing.T) {
		tests := []struct {
			name string
			src  any
			want cas.Hash
			err  bool
		}{
			{name: "OK/Blob", src: h[:], want: h},
			{name: "OK/NullIsZero", src: nil, want: cas.Hash{}},
			{name: "ErrShortBlob", src: h[:31], err: true},
			{name: "ErrLongBlob", src: append(h[:], 0), err: true},
			{name: "ErrString", src: emptyHex, err: true},
			{name: "ErrInt", src: int64(1), err: true},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				got := cas.Sum([]byte("prior"))
				err := got.Scan(tt.src)
				if tt.err {
					assert.Error(t, err)
					return
				}
				require.NoError(t, err)
				assert.Equal(t, tt.want, got)
			})
		}
		// Scan copies: the driver may reuse its buffer.
		src := append([]byte(nil), h[:]...)
		var got cas.Hash
		require.NoError(t, got.Scan(src))
		src[0] ^= 0xff
		assert.Equal(t, h, got)
	})
}

func TestCodecString(t *testing.T) {
	for c, want := range map[cas.Codec]string{
		cas.CodecRaw: "raw", cas.CodecZstd: "zstd", cas.CodecChunked: "chunked", cas.CodecDelta: "delta", cas.Codec(9): "codec(9)",
	} {
		assert.Equal(t, want, c.String())
		b, err := json.Marshal(c)
		require.NoError(t, err)
		assert.Equal(t, `"`+want+`"`, string(b))
	}
}

func FuzzParseHash(f *testing.F) {
	f.Add(emptyHex)
	f.Add(strings.ToUpper(emptyHex))
	f.Add("")
	f.Add("zz")
	f.Fuzz(func(t *testing.T, s string) {
		h, err := cas.ParseHash(s)
		if err != nil {
			assert.True(t, h.IsZero())
			return
		}
		assert.Equal(t, strings.ToLower(s), h.String())
		back, err := cas.ParseHash(h.String())
		require.NoError(t, err)
		assert.Equal(t, h, back)
	})
}

// TestHasherStreams: what a Hasher is given in pieces of any size hashes
// as Sum of the whole does, and its Writes allocate nothing.
func TestHasherStreams(t *testing.T) {
	data := make([]byte, 3<<20+12345)
	for i := range data {
		data[i] = byte(i * 7 >> 3)
	}
	for _, piece := range []int{1, 1000, 1024, 4096, 16 << 10, 64<<10 + 3, len(data)} {
		h := cas.NewHasher()
		for b := data; len(b) > 0; {
			n := min(piece, len(b))
			h.Write(b[:n])
			b = b[n:]
		}
		assert.Equal(t, cas.Sum(data), h.Sum(), "pieces of %d", piece)
		h.Release()
	}
	h := cas.NewHasher()
	defer h.Release()
	assert.Zero(t, testing.AllocsPerRun(10, func() { h.Write(data[:1<<20]) }))
}
