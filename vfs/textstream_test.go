package vfs

import (
	"bytes"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/wserr"
)

// streamText returns n bytes of lines of words with some multi-byte runes.
func streamText(n int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, 1))
	words := []string{"alpha", "beta", "世界", "gamma", "délta", "x", "\n", "\n", "ab", "ba"}
	var b bytes.Buffer
	for b.Len() < n {
		b.WriteString(words[rng.IntN(len(words))])
		b.WriteByte(' ')
	}
	return b.Bytes()[:n]
}

// TestTextCheckMatchesIsText: the streaming check agrees with IsText
// however the bytes are split, runes cut in two included.
func TestTextCheckMatchesIsText(t *testing.T) {
	inputs := [][]byte{
		nil, []byte("hello"), []byte("世界书"), streamText(5000, 1),
		append(streamText(3000, 2), 0xff), append([]byte("ab"), 0), []byte("a\xe4\xb8"),
		append(streamText(100, 3), "\xe4\xb8"...),
	}
	for _, in := range inputs {
		for _, piece := range []int{1, 2, 3, 7, 4096} {
			var c textCheck
			for b := in; len(b) > 0; {
				n := min(piece, len(b))
				c.Write(b[:n])
				b = b[n:]
			}
			assert.Equal(t, IsText(in), c.Text(), "%q in pieces of %d", in[:min(len(in), 20)], piece)
		}
	}
}

// TestStreamedPatchMatchesBytes: counting and replacing over a stream,
// read one byte at a time or in halves, give what bytes.Count,
// bytes.Index (the first occurrence) and bytes.ReplaceAll give, for occurrences across every read boundary.
func TestStreamedPatchMatchesBytes(t *testing.T) {
	content := streamText(300<<10, 4)
	for _, old := range []string{"ab", "alpha beta", "世界", "x x", strings.Repeat("q", 100<<10)} {
		for name, wrap := range map[string]func(io.Reader) io.Reader{
			"OneByte": iotest.OneByteReader, "Half": iotest.HalfReader, "Whole": func(r io.Reader) io.Reader { return r },
		} {
			if name == "OneByte" && len(old) > 100 {
				continue
			}
			n, first, text, err := countMatches(wrap(bytes.NewReader(content)), []byte(old))
			require.NoError(t, err)
			assert.Equal(t, bytes.Count(content, []byte(old)), n, "%s %q", name, old)
			assert.Equal(t, int64(bytes.Index(content, []byte(old))), first, "%s %q", name, old)
			assert.True(t, text)
			got, err := io.ReadAll(ReplaceReader(wrap(bytes.NewReader(content)), []byte(old), []byte("NEW")))
			require.NoError(t, err)
			assert.True(t, bytes.Equal(bytes.ReplaceAll(content, []byte(old), []byte("NEW")), got), "%s %q", name, old)
		}
	}
}

// TestReadRangeFromLarge: a range of content larger than the limit is
// read from the stream as ReadRange reads it from memory, stops at the
// range's end, and is refused whole.
func TestReadRangeFromLarge(t *testing.T) {
	p := MustPath("output/big.txt")
	content := streamText(200<<10, 5)
	const limit = 16 << 10
	total := countLines(content)
	read := func(opt ReadOptions) (ReadResult, int64, error) {
		r := &countingReader{r: bytes.NewReader(content)}
		res, err := ReadRangeFrom(p, r, int64(len(content)), opt, limit)
		return res, r.n, err
	}
	t.Run("OK/Lines", func(t *testing.T) {
		res, n, err := read(ReadOptions{StartLine: 10, EndLine: 20})
		require.NoError(t, err)
		want, err := ReadRange(p, content, ReadOptions{StartLine: 10, EndLine: 20})
		require.NoError(t, err)
		assert.Equal(t, want.Text, res.Text)
		assert.Equal(t, 10, res.StartLine)
		assert.Equal(t, 20, res.EndLine)
		assert.True(t, res.Truncated)
		assert.True(t, res.TotalLinesUnknown)
		assert.LessOrEqual(t, n, int64(textPrefixLen+4096), "read only the prefix and the range")
	})
	t.Run("OK/LinesCutAtLimit", func(t *testing.T) {
		res, _, err := read(ReadOptions{StartLine: 5})
		require.NoError(t, err)
		assert.LessOrEqual(t, len(res.Content), limit)
		want, err := ReadRange(p, content, ReadOptions{StartLine: 5, EndLine: res.EndLine})
		require.NoError(t, err)
		assert.Equal(t, want.Text, res.Text, "whole lines up to the limit")
		assert.True(t, res.Truncated)
	})
	t.Run("OK/LastLines", func(t *testing.T) {
		res, _, err := read(ReadOptions{StartLine: total - 2})
		require.NoError(t, err)
		assert.Equal(t, total, res.EndLine)
		assert.Equal(t, total, res.TotalLines, "read to the end: the count is known")
		assert.False(t, res.TotalLinesUnknown)
	})
	t.Run("OK/Chars", func(t *testing.T) {
		res, _, err := read(ReadOptions{StartChar: 1000, EndChar: 1100})
		require.NoError(t, err)
		want, err := ReadRange(p, content, ReadOptions{StartChar: 1000, EndChar: 1100})
		require.NoError(t, err)
		assert.Equal(t, want.Text, res.Text)
	})
	t.Run("ErrWhole", func(t *testing.T) {
		_, n, err := read(ReadOptions{})
		assert.True(t, wserr.Is(err, wserr.SizeLimitExceeded), "%v", err)
		assert.Zero(t, n, "nothing read")
	})
	t.Run("ErrPastEnd", func(t *testing.T) {
		_, _, err := read(ReadOptions{StartLine: total + 1})
		assert.True(t, wserr.Is(err, wserr.InvalidLineRange), "%v", err)
		assert.Contains(t, err.Error(), countNoun(total, "line"))
	})
	t.Run("ErrNotText", func(t *testing.T) {
		bin := append([]byte{0, 1, 2}, content...)
		r := &countingReader{r: bytes.NewReader(bin)}
		_, err := ReadRangeFrom(p, r, int64(len(bin)), ReadOptions{StartLine: 1, EndLine: 2}, limit)
		assert.True(t, wserr.Is(err, wserr.NotText), "%v", err)
		assert.LessOrEqual(t, r.n, int64(textPrefixLen), "decided from a prefix")
	})
	t.Run("ErrLongLine", func(t *testing.T) {
		long := bytes.Repeat([]byte("y"), 100<<10)
		_, err := ReadRangeFrom(p, bytes.NewReader(long), int64(len(long)), ReadOptions{StartLine: 1, EndLine: 1}, limit)
		assert.True(t, wserr.Is(err, wserr.SizeLimitExceeded), "%v", err)
	})
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
