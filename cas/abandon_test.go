package cas_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/wserr"
)

// cancelAfter yields r's bytes and cancels its context once n have gone.
type cancelAfter struct {
	r      io.Reader
	n      int
	cancel context.CancelFunc
}

func (c *cancelAfter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if c.n -= n; c.n <= 0 {
		c.cancel()
	}
	return n, err
}

// TestAbandonedPutFreesItsChunks: a streamed Put that ends part way (its
// context cancelled, its reader failing) leaves no chunk, whatever the gc
// grace: no store fills with what no file can name.
func TestAbandonedPutFreesItsChunks(t *testing.T) {
	errRead := errors.New("disk on fire")
	tests := []struct {
		name string
		put  func(s *cas.Store) error
	}{
		{name: "ErrCanceled", put: func(s *cas.Store) error {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			_, err := s.Put(ctx, &cancelAfter{r: io.LimitReader(randomReader(3), 40<<20), n: 20 << 20, cancel: cancel})
			return err
		}},
		{name: "ErrRead", put: func(s *cas.Store) error {
			_, err := s.Put(context.Background(), &failingReader{r: randomReader(4), n: 20 << 20, err: errRead})
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, s := storetest.OpenCAS(t, cas.Options{})
			require.Error(t, tt.put(s))
			assert.Zero(t, count(t, db, `SELECT count(*) FROM chunks`), "no chunk left")
			assert.Zero(t, count(t, db, `SELECT count(*) FROM chunk_holds`), "no hold left")
			assert.Zero(t, count(t, db, `SELECT count(*) FROM blobs`))
		})
	}
}

// gate yields first, then waits until opened (reached is closed when it
// is first waited on) and yields rest.
type gate struct {
	first, rest io.Reader
	reached     chan struct{}
	open        chan struct{}
	waited      bool
}

func (g *gate) Read(p []byte) (int, error) {
	if n, err := g.first.Read(p); n > 0 || err != io.EOF {
		return n, err
	}
	if !g.waited {
		g.waited = true
		close(g.reached)
		<-g.open
	}
	return g.rest.Read(p)
}

// TestAbandonedPutKeepsChunksOthersHold: a Put abandoned while another
// Put of overlapping content streams frees only the chunks the other does
// not hold; the other completes, with every chunk it stored or found.
func TestAbandonedPutKeepsChunksOthersHold(t *testing.T) {
	ctx := context.Background()
	db, s := storetest.OpenCAS(t, cas.Options{})
	content := randomBytes(24<<20, 5)
	g := &gate{first: bytes.NewReader(content[:12<<20]), rest: bytes.NewReader(content[12<<20:]),
		reached: make(chan struct{}), open: make(chan struct{})}
	type result struct {
		h   cas.Hash
		err error
	}
	done := make(chan result, 1)
	go func() {
		h, err := s.Put(ctx, g)
		done <- result{h, err}
	}()
	<-g.reached
	held := count(t, db, `SELECT count(*) FROM chunk_holds`)
	require.Positive(t, held, "the streaming Put holds what it stored")

	// The same first 12 MiB, then other bytes, then a failure.
	other := io.MultiReader(bytes.NewReader(content[:12<<20]), io.LimitReader(randomReader(6), 8<<20))
	_, err := s.Put(ctx, &failingReader{r: other, n: 20 << 20, err: io.ErrUnexpectedEOF})
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	assert.Equal(t, held, count(t, db, `SELECT count(*) FROM chunk_holds`), "the other Put's holds stay")
	assert.Zero(t, count(t, db, `SELECT count(*) FROM chunks WHERE hash NOT IN (SELECT chunk FROM chunk_holds)`),
		"every chunk the abandoned Put alone stored is freed")

	close(g.open)
	res := <-done
	require.NoError(t, res.err)
	got, err := s.ReadAll(ctx, res.h)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(content, got))
	assert.Zero(t, count(t, db, `SELECT count(*) FROM chunk_holds`), "released with its blob")
}

// TestSweepChunksDropsOldHolds: the holds of a put older than gc's cutoff
// (most often one whose process died part way) go with gc's chunk sweep;
// younger ones stay.
func TestSweepChunksDropsOldHolds(t *testing.T) {
	ctx := context.Background()
	db, s := storetest.OpenCAS(t, cas.Options{})
	require.NoError(t, db.Update(ctx, func(tx *index.Tx) error {
		for i, since := range []int64{100, 200, 5000} {
			if _, err := tx.ExecContext(ctx, `INSERT INTO chunk_holds (chunk, put, since) VALUES (?, ?, ?)`,
				[]byte{byte(i)}, []byte{byte(i)}, since); err != nil {
				return err
			}
		}
		return s.SweepChunks(ctx, tx, nil, 1000, func(int, int64, bool) error { return nil })
	}))
	assert.Equal(t, 1, count(t, db, `SELECT count(*) FROM chunk_holds`))
	assert.Equal(t, 1, count(t, db, `SELECT count(*) FROM chunk_holds WHERE since = 5000`))
}

// TestCanceledPutIsCoded: a streamed Put whose context has ended, before
// it begins or between its chunks, fails with store.canceled, not the
// bare context error, and stores nothing.
func TestCanceledPutIsCoded(t *testing.T) {
	db, s := storetest.OpenCAS(t, cas.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.Put(ctx, io.LimitReader(randomReader(5), 10<<20))
	_, coded := errors.AsType[*wserr.Error](err)
	assert.True(t, coded, "store.canceled, not a bare context error: %v", err)
	assert.Equal(t, wserr.Canceled, wserr.CodeOf(err))
	assert.ErrorIs(t, err, context.Canceled)
	assert.Zero(t, count(t, db, `SELECT count(*) FROM chunks`))
	assert.Zero(t, count(t, db, `SELECT count(*) FROM blobs`))
}
