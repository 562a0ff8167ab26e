package remote_test

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/remote"
	"github.com/wsstore/wsstore/remote/s3fake"
	"github.com/wsstore/wsstore/wserr"
)

// putV1Segment writes a segment as a build of format version 1 wrote it:
// the object changes listed in the header, the archive after it.
func putV1Segment(t *testing.T, srv *s3fake.Server, device string, at time.Time, base bool, added, dropped []string, archive string) remote.Segment {
	t.Helper()
	quote := func(names []string) string {
		if len(names) == 0 {
			return "[]"
		}
		return `["` + strings.Join(names, `","`) + `"]`
	}
	data := fmt.Appendf(nil, `{"format":"wsstore-sync-segment","version":1,"device":%q,"at":%q,"base":%t,"archive":%d,"tombstones":[],"added":%s,"dropped":%s}`+"\n%s",
		device, at.UTC().Format(time.RFC3339Nano), base, len(archive), quote(added), quote(dropped), archive)
	ext := ".seg"
	if base {
		ext = ".base.seg"
	}
	key := fmt.Sprintf("sync/%s/%020d-%s%s", device, at.UnixNano(), cas.Sum(data), ext)
	srv.SetObject("bkt", "store/"+key, data)
	srv.SetModified("bkt", "store/"+key, at)
	return remote.Segment{Key: key, Device: device, At: at.UTC(), Hash: cas.Sum(data), Base: base}
}

// TestVersion1SegmentsAreRead: segments an older build wrote, which list
// their object changes in the header, still count. A pack that only a
// version 1 base names stays, also once a version 1 delta drops its
// objects (a reader of that base needs them); a newer base that does not
// name them lets it go. FetchSegment reads such a segment's archive.
func TestVersion1SegmentsAreRead(t *testing.T) {
	srv := fakeBucket(t)
	ctx := context.Background()
	a := newDevice(t, srv.URL, "bkt", remote.Options{})
	hs := a.put(t, contents(20))
	_, err := a.st.Push(ctx, a.db)
	require.NoError(t, err)
	old := time.Now().Add(-30 * 24 * time.Hour)
	for _, k := range append(srv.Keys("bkt", "store/data/"), srv.Keys("bkt", "store/index/")...) {
		srv.SetModified("bkt", k, old)
	}
	packs := srv.Keys("bkt", "store/data/")
	require.NotEmpty(t, packs)
	objs, err := a.st.ObjectDelta(ctx, a.db, true)
	require.NoError(t, err)
	defer objs.Close()
	var names []string
	require.NoError(t, objs.Each(func(_ bool, kind cas.Kind, h cas.Hash) error {
		names = append(names, fmt.Sprintf("%d:%s", kind, h))
		return nil
	}))
	require.GreaterOrEqual(t, len(names), len(hs))
	// A, as an older build, publishes its object set in version 1
	// segments.
	dev, err := remote.Device(ctx, a.db)
	require.NoError(t, err)
	require.NoError(t, a.st.RegisterDevice(ctx, dev))
	base := putV1Segment(t, srv, dev, time.Now().Add(-time.Hour), true, names, nil, "an archive")

	h, arch, err := a.st.FetchSegment(ctx, base)
	require.NoError(t, err)
	defer arch.Close()
	r, err := arch.Reader()
	require.NoError(t, err)
	got, err := io.ReadAll(r)
	require.NoError(t, err)
	assert.Equal(t, "an archive", string(got))
	assert.Equal(t, 1, h.Version)
	assert.Zero(t, h.AddedObjects, "a version 1 segment has no object section")

	reclaimFromThirdDevice(t, srv.URL)
	assert.Equal(t, packs, srv.Keys("bkt", "store/data/"), "named by a version 1 base: kept")

	putV1Segment(t, srv, dev, time.Now().Add(-time.Minute), false, nil, names, "")
	reclaimFromThirdDevice(t, srv.URL)
	assert.Equal(t, packs, srv.Keys("bkt", "store/data/"), "dropped by a version 1 delta, but named by the base a reader still reads")

	// A base that does not name them stands for both: the pack goes.
	_, err = a.st.PublishSegment(ctx, remote.SegmentHeader{Device: dev, At: time.Now(), Base: true}, nil, nil)
	require.NoError(t, err)
	reclaimFromThirdDevice(t, srv.URL)
	assert.Empty(t, srv.Keys("bkt", "store/data/"), "no segment from the newest base on names them")
}

