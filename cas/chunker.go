package cas

import "io"

// Content-defined chunking with a gear rolling hash (FastCDC's inner loop):
// a cut falls where the hash of the last 64 bytes matches a mask, so an edit
// in a large file changes only the chunks around it and the rest dedup.
const (
	minChunk  = 128 << 10
	maxChunk  = 2 << 20
	chunkMask = 1<<19 - 1 // about 512 KiB average beyond minChunk
)

var gear = func() (g [256]uint64) {
	// splitmix64 from a fixed seed: the table must never change, or
	// chunk boundaries (and so dedup with existing stores) would.
	x := uint64(0x9e3779b97f4a7c15)
	for i := range g {
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		g[i] = z ^ (z >> 31)
	}
	return g
}()

// cut returns the length of the first chunk of b; b holds at least maxChunk
// bytes unless it is the end of the stream.
func cut(b []byte) int {
	if len(b) <= minChunk {
		return len(b)
	}
	n := min(len(b), maxChunk)
	var h uint64
	for i := minChunk; i < n; i++ {
		h = h<<1 + gear[b[i]]
		if h&chunkMask == 0 {
			return i + 1
		}
	}
	return n
}

// chunkerMin is the smallest buffer a streaming chunker takes: the
// longest chunk, so every cut sees as many bytes as cut may look at, and
// a little more so that a refill reads more than a sliver. A refill
// moves what is left to the front, which costs far less than the
// compression of the chunk it follows, so the slack is kept small: it is
// held for the whole of every large Put.
const chunkerMin = maxChunk + 64<<10

// chunker splits a stream into content-defined chunks in one buffer, so
// memory stays bounded whatever the stream's length. Boundaries depend on
// the content only, never on the buffer's size or how reads fall.
type chunker struct {
	r          io.Reader
	buf        []byte
	start, end int
	eof        bool
}

// newChunker returns a chunker reading r into buf, which holds at least
// chunkerMin bytes, the first filled of them already read from r.
func newChunker(r io.Reader, buf []byte, filled int) *chunker {
	return &chunker{r: r, buf: buf, end: filled}
}

// bytesChunker returns a chunker over b, which it does not modify.
func bytesChunker(b []byte) *chunker {
	return &chunker{buf: b, end: len(b), eof: true}
}

// next returns the next chunk, valid until the following call, or io.EOF.
func (c *chunker) next() ([]byte, error) {
	if c.end-c.start < maxChunk && !c.eof {
		c.end = copy(c.buf, c.buf[c.start:c.end])
		c.start = 0
		for c.end < len(c.buf) && !c.eof {
			n, err := c.r.Read(c.buf[c.end:])
			c.end += n
			if err == io.EOF {
				c.eof = true
			} else if err != nil {
				return nil, err
			}
		}
	}
	if c.start == c.end {
		return nil, io.EOF
	}
	n := cut(c.buf[c.start:c.end])
	chunk := c.buf[c.start : c.start+n]
	c.start += n
	return chunk, nil
}
