package wsstore_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/actors"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/wserr"
)

// TestSizedUploadsAreAdmittedInTurn: four uploads of 3 MiB that begin
// together in a store with about 7.8 MiB left under its cap, each giving
// its size (an HTTP upload's Content-Length): the two that fit take their
// room as they begin and are stored, the other two are refused, storing
// nothing (they are read only to hash them: content the store held already
// would be placed). Without sizes the four would all read until the room
// ran out.
func TestSizedUploadsAreAdmittedInTurn(t *testing.T) {
	const limit, size = 8 << 20, 3 << 20
	e := newRetEnv(t, wsstore.Options{Runs: runs.Options{MaxStoreBytes: limit}})
	used, err := e.s.DB.UsedBytes(e.ctx)
	require.NoError(t, err)
	require.Less(t, used, int64(limit-2*size-(1<<20)), "room for two, not three")

	const n = 4
	gate := make(chan struct{})
	type result struct {
		err  error
		hash cas.Hash
	}
	results := make(chan result, n)
	// One per upload once it reads (admitted, or refused and hashing) or
	// failed unread: none of the content flows until all four began.
	settled := make(chan struct{}, n)
	for i := range n {
		go func() {
			b := noise(uint64(i), size)
			content := bytes.NewReader(b)
			r := &gatedReader{r: content, started: make(chan struct{}), gate: gate}
			read := false
			first := readerFunc(func(p []byte) (int, error) {
				if !read {
					read = true
					settled <- struct{}{}
				}
				return r.Read(p)
			})
			_, err := e.s.Actors.UploadWith(e.ctx, fmt.Sprintf("actor%d", i), "big.bin", first, actors.ChangeOptions{Size: size})
			if !read {
				settled <- struct{}{}
			}
			results <- result{err, cas.Sum(b)}
		}()
	}
	for range n {
		<-settled
	}
	close(gate)
	ok := 0
	for range n {
		r := <-results
		if r.err == nil {
			ok++
			continue
		}
		assert.Equal(t, wserr.SizeLimitExceeded, wserr.CodeOf(r.err), "%v", r.err)
		has, err := e.s.Blobs.Has(e.ctx, r.hash)
		require.NoError(t, err)
		assert.False(t, has, "a refused upload stored nothing")
	}
	assert.Equal(t, 2, ok)
	after, err := e.s.DB.UsedBytes(e.ctx)
	require.NoError(t, err)
	assert.LessOrEqual(t, after, int64(limit))
	storetest.RequireSound(t, e.s)
}

type readerFunc func(p []byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }
