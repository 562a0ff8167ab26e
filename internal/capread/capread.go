// Package capread bounds a stream by the room left under a cap, failing
// the read that passes it, so that a store takes no more than fits.
package capread

import (
	"io"
	"sync"
	"sync/atomic"
)

// Reader returns r failing with err once more than left bytes came
// through it.
func Reader(r io.Reader, left int64, err error) io.Reader {
	return &reader{r: r, left: left, err: err}
}

type reader struct {
	r    io.Reader
	left int64
	err  error
}

func (c *reader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.left -= int64(n)
	if c.left < 0 {
		return n, c.err
	}
	return n, err
}

// Budget is room shared by the streams one process stores at once: the
// bytes read through its readers and not yet released count against
// every one of them, so streams that each fit the room left when they
// began cannot together store more than it. The zero value is ready.
type Budget struct {
	inflight atomic.Int64
}

// Reader returns r failing with err once the bytes read through every
// reader of b not yet released pass left, and the release of what it
// counted, to call (once) when its bytes are stored or abandoned. Its
// first free bytes are not counted.
func (b *Budget) Reader(r io.Reader, free, left int64, err error) (io.Reader, func()) {
	br := &budgetReader{r: r, b: b, free: free, left: left, err: err}
	var once sync.Once
	return br, func() { once.Do(func() { b.inflight.Add(-br.counted) }) }
}

type budgetReader struct {
	r       io.Reader
	b       *Budget
	free    int64 // bytes still to pass uncounted
	left    int64
	counted int64
	err     error
}

func (c *budgetReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	count := int64(n)
	if c.free > 0 {
		skip := min(c.free, count)
		c.free -= skip
		count -= skip
	}
	if count > 0 {
		c.counted += count
		if c.b.inflight.Add(count) > c.left {
			return n, c.err
		}
	}
	return n, err
}
