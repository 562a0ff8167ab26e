// Package capread bounds a stream by the room left under a cap, failing
// the read that passes it, so that a store takes no more than fits.
package capread

import (
	"io"
	"sync"
	"sync/atomic"
)

// Reader returns r failing with err once more than left bytes came
// through it: a budget of its own.
func Reader(r io.Reader, left int64, err error) io.Reader {
	br, _ := new(Budget).Mark().Reader(r, 0, left, err)
	return br
}

// Budget is room shared by the streams one process stores at once: the
// bytes every one of its readers counts from the moment a reader begins,
// stored since or still streaming, and those others were streaming then,
// count against that reader's room, so streams that each fit the room left
// when they began cannot together store more than it. The zero value is
// ready.
type Budget struct {
	total    atomic.Int64 // bytes ever counted: grows only
	inflight atomic.Int64 // bytes counted and not yet released
}

// A Mark is a Budget's state when a stream begins, taken before the room
// left is measured (Budget.Mark).
type Mark struct {
	b             *Budget
	total, flight int64
}

// Mark records b's state, before the caller measures the room left: bytes
// stored after it are in that measure and in what readers count from the
// mark on, never in neither.
func (b *Budget) Mark() Mark {
	total := b.total.Load() // first: bytes counted in between count twice, never not at all
	return Mark{b: b, total: total, flight: b.inflight.Load()}
}

// Reader returns r failing with err once its own bytes, those the other
// readers of the budget counted since m, and those they were streaming at
// m pass left (the room measured after m); and the release of what it
// counted, to call (once) when its bytes are stored or abandoned. Its
// first free bytes are not counted.
func (m Mark) Reader(r io.Reader, free, left int64, err error) (io.Reader, func()) {
	br := &budgetReader{r: r, m: m, free: free, left: left, err: err}
	var once sync.Once
	return br, func() { once.Do(func() { m.b.inflight.Add(-br.counted) }) }
}

// SizedReader is Reader for a stream whose length the caller knows
// (size): it takes its size less its free bytes from the room at once,
// as if read, and fails with err before reading anything if that does not
// fit, taking nothing. So streams that begin together are admitted in
// turn while they fit, rather than all read until the room runs out.
// Bytes past size still count as Reader's do.
func (m Mark) SizedReader(r io.Reader, free, size, left int64, err error) (io.Reader, func(), error) {
	take := max(size-free, 0)
	for {
		total := m.b.total.Load()
		if total-m.total+m.flight+take > left {
			return nil, nil, err
		}
		if m.b.total.CompareAndSwap(total, total+take) {
			break
		}
	}
	m.b.inflight.Add(take)
	br := &budgetReader{r: r, m: m, free: free, left: left, err: err, prepaid: take, counted: take}
	var once sync.Once
	return br, func() { once.Do(func() { m.b.inflight.Add(-br.counted) }) }, nil
}

type budgetReader struct {
	r       io.Reader
	m       Mark
	free    int64 // bytes still to pass uncounted
	prepaid int64 // bytes still to pass counted already (SizedReader)
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
	if c.prepaid > 0 {
		skip := min(c.prepaid, count)
		c.prepaid -= skip
		count -= skip
	}
	if count > 0 {
		c.counted += count
		c.m.b.inflight.Add(count)
		if c.m.b.total.Add(count)-c.m.total+c.m.flight > c.left {
			return n, c.err
		}
	}
	return n, err
}
