package remote_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/remote"
	"github.com/wsstore/wsstore/remote/s3fake"
)

// TestReclaimKeepsASharedPack: two devices push the same pack, each with
// its own index object. A has since published a segment that does not
// name the objects; B has not published. The pack stays, for B's index,
// though A's could go.
func TestReclaimKeepsASharedPack(t *testing.T) {
	testEnv(t)
	srv := s3fake.New("bkt")
	t.Cleanup(srv.Close)
	ctx := context.Background()
	files := contents(20)
	a := newDevice(t, srv.URL, "bkt", remote.Options{})
	a.put(t, files)
	_, err := a.st.Push(ctx, a.db)
	require.NoError(t, err)
	b := newDevice(t, srv.URL, "bkt", remote.Options{})
	hs := b.put(t, files)
	_, err = b.st.Push(ctx, b.db)
	require.NoError(t, err)

	old := time.Now().Add(-30 * 24 * time.Hour)
	for _, k := range append(srv.Keys("bkt", "store/data/"), srv.Keys("bkt", "store/index/")...) {
		srv.SetModified("bkt", k, old)
	}
	devA, err := remote.Device(ctx, a.db)
	require.NoError(t, err)
	require.NoError(t, a.st.RegisterDevice(ctx, devA))
	_, err = a.st.PublishSegment(ctx, remote.SegmentHeader{Device: devA, At: time.Now(), Base: true}, nil)
	require.NoError(t, err)

	reclaimFromThirdDevice(t, srv.URL)

	_, err = b.st.Evict(ctx, b.db)
	require.NoError(t, err)
	b.requireAll(t, hs, files) // B never published: its pushed pack is still there
}

// TestReclaimKeepsAPackPushedAgain: a device pushes content again after
// dropping it from its object set; the pack is there already (412), but
// the push writes an index object of its own, dated now, so the segment
// that dropped the objects does not count as published since, and
// reclaim keeps the pack until the device names it again.
func TestReclaimKeepsAPackPushedAgain(t *testing.T) {
	testEnv(t)
	srv := s3fake.New("bkt")
	t.Cleanup(srv.Close)
	ctx := context.Background()
	files := contents(10)[9:] // one 20 KiB file
	a := newDevice(t, srv.URL, "bkt", remote.Options{})
	hs := a.put(t, files)
	_, err := a.st.Push(ctx, a.db)
	require.NoError(t, err)
	for _, k := range append(srv.Keys("bkt", "store/data/"), srv.Keys("bkt", "store/index/")...) {
		srv.SetModified("bkt", k, time.Now().Add(-30*24*time.Hour))
	}
	devA, err := remote.Device(ctx, a.db)
	require.NoError(t, err)
	require.NoError(t, a.st.RegisterDevice(ctx, devA))
	names, _, err := a.st.ObjectDelta(ctx, a.db, true)
	require.NoError(t, err)
	s1, err := a.st.PublishSegment(ctx, remote.SegmentHeader{Device: devA, At: time.Now().Add(-29 * 24 * time.Hour), Base: true, Added: names}, nil)
	require.NoError(t, err)
	srv.SetModified("bkt", "store/"+s1.Key, time.Now().Add(-29*24*time.Hour))
	s2, err := a.st.PublishSegment(ctx, remote.SegmentHeader{Device: devA, At: time.Now().Add(-20 * 24 * time.Hour), Dropped: names}, nil)
	require.NoError(t, err)
	srv.SetModified("bkt", "store/"+s2.Key, time.Now().Add(-20*24*time.Hour))

	// A deletes the file, then writes it again and pushes it.
	require.NoError(t, a.db.Update(ctx, func(tx *index.Tx) error {
		for _, k := range []cas.Kind{cas.KindBlob, cas.KindChunk} {
			for _, n := range names {
				if n[0] != byte('0'+k) {
					continue
				}
				h, err := cas.ParseHash(n[2:])
				require.NoError(t, err)
				_, ok, err := a.blobs.DeleteObject(ctx, tx, k, h, time.Now().Add(time.Hour).UnixNano())
				require.NoError(t, err)
				require.True(t, ok, n)
			}
		}
		return nil
	}))
	a.put(t, files)
	_, err = a.st.Push(ctx, a.db)
	require.NoError(t, err)

	reclaimFromThirdDevice(t, srv.URL)
	_, err = a.st.Evict(ctx, a.db)
	require.NoError(t, err)
	a.requireAll(t, hs, files) // pushed, not yet named: kept
}

// reclaimFromThirdDevice runs a reclaim, with the default grace, from a
// new device on the bucket.
func reclaimFromThirdDevice(t *testing.T, endpoint string) {
	t.Helper()
	ctx := context.Background()
	c := newDevice(t, endpoint, "bkt", remote.Options{})
	devC, err := remote.Device(ctx, c.db)
	require.NoError(t, err)
	_, err = c.st.Reclaim(ctx, c.db, devC, remote.ReclaimOptions{})
	require.NoError(t, err)
}
