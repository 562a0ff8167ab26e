// Package capread bounds a stream by the room left under a cap, failing
// the read that passes it, so that a store takes no more than fits.
package capread

import "io"

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
