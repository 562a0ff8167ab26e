package cas_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
)

// putSmallFiles puts the corpus's files 0 to n-1 into s, each in a
// transaction of its own, and returns their addresses.
func putSmallFiles(t *testing.T, s *cas.Store, n int) []cas.Hash {
	t.Helper()
	hs := make([]cas.Hash, n)
	for i := range hs {
		h, err := s.PutBytes(context.Background(), nil, smallFile(i))
		require.NoError(t, err)
		hs[i] = h
	}
	return hs
}

// TestDictTrainingLeftToTheRunner: while a background runner is started,
// the write that makes a training due does not train in its transaction
// (it took 35–50 ms in a chat session): the runner trains, or, if it has
// had no turn, Drain does.
func TestDictTrainingLeftToTheRunner(t *testing.T) {
	ctx := context.Background()
	dicts := func(s *cas.Store) int {
		ds, err := s.Dicts(ctx)
		require.NoError(t, err)
		return len(ds)
	}

	// A runner that never has a turn: the writes past the line leave the
	// training due, and Drain takes it.
	s, _ := newDictStore(t, cas.Options{DictTrainAfter: 32, ReencodeIdle: time.Hour})
	stop := s.StartReencoder()
	putSmallFiles(t, s, 64)
	assert.Zero(t, dicts(s), "no write trained")
	stop()
	_, err := s.Drain(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, dicts(s), "Drain trained what was due")

	// Without a runner, the write that crosses the line trains.
	s, _ = newDictStore(t, cas.Options{DictTrainAfter: 32, ReencodeIdle: time.Hour})
	putSmallFiles(t, s, 32)
	assert.Equal(t, 1, dicts(s), "the write that crossed the line trained")

	// A runner with turns trains while the writes go on.
	s, _ = newDictStore(t, cas.Options{DictTrainAfter: 32, ReencodeIdle: time.Millisecond})
	stop = s.StartReencoder()
	defer stop()
	putSmallFiles(t, s, 40)
	require.Eventually(t, func() bool { return dicts(s) == 1 }, 10*time.Second, 5*time.Millisecond, "the runner trains")
	rep, err := s.Verify(ctx, nil)
	require.NoError(t, err)
	assert.Empty(t, rep.Problems)
}

// TestDictTrainedAsideAfterAnother: a training built outside the write
// lock lists nothing if another dictionary was listed meanwhile (by
// another process, here TrainDict between the building and the listing).
func TestDictTrainedAsideAfterAnother(t *testing.T) {
	ctx := context.Background()
	s, _ := newDictStore(t, cas.Options{DictTrainAfter: 1 << 30})
	putSmallFiles(t, s, 200)
	var other cas.DictInfo
	cas.SetTrainPlanned(s, func() {
		info, ok, err := s.TrainDict(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		other = info
	})
	ok, err := cas.TrainAside(ctx, s)
	require.NoError(t, err)
	assert.False(t, ok, "the aside training is dropped")
	ds, err := s.Dicts(ctx)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	assert.Equal(t, other.Hash, ds[0].Hash, "only the other training's dictionary is listed")
	rep, err := s.Verify(ctx, nil)
	require.NoError(t, err)
	assert.Empty(t, rep.Problems)
}

// TestDictTrainedAsideLeavesChangedSamples: a sample whose row changed
// between the building and the listing keeps its row; the other samples
// are re-encoded with the new dictionary.
func TestDictTrainedAsideLeavesChangedSamples(t *testing.T) {
	ctx := context.Background()
	s, db := newDictStore(t, cas.Options{DictTrainAfter: 1 << 30})
	hs := putSmallFiles(t, s, 60)
	// Every small blob is a sample of a store this small; the first is
	// stored raw meanwhile, as a writer of another build might.
	changed := hs[0]
	cas.SetTrainPlanned(s, func() {
		require.NoError(t, db.Update(ctx, func(tx *index.Tx) error {
			b := smallFile(0)
			_, err := tx.ExecContext(ctx, `UPDATE blobs SET codec = 0, base = NULL, data = ?, stored = ? WHERE hash = ?`, b, len(b), changed)
			return err
		}))
	})
	ok, err := cas.TrainAside(ctx, s)
	require.NoError(t, err)
	require.True(t, ok)
	ds, err := s.Dicts(ctx)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	info, err := s.Stat(ctx, changed)
	require.NoError(t, err)
	assert.Equal(t, cas.CodecRaw, info.Codec, "the changed sample keeps its row")
	recoded := 0
	for _, h := range hs[1:] {
		info, err := s.Stat(ctx, h)
		require.NoError(t, err)
		if info.Codec == cas.CodecZstd && info.Base == ds[0].Hash {
			recoded++
		}
	}
	assert.Greater(t, recoded, len(hs)/2, "the other samples are compressed with the dictionary")
	rep, err := s.Verify(ctx, nil)
	require.NoError(t, err)
	assert.Empty(t, rep.Problems)
}
