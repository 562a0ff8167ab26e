package cas_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
)

// appendHistory is n versions of an 8 KB document that grows by a
// paragraph each time: the shape of a chat's main draft.
func appendHistory(n int) [][]byte {
	doc := []byte(strings.Repeat("The keeper lit the lamp at dusk and watched the ships pass.\n", 140))
	out := make([][]byte, 0, n)
	for i := range n {
		doc = fmt.Appendf(doc, "\n## Part %d\n\nThe fog came in over the harbour stones, and round %d ended.\n", i, i)
		out = append(out, append([]byte(nil), doc...))
	}
	return out
}

// TestReencoderWaitsForAnIdleStore: the background re-encoder takes no
// job while the store has not been idle for its wait, however many
// writes queue work; the queue is Drain's (a closing store's) then, and
// a store left idle drains it by itself. Every version reads back within
// the chain bound throughout.
func TestReencoderWaitsForAnIdleStore(t *testing.T) {
	ctx := context.Background()
	versions := appendHistory(40)
	write := func(t *testing.T, s *cas.Store) map[cas.Hash][]byte {
		want := map[cas.Hash][]byte{}
		var prev cas.Hash
		for _, v := range versions {
			h, err := s.PutVersion(ctx, nil, v, prev)
			require.NoError(t, err)
			want[h], prev = v, h
		}
		return want
	}

	t.Run("BusyThenDrain", func(t *testing.T) {
		_, s := storetest.OpenCAS(t, cas.Options{ReencodeIdle: time.Hour})
		stop := s.StartReencoder()
		want := write(t, s)
		n, err := s.PendingReencodes(ctx)
		require.NoError(t, err)
		assert.Equal(t, len(versions)-1, n, "no job ran while the store was busy")
		requireBounded(t, s, want, 16, 0)
		stop()
		ran, err := s.Drain(ctx)
		require.NoError(t, err)
		assert.Equal(t, len(versions)-1, ran)
		n, err = s.PendingReencodes(ctx)
		require.NoError(t, err)
		assert.Zero(t, n)
		requireBounded(t, s, want, 16, 1)
		storetest.VerifyCAS(t, s)
	})

	t.Run("IdleDrainsItself", func(t *testing.T) {
		_, s := storetest.OpenCAS(t, cas.Options{ReencodeIdle: time.Millisecond})
		stop := s.StartReencoder()
		defer stop()
		want := write(t, s)
		require.Eventually(t, func() bool {
			n, err := s.PendingReencodes(ctx)
			return err == nil && n == 0
		}, 30*time.Second, 5*time.Millisecond)
		requireBounded(t, s, want, 16, 0)
	})
}

// TestDrainCompressesOnlyWhatStaysWhole: versions queued one after
// another are stored raw by their writes; their jobs make each a delta of
// the next without compressing it whole first, so a whole history costs
// one compression, of its newest version. A raw version whose successor's
// job has nothing to do (the successor went back to older content) is
// compressed by that job: nothing stays raw where compression pays.
func TestDrainCompressesOnlyWhatStaysWhole(t *testing.T) {
	ctx := context.Background()
	db, s := storetest.OpenCAS(t, cas.Options{})
	versions := appendHistory(30)
	want := map[cas.Hash][]byte{}
	var prev cas.Hash
	for _, v := range versions {
		h, err := s.PutVersion(ctx, nil, v, prev)
		require.NoError(t, err)
		want[h], prev = v, h
	}
	before := cas.Compressions(s)
	_, err := s.Drain(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(1), cas.Compressions(s)-before, "only the newest version is compressed whole")
	for h := range want {
		info, err := s.Stat(ctx, h)
		require.NoError(t, err)
		if h == prev {
			assert.Equal(t, cas.CodecZstd, info.Codec)
		} else {
			assert.Equal(t, cas.CodecDelta, info.Codec)
		}
	}
	requireBounded(t, s, want, 16, 0)

	// a write back to the first version, then one more: the version the
	// revert replaced was left raw for a job that does nothing
	other := appendHistory(3)
	a, err := s.PutVersion(ctx, nil, []byte(strings.ToUpper(string(other[0]))), cas.Hash{})
	require.NoError(t, err)
	b, err := s.PutVersion(ctx, nil, []byte(strings.ToUpper(string(other[1]))), a)
	require.NoError(t, err)
	_, err = s.PutVersion(ctx, nil, []byte(strings.ToUpper(string(other[0]))), b)
	require.NoError(t, err)
	_, err = s.Drain(ctx)
	require.NoError(t, err)
	for h, c := range layout(t, db) {
		assert.NotEqual(t, int(cas.CodecRaw), c[0], "%s is left raw", h.Short())
	}
	storetest.VerifyCAS(t, s)
}