// TestSegmentObjectSectionChecked: a segment whose object section is cut
// short, or whose records name an unknown kind, is store.corrupt to the
// reclaim that reads it, and its bytes fail FetchSegment's hash check;
// nothing is removed.
func TestSegmentObjectSectionChecked(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(b []byte, header int) []byte
	}{
		{"cut short", func(b []byte, header int) []byte { return b[:len(b)-5] }},
		{"unknown kind", func(b []byte, header int) []byte { b[header] = 7; return b }},
		{"counts past any length", func(b []byte, header int) []byte {
			return []byte(strings.Replace(string(b), `"addedObjects":`, `"addedObjects":279496122328932600`, 1))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := fakeBucket(t)
			ctx := context.Background()
			a := newDevice(t, srv.URL, "bkt", remote.Options{})
			a.put(t, contents(5))
			_, err := a.st.Push(ctx, a.db)
			require.NoError(t, err)
			dev, err := remote.Device(ctx, a.db)
			require.NoError(t, err)
			require.NoError(t, a.st.RegisterDevice(ctx, dev))
			objs, err := a.st.ObjectDelta(ctx, a.db, true)
			require.NoError(t, err)
			defer objs.Close()
			require.Positive(t, objs.Added())
			seg, err := a.st.PublishSegment(ctx, remote.SegmentHeader{Device: dev, At: time.Now(), Base: true}, objs, nil)
			require.NoError(t, err)
			b, ok := srv.Object("bkt", "store/"+seg.Key)
			require.True(t, ok)
			require.Len(t, b, int(seg.Size))
			header := strings.IndexByte(string(b), '\n') + 1
			require.Equal(t, int(objs.Added())*33, len(b)-header, "33 bytes an object after the header")
			srv.SetObject("bkt", "store/"+seg.Key, tc.damage(append([]byte(nil), b...), header))
			before := srv.Keys("bkt", "store/")

			_, _, err = a.st.FetchSegment(ctx, seg)
			assert.True(t, wserr.Is(err, wserr.Corrupt), "fetch: %v", err)
			c := newDevice(t, srv.URL, "bkt", remote.Options{})
			devC, err := remote.Device(ctx, c.db)
			require.NoError(t, err)
			_, err = c.st.Reclaim(ctx, c.db, devC, remote.ReclaimOptions{Grace: -1})
			assert.True(t, wserr.Is(err, wserr.Corrupt), "reclaim: %v", err)
			assert.Equal(t, before, srv.Keys("bkt", "store/"), "nothing removed")
		})
	}
}

// TestObjectDeltaCostsWhatChanged: after a base listed every object, the
// next segment's object changes are read from an index of the unlisted
// objects alone and recorded by key, so they cost what changed since,
// not every object the store records; a list of more than a page of
// objects holds them all.
func TestObjectDeltaCostsWhatChanged(t *testing.T) {
	srv := fakeBucket(t)
	ctx := context.Background()
	var rec storetest.Statements
	db, err := index.Open(ctx, filepath.Join(t.TempDir(), "wsstore.db"), index.Options{Trace: rec.Trace})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	st := openStorage(t, srv.URL, "bkt", "store", remote.Options{})
	blobs, err := cas.New(db, cas.Options{Storage: st})
	require.NoError(t, err)
	a := &device{db: db, st: st, blobs: blobs}
	files := make([][]byte, 1500) // more than a page of the list's reads
	for i := range files {
		files[i] = fmt.Appendf(nil, "file %d", i)
	}
	a.put(t, files)
	dev, err := remote.Device(ctx, db)
	require.NoError(t, err)
	publish := func(base bool) *remote.ObjectList {
		t.Helper()
		objs, err := st.ObjectDelta(ctx, db, base)
		require.NoError(t, err)
		t.Cleanup(func() { objs.Close() })
		seg, err := st.PublishSegment(ctx, remote.SegmentHeader{Device: dev, At: time.Now(), Base: base}, objs, nil)
		require.NoError(t, err)
		require.NoError(t, st.RecordPublished(ctx, db, remote.Published{Segment: seg, Objects: objs}))
		return objs
	}
	assert.EqualValues(t, 1500, publish(true).Added())

	a.put(t, [][]byte{[]byte("one more")})
	var objs *remote.ObjectList
	stmts := rec.Record(func() { objs = publish(false) })
	assert.EqualValues(t, 1, objs.Added())
	assert.Zero(t, objs.Dropped())
	assert.NotZero(t, requireObjectsBy(t, db, stmts, "remote_objects_unlisted"))
	again, err := st.ObjectDelta(ctx, db, false)
	require.NoError(t, err)
	defer again.Close()
	assert.True(t, again.Empty(), "what was published is listed")
}

