package cas_test

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/internal/storetest"
)

// allocated returns the fewest bytes fn allocated on the heap in five
// runs: the least is fn's own, free of what the rest of the process did
// meanwhile.
func allocated(fn func()) int64 {
	best := int64(math.MaxInt64)
	var m runtime.MemStats
	for range 5 {
		runtime.ReadMemStats(&m)
		before := m.TotalAlloc
		fn()
		runtime.ReadMemStats(&m)
		best = min(best, int64(m.TotalAlloc-before))
	}
	return best
}

// allocSlack is what a read may allocate beyond the bytes it must: its
// transaction, statement and row.
const allocSlack = 64 << 10

// A read of a blob stored in one row allocates its plain bytes and the
// storage's one copy of its stored bytes, and little more: it decodes
// straight from the storage's buffer, hashes without allocating, and
// returns what it decoded. A delta's read adds the plain bytes of each
// version of its chain and two copies of each delta (small).
func TestReadAllocatesOneCopy(t *testing.T) {
	ctx := context.Background()
	_, s := storetest.OpenCAS(t, cas.Options{})
	text, random := textBytes(1<<20, 1), randomBytes(1<<20, 2)
	edited := append([]byte("A new first line.\n"), text...)
	var prev cas.Hash
	for _, v := range [][]byte{text, edited} {
		h, err := s.PutVersion(ctx, nil, v, prev)
		require.NoError(t, err)
		prev = h
	}
	_, err := s.Drain(ctx)
	require.NoError(t, err)
	tests := []struct {
		name  string
		data  []byte
		codec cas.Codec
	}{
		{"Zstd", edited, cas.CodecZstd},
		{"Raw", random, cas.CodecRaw},
		{"Delta", text, cas.CodecDelta},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := s.PutBytes(ctx, nil, tt.data)
			require.NoError(t, err)
			info, err := s.Stat(ctx, h)
			require.NoError(t, err)
			require.Equal(t, tt.codec, info.Codec)
			want := info.Size + info.Stored + allocSlack
			if info.Codec == cas.CodecDelta {
				base, err := s.Stat(ctx, info.Base)
				require.NoError(t, err)
				want += base.Size + base.Stored + info.Stored
			}
			var got []byte
			n := allocated(func() { got, err = s.ReadAll(ctx, h) })
			require.NoError(t, err)
			require.Equal(t, tt.data, got)
			t.Logf("read of %d bytes (stored %d as %s) allocated %d: %.2f× its size", info.Size, info.Stored, info.Codec, n, float64(n)/float64(info.Size))
			assert.LessOrEqual(t, n, want, "a read allocates its plain bytes and one copy of its stored bytes")
		})
	}
}

// A queued re-encoding reads its new version (the storage's copy of its
// stored bytes and one of its own), the open versions it re-encodes, and
// not the version it replaces when the job before it read that already:
// a history's jobs, drained one after another, each read one version
// whole.
func TestDrainReadsEachVersionOnce(t *testing.T) {
	ctx := context.Background()
	_, s := storetest.OpenCAS(t, cas.Options{})
	doc := textBytes(700<<10, 1)
	var prev cas.Hash
	for i := range 21 {
		doc = fmt.Appendf(doc, "Line %d of the appended notes.\n", i)
		h, err := s.PutVersion(ctx, nil, doc, prev)
		require.NoError(t, err)
		prev = h
		if i == 0 {
			_, err = s.Drain(ctx)
			require.NoError(t, err)
		}
	}
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	before := m.TotalAlloc
	jobs, err := s.Drain(ctx)
	runtime.ReadMemStats(&m)
	require.NoError(t, err)
	require.Equal(t, 20, jobs)
	perJob := float64(m.TotalAlloc-before) / float64(jobs) / float64(len(doc))
	t.Logf("a job allocated %.2f× its version's size", perJob)
	assert.LessOrEqual(t, perJob, 4.0, "a job reads the version it replaces again")
}
