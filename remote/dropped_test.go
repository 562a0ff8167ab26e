package remote_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/remote"
)

// TestDropDuringPublishIsPublishedNext: a record gc drops while a segment
// is being published, after its object list was taken, is dropped by the
// next segment, so reclaim may remove its pack: whether the list named
// the object as listed before (a base's) or as added by the segment.
// Before, a base cleared every drop recorded (one made meanwhile too),
// and an object the segment added and gc then dropped was never dropped:
// both stayed in the device's object set for good, and their packs on
// the object store. A drop of an object recorded again meanwhile is
// not published.
func TestDropDuringPublishIsPublishedNext(t *testing.T) {
	ctx := context.Background()
	setup := func(t *testing.T) (*device, string, []cas.Hash) {
		srv := fakeBucket(t)
		a := newDevice(t, srv.URL, "bkt", remote.Options{})
		hs, _ := a.putTiny(t, 3)
		_, err := a.st.Push(ctx, a.db)
		require.NoError(t, err)
		dev, err := remote.Device(ctx, a.db)
		require.NoError(t, err)
		publish(t, a, dev, true, nil)
		return a, dev, hs
	}
	drop := func(t *testing.T, a *device, h cas.Hash) {
		require.NoError(t, a.db.Update(ctx, func(tx *index.Tx) error {
			_, ok, err := a.blobs.DeleteObject(ctx, tx, cas.KindBlob, h, time.Now().Add(time.Hour).UnixNano())
			require.True(t, ok)
			return err
		}))
	}
	next := func(t *testing.T, a *device) (dropped []cas.Hash, added int64) {
		objs, err := a.st.ObjectDelta(ctx, a.db, false)
		require.NoError(t, err)
		defer objs.Close()
		require.NoError(t, objs.Each(func(d bool, _ cas.Kind, h cas.Hash) error {
			if d {
				dropped = append(dropped, h)
			}
			return nil
		}))
		return dropped, objs.Added()
	}

	t.Run("ListedBeforeABase", func(t *testing.T) {
		a, dev, hs := setup(t)
		publish(t, a, dev, true, func() { drop(t, a, hs[1]) })
		dropped, added := next(t, a)
		assert.Equal(t, []cas.Hash{hs[1]}, dropped)
		assert.Zero(t, added)
	})
	t.Run("AddedByTheSegment", func(t *testing.T) {
		for _, base := range []bool{false, true} {
			a, dev, _ := setup(t)
			more, _ := a.putTiny(t, 5)
			_, err := a.st.Push(ctx, a.db)
			require.NoError(t, err)
			publish(t, a, dev, base, func() { drop(t, a, more[4]) })
			dropped, added := next(t, a)
			assert.Equal(t, []cas.Hash{more[4]}, dropped, "base %v", base)
			assert.Zero(t, added)
		}
	})
	t.Run("RecordedAgain", func(t *testing.T) {
		a, dev, hs := setup(t)
		publish(t, a, dev, true, func() {
			drop(t, a, hs[1])
			a.putTiny(t, 3)
		})
		dropped, added := next(t, a)
		assert.Empty(t, dropped, "the base names it and the store records it")
		assert.Zero(t, added)
	})
}

// publish publishes a segment of a's object changes (every object for a
// base), calling between, if given, after the list is taken and before
// the segment is recorded as published.
func publish(t *testing.T, a *device, dev string, base bool, between func()) {
	t.Helper()
	ctx := context.Background()
	objs, err := a.st.ObjectDelta(ctx, a.db, base)
	require.NoError(t, err)
	defer objs.Close()
	if between != nil {
		between()
	}
	at, err := remote.SegmentTime(ctx, a.db, time.Now())
	require.NoError(t, err)
	seg, err := a.st.PublishSegment(ctx, remote.SegmentHeader{Device: dev, At: at, Base: base}, objs, nil)
	require.NoError(t, err)
	require.NoError(t, a.st.RecordPublished(ctx, a.db, remote.Published{Segment: seg, Bytes: seg.Size, Objects: objs}))
}