// TestFollowsOn: a delta naming a previous segment the reader has not
// read is refused; a base, a segment naming none (an older build's) and
// one naming a segment before the one read last (its device's sync was
// cut off after an upload) are not.
func TestFollowsOn(t *testing.T) {
	key := func(n int, ext string) string {
		return fmt.Sprintf("sync/dev/%020d-%s%s", n, cas.Sum([]byte{byte(n)}), ext)
	}
	seg := func(n int, base bool) remote.Segment {
		ext := ".seg"
		if base {
			ext = ".base.seg"
		}
		return remote.Segment{Key: key(n, ext), Device: "dev", Base: base}
	}
	for _, c := range []struct {
		name  string
		seg   remote.Segment
		prev  string
		after string
		gap   bool
	}{
		{"OK", seg(3, false), key(2, ".seg"), key(2, ".seg"), false},
		{"OKBeforeTheOneRead", seg(3, false), key(1, ".seg"), key(2, ".seg"), false},
		{"OKOlderBuild", seg(3, false), "", key(1, ".seg"), false},
		{"OKBase", seg(3, true), key(2, ".seg"), "", false},
		{"ErrGap", seg(3, false), key(2, ".seg"), key(1, ".seg"), true},
		{"ErrBaseMissing", seg(3, false), key(2, ".base.seg"), "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := remote.FollowsOn(c.seg, remote.SegmentHeader{Device: "dev", Prev: c.prev}, c.after)
			if !c.gap {
				assert.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, remote.ErrMissing)
			assert.Equal(t, wserr.Corrupt, wserr.CodeOf(err))
			assert.Contains(t, err.Error(), c.prev)
		})
	}
}

// TestLongHeaderIsRead: a header longer than the first read of a segment
// (64 KiB: some 300 tombstones) is read from the whole segment, checked
// against its key's hash first, and comes back whole; a short one takes
// one ranged read. The figures say what each costs in requests and bytes.
func TestLongHeaderIsRead(t *testing.T) {
	srv := fakeBucket(t)
	ctx := context.Background()
	a := newDevice(t, srv.URL, "bkt", remote.Options{})
	dev, err := remote.Device(ctx, a.db)
	require.NoError(t, err)
	arch, err := remote.NewSpool()
	require.NoError(t, err)
	defer arch.Close()
	_, err = arch.Write(make([]byte, 1<<20))
	require.NoError(t, err)
	for i, n := range []int{10, 1000} {
		tombs := make([]remote.Tombstone, n)
		for j := range tombs {
			tombs[j] = remote.Tombstone{Kind: "run", ID: fmt.Sprintf("run-%06d", j), Parent: "chat-1", Seq: 12,
				Last: cas.Sum([]byte{byte(j)}), Device: dev, At: time.Now().UTC(), Detail: []byte(`{"first":"` + cas.Sum([]byte{byte(j), 1}).String() + `"}`)}
		}
		seg, err := a.st.PublishSegment(ctx, remote.SegmentHeader{Device: dev, At: time.Now().Add(time.Duration(i) * time.Second), Tombstones: tombs}, nil, arch)
		require.NoError(t, err)
		gets, got := srv.Count("GET"), srv.Bytes("GET")
		h, err := a.st.ReadHeader(ctx, seg)
		require.NoError(t, err)
		assert.Len(t, h.Tombstones, n)
		gets, got = srv.Count("GET")-gets, srv.Bytes("GET")-got
		t.Logf("%d tombstones: a %d-byte segment, its header read in %d GETs of %d bytes", n, seg.Size, gets, got)
		if n == 10 {
			assert.Equal(t, 1, gets)
		} else {
			assert.Equal(t, 2, gets)
			assert.EqualValues(t, 64<<10+seg.Size, got, "the first 64 KiB, then the whole segment")
		}
	}
}
