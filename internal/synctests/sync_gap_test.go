package synctests_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/remote"
	"github.com/wsstore/wsstore/remote/s3fake"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// threeDevicesPastASegment makes three devices C, D and E on one fake
// tier, all synced with C's first runs, then C publishes s1 and one
// segment after it, which D and E have not read.
func threeDevicesPastASegment(t *testing.T) (srv *s3fake.Server, c, d, e *wsstore.Store, s1 string) {
	t.Helper()
	srv, open := fakeTier(t)
	c, d, e = open(), open(), open()
	smallRuns(t, c, "chat-c", "c0", 3)
	syncOK(t, c)
	syncOK(t, d)
	syncOK(t, e)
	smallRuns(t, c, "chat-c", "c4", 1)
	s1 = syncOK(t, c).Published
	smallRuns(t, c, "chat-c", "c5", 1)
	syncOK(t, c)
	return srv, c, d, e, s1
}

// TestSyncSegmentGap: a segment gone from the bucket is never skipped in
// silence. Deleted before its device's next sync, that sync finds its
// last segment gone and publishes a base, which stands for it; deleted
// after, a reader refuses the segments past the gap with store.corrupt
// naming the device and the missing segment, until the device publishes
// a base.
func TestSyncSegmentGap(t *testing.T) {
	ctx := context.Background()
	t.Run("DeletedBeforeTheNextSync", func(t *testing.T) {
		srv, open := fakeTier(t)
		c, d := open(), open()
		smallRuns(t, c, "chat-c", "t0", 10)
		syncOK(t, c)
		syncOK(t, d)
		smallRuns(t, c, "chat-c", "t4", 1)
		s1 := syncOK(t, c).Published
		require.NotEmpty(t, s1)
		srv.SetObject("wsstore", "team/"+s1, nil)
		smallRuns(t, c, "chat-c", "t5", 1)
		rep := syncOK(t, c)
		assert.True(t, rep.Base, "C's last segment is gone: its next one is a base")
		assert.Equal(t, []string{s1}, rep.Repaired.Gone)
		syncOK(t, d)
		assert.Equal(t, runIDs(t, c), runIDs(t, d), "D has t4 too")
	})
	t.Run("DeletedAfter", func(t *testing.T) {
		srv, open := fakeTier(t)
		c, d := open(), open()
		smallRuns(t, c, "chat-c", "t0", 10)
		syncOK(t, c)
		syncOK(t, d)
		smallRuns(t, c, "chat-c", "t4", 1)
		s1 := syncOK(t, c).Published
		smallRuns(t, c, "chat-c", "t5", 1)
		s2 := syncOK(t, c).Published
		require.False(t, strings.HasSuffix(s2, ".base.seg"))
		srv.SetObject("wsstore", "team/"+s1, nil)

		rep, err := d.Sync(ctx)
		require.Error(t, err, "D must not skip S1")
		assert.Equal(t, wserr.Corrupt, wserr.CodeOf(err))
		assert.ErrorIs(t, err, remote.ErrMissing)
		assert.Contains(t, err.Error(), s1)
		assert.Contains(t, err.Error(), "device "+strings.Split(s1, "/")[1])
		assert.NotContains(t, rep.TookIn, s2, "nothing past the gap is taken in")
		assert.NotContains(t, runIDs(t, d), "t5-00")

		// The documented recovery: a base of that device.
		_, err = c.SyncWith(ctx, wsstore.SyncOptions{Base: true})
		require.NoError(t, err)
		syncOK(t, d)
		assert.Equal(t, runIDs(t, c), runIDs(t, d))
	})
	t.Run("OtherDevicesGoOn", func(t *testing.T) {
		// C's gap holds back C's segments after it, not D's and E's, and
		// each sync still publishes its own store's changes.
		srv, _, d, e, s1 := threeDevicesPastASegment(t)
		srv.SetObject("wsstore", "team/"+s1, nil) // and C is never seen again
		smallRuns(t, d, "chat-d", "dd", 1)
		rep, err := d.Sync(ctx)
		require.Equal(t, wserr.Corrupt, wserr.CodeOf(err), "%v", err)
		assert.NotEmpty(t, rep.Published, "D published its own")
		assert.Equal(t, []string{strings.Split(s1, "/")[1]}, rep.Held)
		smallRuns(t, e, "chat-e", "ee", 1)
		_, err = e.Sync(ctx)
		require.Equal(t, wserr.Corrupt, wserr.CodeOf(err), "%v", err)
		_, err = d.Sync(ctx)
		require.Equal(t, wserr.Corrupt, wserr.CodeOf(err), "%v", err)
		assert.Contains(t, runIDs(t, d), "ee-00", "D has E's run")
		assert.Contains(t, runIDs(t, e), "dd-00", "E has D's run")
		assert.NotContains(t, runIDs(t, d), "c5-00", "nothing of C past its gap")
	})
	t.Run("BaseDeletedForANewReader", func(t *testing.T) {
		srv, open := fakeTier(t)
		c := open()
		smallRuns(t, c, "chat-c", "t0", 10)
		b := syncOK(t, c).Published
		smallRuns(t, c, "chat-c", "t4", 1)
		syncOK(t, c)
		srv.SetObject("wsstore", "team/"+b, nil)
		_, err := open().Sync(ctx)
		require.Error(t, err, "a new device must not start from a delta")
		assert.Equal(t, wserr.Corrupt, wserr.CodeOf(err))
		assert.Contains(t, err.Error(), b)
	})
}

