package cas_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
)

// TestOwnWorkKeepsToTheCap: queued re-encodings that would take a capped
// store past its cap, and above what it held, are rolled back and stay
// queued, by Drain (a store that closes), Reencode and the background
// runner alike, with no error; the store's pages in use do not grow.
// Under a cap with room, or with none, the same jobs run.
func TestOwnWorkKeepsToTheCap(t *testing.T) {
	ctx := context.Background()
	var limit atomic.Int64
	g := storetest.NewGrowingStorage()
	db, s := storetest.OpenCAS(t, cas.Options{Storage: g, DictMax: -1,
		Cap: func(context.Context, *index.Tx) (int64, error) { return limit.Load(), nil }})
	require.NoError(t, storetest.CreatePadding(ctx, db))
	var prev cas.Hash
	for _, v := range draftHistory(6) {
		h, err := s.PutVersion(ctx, nil, v, prev)
		require.NoError(t, err)
		prev = h
	}
	queued, err := s.PendingReencodes(ctx)
	require.NoError(t, err)
	require.Positive(t, queued)
	used, err := db.UsedBytes(ctx)
	require.NoError(t, err)

	g.Grow.Store(true)
	limit.Store(used + 4096) // room for less than a job takes
	n, err := s.Drain(ctx)
	require.NoError(t, err)
	assert.Zero(t, n)
	n, err = s.Reencode(ctx, 0)
	require.NoError(t, err)
	assert.Zero(t, n)
	// The background runner tries a job that did not fit again only after
	// a write (which may have made room), once.
	var plans atomic.Int32
	cas.SetPlanned(s, func() { plans.Add(1) })
	stop := s.StartReencoder()
	require.Never(t, func() bool { return plans.Load() > 0 }, time.Second, 50*time.Millisecond,
		"no write since Reencode's refusal")
	require.NoError(t, db.Update(ctx, func(tx *index.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM padding`)
		return err
	}))
	require.Eventually(t, func() bool { return plans.Load() >= 1 }, 20*time.Second, 10*time.Millisecond)
	require.Never(t, func() bool { return plans.Load() > 1 }, time.Second, 50*time.Millisecond,
		"no write since the runner's refusal")
	stop()
	cas.SetPlanned(s, nil)
	left, err := s.PendingReencodes(ctx)
	require.NoError(t, err)
	assert.Equal(t, queued, left, "the jobs stay queued")
	after, err := db.UsedBytes(ctx)
	require.NoError(t, err)
	assert.LessOrEqual(t, after, used, "nothing of the store's own work took room")

	limit.Store(used + 8<<20) // room
	n, err = s.Drain(ctx)
	require.NoError(t, err)
	assert.Equal(t, queued, n)

	// Past the cap already, work that frees room still runs.
	for _, v := range textVersions(6) {
		h, err := s.PutVersion(ctx, nil, v, prev)
		require.NoError(t, err)
		prev = h
	}
	g.Grow.Store(false)
	limit.Store(1)
	queued, err = s.PendingReencodes(ctx)
	require.NoError(t, err)
	n, err = s.Drain(ctx)
	require.NoError(t, err)
	assert.Equal(t, queued, n, "jobs that take no room run past the cap")
}
