package remote_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/remote"
	"github.com/wsstore/wsstore/remote/s3fake"
	"github.com/wsstore/wsstore/wserr"
)

// TestReclaimKeepsASharedPack: two devices push the same pack, each with
// its own index object. A has since published a segment that does not
// name the objects; B has not published. The pack stays, for B's index,
// though A's could go.
func TestReclaimKeepsASharedPack(t *testing.T) {
	srv := fakeBucket(t)
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
	_, err = a.st.PublishSegment(ctx, remote.SegmentHeader{Device: devA, At: time.Now(), Base: true}, nil, nil)
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
	srv := fakeBucket(t)
	ctx := context.Background()
	a, hs, files := droppedAndWrittenAgain(t, srv)
	_, err := a.st.Push(ctx, a.db)
	require.NoError(t, err)

	reclaimFromThirdDevice(t, srv.URL)
	_, err = a.st.Evict(ctx, a.db)
	require.NoError(t, err)
	a.requireAll(t, hs, files) // pushed, not yet named: kept
}

// TestReclaimWaitsForAPush: a reclaim that starts while a push of
// content already in a pack is between the pack's PUT (answered 412) and
// its index object's finds the push's lock and gives up, so the pack the
// push counted on stays. Without the lock the reclaim removed the pack's
// only index object and the pack, and the push then wrote an index
// naming a pack that was gone.
func TestReclaimWaitsForAPush(t *testing.T) {
	srv := fakeBucket(t)
	ctx := context.Background()
	a, hs, files := droppedAndWrittenAgain(t, srv)
	packs := srv.Keys("bkt", "store/data/")
	require.NotEmpty(t, packs)

	c := newDevice(t, srv.URL, "bkt", remote.Options{})
	devC, err := remote.Device(ctx, c.db)
	require.NoError(t, err)
	var started atomic.Bool
	var reclaimed error
	var existed int64
	srv.SetFault(func(r *http.Request) int {
		if r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, "/bkt/store/index/") && started.CompareAndSwap(false, true) {
			_, existed = a.st.Uploads()
			_, reclaimed = c.st.Reclaim(ctx, c.db, devC, remote.ReclaimOptions{})
		}
		return 0
	})
	_, err = a.st.Push(ctx, a.db)
	require.NoError(t, err)
	srv.SetFault(nil)
	require.True(t, started.Load(), "the push wrote an index object")
	assert.Equal(t, int64(1), existed, "the pack was there already when the reclaim started")
	assert.ErrorIs(t, reclaimed, remote.ErrLocked)
	assert.True(t, wserr.Is(reclaimed, wserr.Busy), "coded store.busy: %v", reclaimed)
	assert.Equal(t, packs, srv.Keys("bkt", "store/data/"))

	_, err = a.st.Evict(ctx, a.db)
	require.NoError(t, err)
	a.requireAll(t, hs, files)
	assert.Empty(t, srv.Keys("bkt", "store/locks/push/"), "the push removed its lock")
}

// droppedAndWrittenAgain makes device A, which pushed a 20 KiB file, a
// month ago by the object store's clock, published it in a base segment
// and dropped it in the next one, then deleted it and wrote it again: it
// is pending again, in a pack that is there already and that only
// droppable index objects name.
func droppedAndWrittenAgain(t *testing.T, srv *s3fake.Server) (*device, []cas.Hash, [][]byte) {
	t.Helper()
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
	names, err := a.st.ObjectDelta(ctx, a.db, true)
	require.NoError(t, err)
	defer names.Close()
	s1, err := a.st.PublishSegment(ctx, remote.SegmentHeader{Device: devA, At: time.Now().Add(-29 * 24 * time.Hour), Base: true}, names, nil)
	require.NoError(t, err)
	srv.SetModified("bkt", "store/"+s1.Key, time.Now().Add(-29*24*time.Hour))
	type object struct {
		kind cas.Kind
		hash cas.Hash
	}
	var objs []object
	drops, err := remote.NewObjectList()
	require.NoError(t, err)
	defer drops.Close()
	require.NoError(t, names.Each(func(_ bool, kind cas.Kind, h cas.Hash) error {
		objs = append(objs, object{kind, h})
		return drops.Drop(kind, h)
	}))
	s2, err := a.st.PublishSegment(ctx, remote.SegmentHeader{Device: devA, At: time.Now().Add(-20 * 24 * time.Hour)}, drops, nil)
	require.NoError(t, err)
	srv.SetModified("bkt", "store/"+s2.Key, time.Now().Add(-20*24*time.Hour))

	// A deletes the file, then writes it again.
	require.NoError(t, a.db.Update(ctx, func(tx *index.Tx) error {
		for _, k := range []cas.Kind{cas.KindBlob, cas.KindChunk} {
			for _, o := range objs {
				if o.kind != k {
					continue
				}
				_, ok, err := a.blobs.DeleteObject(ctx, tx, k, o.hash, time.Now().Add(time.Hour).UnixNano())
				require.NoError(t, err)
				require.True(t, ok, o.hash.String())
			}
		}
		return nil
	}))
	a.put(t, files)
	return a, hs, files
}

