package remote_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
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

// putSegmentBytes puts data as device's segment written at at, under the
// key a build gives it (its hash; .base.seg for a base).
func putSegmentBytes(srv *s3fake.Server, device string, at time.Time, base bool, data []byte) remote.Segment {
	ext := ".seg"
	if base {
		ext = ".base.seg"
	}
	key := fmt.Sprintf("sync/%s/%020d-%s%s", device, at.UnixNano(), cas.Sum(data), ext)
	srv.SetObject("bkt", "store/"+key, data)
	srv.SetModified("bkt", "store/"+key, at)
	return remote.Segment{Key: key, Device: device, At: at.UTC(), Hash: cas.Sum(data), Base: base}
}

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
	return putSegmentBytes(srv, device, at, base, data)
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
			// The object section ends the segment: 33 bytes an object.
			header := len(b) - int(objs.Added())*33
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

// someTombstones returns n tombstones of runs of device, about 300 bytes
// each in JSON, as a sync publishes them.
func someTombstones(device string, n int) []remote.Tombstone {
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	tombs := make([]remote.Tombstone, n)
	for j := range tombs {
		b := []byte{byte(j), byte(j >> 8), byte(j >> 16)}
		tombs[j] = remote.Tombstone{Kind: "run", ID: fmt.Sprintf("run-%06d", j), Parent: "chat-1", Seq: 12,
			Last: cas.Sum(b), Device: device, At: at, Detail: []byte(`{"first":"` + cas.Sum(append(b, 1)).String() + `"}`)}
	}
	return tombs
}

// sectionLength is how long a tombstone section of tombs is: a line of
// JSON each.
func sectionLength(t *testing.T, tombs []remote.Tombstone) int64 {
	var n int64
	for _, tb := range tombs {
		b, err := json.Marshal(tb)
		require.NoError(t, err)
		n += int64(len(b)) + 1
	}
	return n
}

// TestHeaderIsReadAlone: a segment's header is read with one ranged GET
// of 4 KiB whatever its tombstones, which ReadTombstones fetches alone
// with one ranged GET of exactly their section; a header longer than the
// first read takes one more GET of exactly the rest of it. Neither reads
// the segment's archive. Before, 1,000 tombstones made a 286 KB header
// that cost the first 64 KiB and then the whole 1.33 MB segment.
func TestHeaderIsReadAlone(t *testing.T) {
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
	count := func(fn func()) (gets int, bytes int64) {
		gets, bytes = srv.Count("GET"), srv.Bytes("GET")
		fn()
		return srv.Count("GET") - gets, srv.Bytes("GET") - bytes
	}
	for i, n := range []int{10, 1000} {
		tombs := someTombstones(dev, n)
		seg, err := a.st.PublishSegment(ctx, remote.SegmentHeader{Device: dev, At: time.Now().Add(time.Duration(i) * time.Second), Tombstones: tombs}, nil, arch)
		require.NoError(t, err)
		var h remote.SegmentHeader
		gets, got := count(func() {
			h, err = a.st.ReadHeader(ctx, seg)
			require.NoError(t, err)
		})
		assert.Empty(t, h.Tombstones, "left to ReadTombstones")
		assert.EqualValues(t, 1<<20, h.Archive)
		assert.Equal(t, 1, gets)
		assert.EqualValues(t, 4<<10, got, "the first 4 KiB")
		var back []remote.Tombstone
		tgets, tgot := count(func() {
			back, err = a.st.ReadTombstones(ctx, seg, h)
			require.NoError(t, err)
		})
		assert.Equal(t, tombs, back)
		assert.Equal(t, 1, tgets)
		assert.Equal(t, sectionLength(t, tombs), tgot, "exactly the tombstone section")
		t.Logf("%d tombstones: a %d-byte segment, its header read in %d GET of %d bytes, its tombstones in %d GET of %d bytes",
			n, seg.Size, gets, got, tgets, tgot)
	}

	// A header longer than the first read: many index objects named.
	idx := make([]string, 300)
	for i := range idx {
		idx[i] = "index/" + cas.Sum([]byte{byte(i), byte(i >> 8)}).String()
	}
	seg, err := a.st.PublishSegment(ctx, remote.SegmentHeader{Device: dev, At: time.Now().Add(time.Minute), Indexes: &idx}, nil, arch)
	require.NoError(t, err)
	b, ok := srv.Object("bkt", "store/"+seg.Key)
	require.True(t, ok)
	first, _, _ := strings.Cut(string(b), "\n")
	var prefix struct{ Header int64 }
	require.NoError(t, json.Unmarshal([]byte(first), &prefix))
	require.Greater(t, int64(len(first))+1+prefix.Header, int64(4<<10))
	var h remote.SegmentHeader
	gets, got := count(func() {
		h, err = a.st.ReadHeader(ctx, seg)
		require.NoError(t, err)
	})
	assert.Equal(t, idx, *h.Indexes)
	assert.Equal(t, 2, gets)
	assert.Equal(t, int64(len(first))+1+prefix.Header, got, "the first line and the header, exactly")
	t.Logf("a %d-byte header: read in %d GETs of %d bytes", prefix.Header, gets, got)
}

