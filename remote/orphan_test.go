package remote_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/remote"
	"github.com/wsstore/wsstore/wserr"
)

// TestReclaimFindsAPackItsIndexLeft: a reclaim killed between removing a
// pack's index object and removing the pack (every request from then on
// unanswered, its lease's removal too) leaves the pack on the object store
// with no index object naming it. The next reclaim, once the killed one's
// lease has expired, finds it in its listing of data/ (older than the
// grace, and what the copy of the index it ends with lists used by no
// device) and removes it with the rest. Before, it stayed for good: a
// reclaim only went by the index objects.
func TestReclaimFindsAPackItsIndexLeft(t *testing.T) {
	srv := fakeBucket(t)
	ctx := context.Background()
	a := newDevice(t, srv.URL, "bkt", remote.Options{PackSize: 1})
	a.put(t, contents(8))
	_, err := a.st.Push(ctx, a.db)
	require.NoError(t, err)
	devA, err := remote.Device(ctx, a.db)
	require.NoError(t, err)
	require.NoError(t, a.st.RegisterDevice(ctx, devA))
	old := time.Now().Add(-30 * 24 * time.Hour)
	packs := srv.Keys("bkt", "store/data/")
	require.Greater(t, len(packs), 3)
	for _, k := range append(packs, srv.Keys("bkt", "store/index/")...) {
		srv.SetModified("bkt", k, old)
	}
	// A's base names no object: every pack may go.
	_, err = a.st.PublishSegment(ctx, remote.SegmentHeader{Device: devA, At: time.Now(), Base: true}, nil, nil)
	require.NoError(t, err)

	clock := storetest.NewClockAt(time.Now(), 0)
	c := newDevice(t, srv.URL, "bkt", remote.Options{Now: clock.Now})
	devC, err := remote.Device(ctx, c.db)
	require.NoError(t, err)
	var killed atomic.Bool
	srv.SetFault(func(r *http.Request) int {
		if killed.Load() {
			return http.StatusServiceUnavailable
		}
		if r.Method == http.MethodDelete && strings.HasPrefix(r.URL.Path, "/bkt/store/index/") {
			killed.Store(true) // this removal lands; nothing after it does
		}
		return 0
	})
	_, err = c.st.Reclaim(ctx, c.db, devC, remote.ReclaimOptions{})
	require.Error(t, err)
	assert.True(t, wserr.Is(err, wserr.Busy), "%v", err)
	srv.SetFault(nil)
	require.Len(t, srv.Keys("bkt", "store/index/"), len(packs)-1, "one index object went")
	require.Len(t, srv.Keys("bkt", "store/data/"), len(packs), "its pack did not")
	require.NotEmpty(t, srv.Keys("bkt", "store/locks/reclaim/"), "the killed reclaim's lease is left")

	clock.Advance(remote.DefaultLeaseTTL + time.Minute)
	st, err := c.st.Reclaim(ctx, c.db, devC, remote.ReclaimOptions{})
	require.NoError(t, err)
	assert.Equal(t, len(packs), st.Packs, "the pack whose index object went is removed with the others")
	assert.Equal(t, len(packs)-1, st.Indexes)
	assert.Empty(t, srv.Keys("bkt", "store/data/"))
	assert.Empty(t, srv.Keys("bkt", "store/index/"))
}