// TestLockedByThisDevice: a lock this very device left (a command of its
// store killed part way) is named as its own, not another device's.
func TestLockedByThisDevice(t *testing.T) {
	srv := fakeBucket(t)
	ctx := context.Background()
	a := newDevice(t, srv.URL, "bkt", remote.Options{})
	a.put(t, contents(2))
	me, err := remote.Device(ctx, a.db)
	require.NoError(t, err)
	for _, holder := range []string{me, "other"} {
		srv.SetObject("bkt", "store/locks/reclaim/00000000000000000007", fmt.Appendf(nil, `{"device":%q,"at":%q,"expires":%q}`,
			holder, time.Now().Format(time.RFC3339Nano), time.Now().Add(time.Hour).Format(time.RFC3339Nano)))
		_, err := a.st.Push(ctx, a.db)
		require.ErrorIs(t, err, remote.ErrLocked)
		assert.True(t, wserr.Is(err, wserr.Busy), "%v", err)
		if holder == me {
			assert.Contains(t, err.Error(), "this device ("+me+") holds the lock")
		} else {
			assert.Contains(t, err.Error(), "device other holds the lock")
		}
		assert.NotContains(t, err.Error(), "another device")
	}
}

// TestPushAndReclaimLocks: a push refuses while a reclaim holds its lease,
// uploading nothing, and goes ahead once it is gone; a reclaim refuses
// while another device's push lock is live, and removes it once expired.
func TestPushAndReclaimLocks(t *testing.T) {
	srv := fakeBucket(t)
	ctx := context.Background()
	a := newDevice(t, srv.URL, "bkt", remote.Options{})
	files := contents(20)
	hs := a.put(t, files)
	n, err := a.st.Pending(ctx, a.db)
	require.NoError(t, err)
	lock := func(key string, expires time.Time) {
		srv.SetObject("bkt", "store/locks/"+key, fmt.Appendf(nil, `{"device":"other","at":%q,"expires":%q}`,
			time.Now().Format(time.RFC3339Nano), expires.Format(time.RFC3339Nano)))
	}

	lock("reclaim/00000000000000000007", time.Now().Add(time.Hour))
	st, err := a.st.Push(ctx, a.db)
	require.ErrorIs(t, err, remote.ErrLocked)
	assert.True(t, wserr.Is(err, wserr.Busy), "coded store.busy: %v", err)
	assert.Equal(t, n, st.Pending)
	assert.Zero(t, srv.Count("PUT"), "nothing uploaded, no lock left")
	left, err := a.st.Pending(ctx, a.db)
	require.NoError(t, err)
	assert.Equal(t, n, left)

	// Once the lease expired the push goes ahead; a lock it could not
	// remove fails it, with everything pushed (the lock expires).
	lock("reclaim/00000000000000000007", time.Now().Add(-time.Minute))
	srv.SetFault(func(r *http.Request) int {
		if r.Method == http.MethodDelete && strings.Contains(r.URL.Path, "/locks/push/") {
			return http.StatusInternalServerError
		}
		return 0
	})
	st, err = a.st.Push(ctx, a.db)
	srv.SetFault(nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "push: release the lock")
	assert.Zero(t, st.Pending)
	assert.Equal(t, n, st.Objects+st.Chunked)
	mine := srv.Keys("bkt", "store/locks/push/")
	require.Len(t, mine, 1)
	lock(strings.TrimPrefix(mine[0], "store/locks/"), time.Now().Add(-time.Minute))
	_, err = a.st.Evict(ctx, a.db)
	require.NoError(t, err)
	a.requireAll(t, hs, files)

	c := newDevice(t, srv.URL, "bkt", remote.Options{})
	devC, err := remote.Device(ctx, c.db)
	require.NoError(t, err)
	lock("push/other-00000000000000000001", time.Now().Add(time.Hour))
	_, err = c.st.Reclaim(ctx, c.db, devC, remote.ReclaimOptions{})
	require.ErrorIs(t, err, remote.ErrLocked)
	assert.Contains(t, err.Error(), "locks/push/other-")

	lock("push/other-00000000000000000001", time.Now().Add(-time.Minute))
	rs, err := c.st.Reclaim(ctx, c.db, devC, remote.ReclaimOptions{})
	require.NoError(t, err)
	assert.Equal(t, 2, rs.Locks, "the expired push locks")
	assert.Empty(t, srv.Keys("bkt", "store/locks/push/"))
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