// putV2Segment writes a segment as a build of format version 2 wrote it:
// the tombstones in the header, then the object section of added, then
// the archive.
func putV2Segment(t *testing.T, srv *s3fake.Server, device string, at time.Time, base bool, tombs []remote.Tombstone, added []string, archive string) remote.Segment {
	t.Helper()
	tb, err := json.Marshal(tombs)
	require.NoError(t, err)
	data := fmt.Appendf(nil, `{"format":"wsstore-sync-segment","version":2,"device":%q,"at":%q,"base":%t,"archive":%d,"tombstones":%s,"droppedObjects":0,"addedObjects":%d}`+"\n",
		device, at.UTC().Format(time.RFC3339Nano), base, len(archive), tb, len(added))
	for _, name := range added {
		kind, hs, _ := strings.Cut(name, ":")
		h, err := cas.ParseHash(hs)
		require.NoError(t, err)
		data = append(append(data, kind[0]-'0'), h[:]...)
	}
	data = append(data, archive...)
	return putSegmentBytes(srv, device, at, base, data)
}

// TestVersion2SegmentsAreRead: segments an older build wrote, whose
// tombstones are in the header, still count: FetchSegment reads their
// tombstones and archive, ReadHeader and ReadTombstones their
// tombstones, and a pack that only a version 2 base names stays until a
// newer base does not name it.
func TestVersion2SegmentsAreRead(t *testing.T) {
	srv := fakeBucket(t)
	ctx := context.Background()
	a := newDevice(t, srv.URL, "bkt", remote.Options{})
	a.put(t, contents(20))
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
	dev, err := remote.Device(ctx, a.db)
	require.NoError(t, err)
	require.NoError(t, a.st.RegisterDevice(ctx, dev))
	tombs := someTombstones(dev, 3)
	base := putV2Segment(t, srv, dev, time.Now().Add(-time.Hour), true, tombs, names, "an archive")

	h, arch, err := a.st.FetchSegment(ctx, base)
	require.NoError(t, err)
	defer arch.Close()
	r, err := arch.Reader()
	require.NoError(t, err)
	got, err := io.ReadAll(r)
	require.NoError(t, err)
	assert.Equal(t, "an archive", string(got))
	assert.Equal(t, 2, h.Version)
	assert.Equal(t, tombs, h.Tombstones)
	assert.EqualValues(t, len(names), h.AddedObjects)

	h, err = a.st.ReadHeader(ctx, base)
	require.NoError(t, err)
	back, err := a.st.ReadTombstones(ctx, base, h)
	require.NoError(t, err)
	assert.Equal(t, tombs, back)

	reclaimFromThirdDevice(t, srv.URL)
	assert.Equal(t, packs, srv.Keys("bkt", "store/data/"), "named by a version 2 base: kept")
	_, err = a.st.PublishSegment(ctx, remote.SegmentHeader{Device: dev, At: time.Now(), Base: true}, nil, nil)
	require.NoError(t, err)
	reclaimFromThirdDevice(t, srv.URL)
	assert.Empty(t, srv.Keys("bkt", "store/data/"), "no segment from the newest base on names them")
}