// TestSyncBucketEmptied: a device whose objects were all deleted from the
// bucket (an emptied prefix, a server that lost them) registers again and
// publishes a base at its next sync, and pushes again what it holds of the
// packs that are gone, so another device reads every run and file.
func TestSyncBucketEmptied(t *testing.T) {
	ctx := context.Background()
	srv, open := fakeTier(t)
	x := open()
	smallRuns(t, x, "chat-x", "old", 2)
	syncOK(t, x)
	for _, k := range srv.Keys("wsstore", "team/") {
		srv.SetObject("wsstore", k, nil)
	}
	smallRuns(t, x, "chat-x", "new", 1)
	rep := syncOK(t, x)
	assert.True(t, rep.Base, "X's segments are gone: it publishes a base")

	y := open()
	ry := syncOK(t, y)
	assert.Len(t, runsOf(ry, ry.Added), 3)
	assert.Equal(t, runIDs(t, x), runIDs(t, y))
	_, err := y.Remote.Evict(ctx, y.DB)
	require.NoError(t, err)
	got, err := y.Runs.Workspace("old-00", runs.ModelScope).Read(ctx, vfs.MustPath("output/0.md"), vfs.ReadOptions{})
	require.NoError(t, err, "the packs pushed before the bucket was emptied are there again")
	assert.Equal(t, strings.Repeat("old-00 line\n", 20), string(got.Content))
	requireSame(t, contents(t, x), contents(t, y))
}

// TestPullSegmentGap: a pull checks each device's chain of segments as a
// sync does. A segment gone from the bucket fails the pull with
// store.corrupt wrapping remote.ErrMissing, naming the device and the
// segment, and the pull reads nothing of that device past the gap (every
// later pull says so again) until the device publishes a base.
func TestPullSegmentGap(t *testing.T) {
	ctx := context.Background()
	srv, open := fakeTier(t)
	c, d := open(), open()
	smallRuns(t, c, "chat-c", "t0", 10)
	syncOK(t, c)
	_, err := d.PullRemote(ctx)
	require.NoError(t, err)
	smallRuns(t, c, "chat-c", "t4", 1)
	s1 := syncOK(t, c).Published
	smallRuns(t, c, "chat-c", "t5", 1)
	s2 := syncOK(t, c).Published
	require.False(t, strings.HasSuffix(s2, ".base.seg"))
	srv.SetObject("wsstore", "team/"+s1, nil)

	for range 2 {
		_, err = d.PullRemote(ctx)
		require.Error(t, err, "D must not skip S1")
		assert.Equal(t, wserr.Corrupt, wserr.CodeOf(err))
		assert.ErrorIs(t, err, remote.ErrMissing)
		assert.Contains(t, err.Error(), s1)
		assert.Contains(t, err.Error(), "device "+strings.Split(s1, "/")[1])
	}

	_, err = c.SyncWith(ctx, wsstore.SyncOptions{Base: true})
	require.NoError(t, err)
	_, err = d.PullRemote(ctx)
	require.NoError(t, err)
	syncOK(t, d)
	assert.Equal(t, runIDs(t, c), runIDs(t, d))
	requireSame(t, contents(t, c), contents(t, d))
}

// TestSyncSegmentDamaged: a segment whose bytes do not hash to its key
// holds back its device as a gap does: the sync takes in the other
// devices' segments and publishes its own, then fails with store.corrupt
// naming the segment, and reads nothing of that device past it until the
// device publishes a base.
func TestSyncSegmentDamaged(t *testing.T) {
	ctx := context.Background()
	srv, c, d, e, s1 := threeDevicesPastASegment(t)
	b, ok := srv.Object("wsstore", "team/"+s1)
	require.True(t, ok)
	srv.SetObject("wsstore", "team/"+s1, b[:len(b)/2])

	smallRuns(t, d, "chat-d", "dd", 1)
	rep, err := d.Sync(ctx)
	require.Equal(t, wserr.Corrupt, wserr.CodeOf(err), "%v", err)
	assert.Contains(t, err.Error(), s1)
	assert.NotEmpty(t, rep.Published, "D published its own")
	assert.Equal(t, []string{strings.Split(s1, "/")[1]}, rep.Held)
	assert.NotContains(t, runIDs(t, d), "c5-00", "nothing of C past the damage")
	_, err = e.Sync(ctx)
	require.Equal(t, wserr.Corrupt, wserr.CodeOf(err), "%v", err)
	assert.Contains(t, runIDs(t, e), "dd-00", "E has D's run")

	healedByBase(t, c, d, e)
	assert.Contains(t, runIDs(t, c), "dd-00")
}