// TestReclaimKeepsAPackItsPushLeft: a push cut off between a pack's PUT
// and its index object's (the index object's PUT refused by a server in
// trouble) leaves a pack no index object names. A reclaim keeps it while
// it is younger than the grace, as it keeps a push's in flight whose
// index object is still to come, and the device's next push names it
// again. Once older than the grace, with no device using what it holds
// (the device that pushed it still has its objects to push), it goes.
func TestReclaimKeepsAPackItsPushLeft(t *testing.T) {
	srv := fakeBucket(t)
	ctx := context.Background()
	c := newDevice(t, srv.URL, "bkt", remote.Options{})
	devC, err := remote.Device(ctx, c.db)
	require.NoError(t, err)
	cutOffPush := func(files [][]byte) (*device, []cas.Hash, []string) {
		t.Helper()
		p := newDevice(t, srv.URL, "bkt", remote.Options{})
		before := srv.Keys("bkt", "store/data/")
		srv.SetFault(func(r *http.Request) int {
			if r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, "/bkt/store/index/") {
				return http.StatusServiceUnavailable
			}
			return 0
		})
		hs := p.put(t, files)
		_, err := p.st.Push(ctx, p.db)
		srv.SetFault(nil)
		require.Error(t, err)
		var added []string
		for _, k := range srv.Keys("bkt", "store/data/") {
			if !strings.Contains(strings.Join(before, " "), k) {
				added = append(added, k)
			}
		}
		require.Len(t, added, 1, "the pack went up, its index object did not")
		return p, hs, added
	}

	files := contents(9)
	p, hs, fresh := cutOffPush(files[:5])
	st, err := c.st.Reclaim(ctx, c.db, devC, remote.ReclaimOptions{})
	require.NoError(t, err)
	assert.Zero(t, st.Packs, "younger than the grace")
	assert.Equal(t, fresh, srv.Keys("bkt", "store/data/"))
	ps, err := p.st.Push(ctx, p.db)
	require.NoError(t, err)
	assert.Positive(t, ps.Packs)
	b := newDevice(t, srv.URL, "bkt", remote.Options{})
	_, err = b.st.Pull(ctx, b.db)
	require.NoError(t, err)
	b.requireAll(t, hs, files[:5])

	q, hs, stale := cutOffPush(files[5:])
	srv.SetModified("bkt", stale[0], time.Now().Add(-30*24*time.Hour))
	st, err = c.st.Reclaim(ctx, c.db, devC, remote.ReclaimOptions{})
	require.NoError(t, err)
	assert.Equal(t, 1, st.Packs, "older than the grace, and nothing it holds is used")
	assert.NotContains(t, srv.Keys("bkt", "store/data/"), stale[0])
	_, err = q.st.Push(ctx, q.db) // q's objects are still its to push
	require.NoError(t, err)
	_, err = q.st.Evict(ctx, q.db)
	require.NoError(t, err)
	q.requireAll(t, hs, files[5:])
}

// TestReclaimReadsAnUnnamedPackOnce: a reclaim reads the index an unnamed
// pack ends with in one ranged GET of its end, and in a second only when
// that index is longer than the GET's range (a pack of some 600 objects
// here). Before, every such pack took two: its index's length, then the
// index.
func TestReclaimReadsAnUnnamedPackOnce(t *testing.T) {
	srv := fakeBucket(t)
	ctx := context.Background()
	a := newDevice(t, srv.URL, "bkt", remote.Options{PackSize: 1})
	a.put(t, contents(8))
	_, err := a.st.Push(ctx, a.db)
	require.NoError(t, err)
	small := srv.Keys("bkt", "store/data/")
	b := newDevice(t, srv.URL, "bkt", remote.Options{})
	b.putTiny(t, 600)
	_, err = b.st.Push(ctx, b.db)
	require.NoError(t, err)
	packs := srv.Keys("bkt", "store/data/")
	require.Len(t, packs, len(small)+1, "b's objects make one pack")
	for _, d := range []*device{a, b} {
		dev, err := remote.Device(ctx, d.db)
		require.NoError(t, err)
		require.NoError(t, d.st.RegisterDevice(ctx, dev))
		_, err = d.st.PublishSegment(ctx, remote.SegmentHeader{Device: dev, At: time.Now(), Base: true}, nil, nil)
		require.NoError(t, err)
	}
	// Every index object removed: no pack is named, each is read.
	for _, k := range srv.Keys("bkt", "store/index/") {
		req, err := http.NewRequest(http.MethodDelete, srv.URL+"/bkt/"+k, nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
	}
	old := time.Now().Add(-30 * 24 * time.Hour)
	for _, k := range packs {
		srv.SetModified("bkt", k, old)
	}
	var gets atomic.Int64
	srv.SetFault(func(r *http.Request) int {
		if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/bkt/store/data/") {
			gets.Add(1)
		}
		return 0
	})
	c := newDevice(t, srv.URL, "bkt", remote.Options{})
	devC, err := remote.Device(ctx, c.db)
	require.NoError(t, err)
	st, err := c.st.Reclaim(ctx, c.db, devC, remote.ReclaimOptions{DryRun: true})
	require.NoError(t, err)
	assert.Equal(t, len(packs), st.Packs, "every pack may go")
	assert.Equal(t, int64(len(small)+2), gets.Load(), "one GET a small pack, two for the pack of 600 objects")
}