// TestQueuedWriteStatementsDoNotGrowWithTheQueue: a queued write runs
// the same statements whether 3 or 300 jobs wait, and none of them scans
// the queue (its bounds come from its first and last rows).
func TestQueuedWriteStatementsDoNotGrowWithTheQueue(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	var on bool
	var stmts []string
	db := storetest.OpenDB(t, index.Options{Trace: func(q string) {
		mu.Lock()
		defer mu.Unlock()
		if on {
			stmts = append(stmts, q)
		}
	}})
	s, err := cas.New(db, cas.Options{})
	require.NoError(t, err)
	versions := appendHistory(302)
	var prev cas.Hash
	counts := map[int]int{}
	var traced []string
	for i, v := range versions {
		traceIt := i == 4 || i == 301
		mu.Lock()
		on, stmts = traceIt, nil
		mu.Unlock()
		prev, err = s.PutVersion(ctx, nil, v, prev)
		require.NoError(t, err)
		mu.Lock()
		if traceIt {
			counts[i-1] = len(stmts)
			traced = append(traced, stmts...)
		}
		on = false
		mu.Unlock()
	}
	n, err := s.PendingReencodes(ctx)
	require.NoError(t, err)
	require.Equal(t, 301, n)
	assert.Equal(t, counts[3], counts[300], "statements of a write with 3 and with 300 jobs queued")
	scan := regexp.MustCompile(`\bSCAN blob_reencodes\b`)
	for _, q := range traced {
		if !strings.Contains(q, "blob_reencodes") {
			continue
		}
		plan := storetest.QueryPlan(t, db, q, make([]byte, 32), make([]byte, 32), 0)
		assert.NotRegexp(t, scan, strings.Join(plan, "\n"), q)
	}
}

// TestPutPreparedStoresWhatPutVersionStores: content prepared outside
// the transaction (hashed, and compressed when it starts no history) is
// stored as PutVersion stores it, without being hashed or compressed
// again, also when the previous version changed since it was prepared.
func TestPutPreparedStoresWhatPutVersionStores(t *testing.T) {
	ctx := context.Background()
	dbA, prepared := storetest.OpenCAS(t, cas.Options{})
	dbB, plain := storetest.OpenCAS(t, cas.Options{})
	versions := appendHistory(6)
	var prevA, prevB cas.Hash
	for i, v := range versions {
		seen := prevA
		if i == 3 {
			seen = cas.Hash{} // prepared as a new file; stored as the next version
		}
		p := prepared.Prepare(v, seen)
		hashes, compressions := cas.Hashes(prepared), cas.Compressions(prepared)
		var err error
		err = dbA.Update(ctx, func(tx *index.Tx) error {
			prevA, err = prepared.PutPrepared(ctx, tx, p, prevA)
			return err
		})
		require.NoError(t, err)
		assert.Equal(t, p.Hash(), prevA)
		assert.Equal(t, hashes, cas.Hashes(prepared), "hashed once, before the transaction")
		if i == 0 {
			assert.Equal(t, compressions, cas.Compressions(prepared), "compressed once, before the transaction")
		}
		err = dbB.Update(ctx, func(tx *index.Tx) error {
			prevB, err = plain.PutVersion(ctx, tx, v, prevB)
			return err
		})
		require.NoError(t, err)
		require.Equal(t, prevB, prevA)
	}
	_, err := prepared.Drain(ctx)
	require.NoError(t, err)
	_, err = plain.Drain(ctx)
	require.NoError(t, err)
	assert.Equal(t, layout(t, dbB), layout(t, dbA))
	storetest.VerifyCAS(t, prepared)
}