// healedByBase has c, whose segment d and e could not read, publish a
// base, which stands for it: then every device syncs cleanly, and all
// three hold the same runs.
func healedByBase(t *testing.T, c, d, e *wsstore.Store) {
	t.Helper()
	_, err := c.SyncWith(context.Background(), wsstore.SyncOptions{Base: true})
	require.NoError(t, err)
	syncOK(t, d)
	syncOK(t, e)
	syncOK(t, c)
	assert.Equal(t, runIDs(t, c), runIDs(t, d))
	assert.Equal(t, runIDs(t, c), runIDs(t, e))
}

// TestPullSegmentDamaged: a segment whose header does not read holds back
// its device in a pull as a gap does; the other devices' index objects
// are taken in.
func TestPullSegmentDamaged(t *testing.T) {
	ctx := context.Background()
	srv, open := fakeTier(t)
	c, d, e := open(), open(), open()
	smallRuns(t, c, "chat-c", "c0", 3)
	syncOK(t, c)
	smallRuns(t, e, "chat-e", "e0", 10)
	syncOK(t, e)
	_, err := d.PullRemote(ctx)
	require.NoError(t, err)
	smallRuns(t, c, "chat-c", "c4", 1)
	s1 := syncOK(t, c).Published
	srv.SetObject("wsstore", "team/"+s1, []byte("not a segment\n"))
	smallRuns(t, e, "chat-e", "ee", 1)
	rep, err := e.Sync(ctx)
	require.Equal(t, wserr.Corrupt, wserr.CodeOf(err), "%v", err)
	require.NotEmpty(t, rep.Published)
	require.False(t, rep.Base, "D reads E's segment's header")

	st, err := d.PullRemote(ctx)
	require.Equal(t, wserr.Corrupt, wserr.CodeOf(err), "%v", err)
	assert.Contains(t, err.Error(), s1)
	assert.Positive(t, st.Objects, "E's new objects are taken in")
}

// TestSyncSegmentPartDamaged: a segment whose header or tombstone section
// is damaged holds back its device alone, in a sync as in a pull, as a
// segment cut short does; the other devices' segments are taken in, and
// a base of the damaged segment's device ends it. A pull does not read
// tombstones, so a damaged tombstone section holds back nothing there.
func TestSyncSegmentPartDamaged(t *testing.T) {
	for _, tc := range []struct {
		name   string
		at     func(first, header int) int
		pulled bool
	}{
		{"Header", func(first, header int) int { return first + 30 }, false},
		{"TombstoneSection", func(first, header int) int { return first + header + 30 }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			srv, open := fakeTier(t)
			c, d, e := open(), open(), open()
			smallRuns(t, c, "chat-c", "c0", 3)
			syncOK(t, c)
			smallRuns(t, e, "chat-e", "e0", 10)
			syncOK(t, e)
			syncOK(t, d)
			_, err := d.PullRemote(ctx) // D reads the headers of segments after these
			require.NoError(t, err)
			_, err = c.Runs.CancelAndDeleteRun(ctx, "c0-01")
			require.NoError(t, err)
			smallRuns(t, c, "chat-c", "c4", 1)
			s1 := syncOK(t, c)
			require.Equal(t, []string{"run c0-01"}, s1.Tombstones)
			b, ok := srv.Object("wsstore", "team/"+s1.Published)
			require.True(t, ok)
			line, _, _ := strings.Cut(string(b), "\n")
			var prefix struct{ Header int }
			require.NoError(t, json.Unmarshal([]byte(line), &prefix))
			b = append([]byte(nil), b...)
			b[tc.at(len(line)+1, prefix.Header)] ^= 1
			srv.SetObject("wsstore", "team/"+s1.Published, b)
			smallRuns(t, e, "chat-e", "ee", 1)
			rep, err := e.Sync(ctx)
			require.Equal(t, wserr.Corrupt, wserr.CodeOf(err), "%v", err)
			require.NotEmpty(t, rep.Published, "E published its own")
			require.False(t, rep.Base, "D reads E's segment's header")

			st, err := d.PullRemote(ctx)
			if tc.pulled {
				require.NoError(t, err)
			} else {
				require.Equal(t, wserr.Corrupt, wserr.CodeOf(err), "%v", err)
				assert.Contains(t, err.Error(), s1.Published)
			}
			assert.Positive(t, st.Objects, "E's new objects are taken in")
			smallRuns(t, d, "chat-d", "dd", 1)
			rep, err = d.Sync(ctx)
			require.Equal(t, wserr.Corrupt, wserr.CodeOf(err), "%v", err)
			assert.Contains(t, err.Error(), s1.Published)
			assert.NotEmpty(t, rep.Published, "D published its own")
			assert.Equal(t, []string{s1.Device}, rep.Held)
			assert.Contains(t, runIDs(t, d), "ee-00", "E's run is taken in")
			assert.Contains(t, runIDs(t, d), "c0-01", "nothing of C past the damage")
			assert.NotContains(t, runIDs(t, d), "c4-00")

			healedByBase(t, c, d, e)
			assert.NotContains(t, runIDs(t, d), "c0-01", "the deletion reaches D with the base")
		})
	}
}