// TestDamagedSegmentParts: a segment whose header, first line or
// tombstone section is damaged is store.corrupt (wrapping
// cas.ErrCorrupt) to a sync's fetch; a damaged header or first line is
// to ReadHeader and to a reclaim, which removes nothing, and a damaged
// tombstone section to ReadTombstones, while its header still reads.
func TestDamagedSegmentParts(t *testing.T) {
	for _, tc := range []struct {
		name      string
		damage    func(b []byte, first, header int) []byte
		headerBad bool
		tombsBad  bool
	}{
		{"Header", func(b []byte, first, header int) []byte { b[first+10] ^= 1; return b }, true, false},
		{"HeaderLength", func(b []byte, first, header int) []byte {
			return []byte(strings.Replace(string(b), fmt.Sprintf(`"header":%d`, header), fmt.Sprintf(`"header":%d`, header+40), 1))
		}, true, false},
		{"NoHeaderLength", func(b []byte, first, header int) []byte {
			return []byte(strings.Replace(string(b), fmt.Sprintf(`"header":%d`, header), `"header":-5`, 1))
		}, true, false},
		{"TombstoneSection", func(b []byte, first, header int) []byte { b[first+header+20] ^= 1; return b }, false, true},
		{"TombstoneSectionCut", func(b []byte, first, header int) []byte { return b[:first+header+100] }, false, true},
		{"TombstoneCountZero", func(b []byte, first, header int) []byte {
			return reheader(b, first, header, func(h string) string { return regexp.MustCompile(`"count":\d+`).ReplaceAllString(h, `"count":0`) }, "")
		}, false, true},
		{"PrefixHashUnreadable", func(b []byte, first, header int) []byte {
			return reheader(b, first, header, func(h string) string { return h }, "not-a-hash")
		}, true, false},
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
			seg, err := a.st.PublishSegment(ctx, remote.SegmentHeader{Device: dev, At: time.Now(), Base: true, Tombstones: someTombstones(dev, 50)}, objs, nil)
			require.NoError(t, err)
			b, ok := srv.Object("bkt", "store/"+seg.Key)
			require.True(t, ok)
			line, _, _ := strings.Cut(string(b), "\n")
			var prefix struct{ Header int }
			require.NoError(t, json.Unmarshal([]byte(line), &prefix))
			srv.SetObject("bkt", "store/"+seg.Key, tc.damage(append([]byte(nil), b...), len(line)+1, prefix.Header))
			before := srv.Keys("bkt", "store/")

			_, _, err = a.st.FetchSegment(ctx, seg)
			assert.True(t, wserr.Is(err, wserr.Corrupt), "fetch: %v", err)
			assert.ErrorIs(t, err, cas.ErrCorrupt)
			h, err := a.st.ReadHeader(ctx, seg)
			if tc.headerBad {
				assert.True(t, wserr.Is(err, wserr.Corrupt), "header: %v", err)
				assert.ErrorIs(t, err, cas.ErrCorrupt)
				assert.NotContains(t, err.Error(), "this build reads", "a damaged segment is not one of an unknown version")
			} else {
				require.NoError(t, err)
				_, err = a.st.ReadTombstones(ctx, seg, h)
				assert.True(t, wserr.Is(err, wserr.Corrupt), "tombstones: %v", err)
			}
			c := newDevice(t, srv.URL, "bkt", remote.Options{})
			devC, err := remote.Device(ctx, c.db)
			require.NoError(t, err)
			_, err = c.st.Reclaim(ctx, c.db, devC, remote.ReclaimOptions{Grace: -1})
			if tc.headerBad {
				assert.True(t, wserr.Is(err, wserr.Corrupt), "reclaim: %v", err)
			}
			assert.Equal(t, before, srv.Keys("bkt", "store/"), "nothing removed")
		})
	}
}

// reheader returns segment b (its first line first bytes long, its header
// header bytes) with its header edited and its first line naming the
// edited header's length and hash, or headerHash instead when not "".
func reheader(b []byte, first, header int, edit func(string) string, headerHash string) []byte {
	hb := edit(string(b[first : first+header]))
	if headerHash == "" {
		headerHash = cas.Sum([]byte(hb)).String()
	}
	prefix := fmt.Sprintf(`{"format":%q,"version":3,"header":%d,"headerHash":%q}`, remote.SegmentFormat, len(hb), headerHash)
	return []byte(prefix + "\n" + hb + string(b[first+header:]))
}
