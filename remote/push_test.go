package remote_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
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

// device is one store's database and content store over a remote tier.
type device struct {
	db    *index.DB
	st    *remote.Storage
	blobs *cas.Store
}

func newDevice(t *testing.T, endpoint, bucket string, opts remote.Options) *device {
	t.Helper()
	db := openDB(t)
	st := openStorage(t, endpoint, bucket, "store", opts)
	blobs, err := cas.New(db, cas.Options{Storage: st, InlineMax: 4 << 10})
	require.NoError(t, err)
	return &device{db: db, st: st, blobs: blobs}
}

// contents makes n files: small text ones and, every tenth, one large
// enough to be chunked.
func contents(n int) [][]byte {
	r := rand.New(rand.NewPCG(1, 2))
	var out [][]byte
	for i := range n {
		size := 200 + r.IntN(2000)
		if i%10 == 9 {
			size = 20 << 10
		}
		b := make([]byte, size)
		for j := range b {
			b[j] = byte('a' + r.IntN(8))
		}
		out = append(out, b)
	}
	return out
}

func (d *device) put(t *testing.T, files [][]byte) []cas.Hash {
	t.Helper()
	var hs []cas.Hash
	for _, f := range files {
		h, err := d.blobs.Put(context.Background(), bytes.NewReader(f))
		require.NoError(t, err)
		hs = append(hs, h)
	}
	return hs
}

// putTiny writes n distinct objects of a few bytes in one transaction and
// returns their hashes and contents.
func (d *device) putTiny(t *testing.T, n int) ([]cas.Hash, [][]byte) {
	t.Helper()
	ctx := context.Background()
	hs, files := make([]cas.Hash, n), make([][]byte, n)
	require.NoError(t, d.db.Update(ctx, func(tx *index.Tx) error {
		for i := range n {
			files[i] = fmt.Appendf(nil, "tiny object %d", i)
			h, err := d.blobs.PutBytes(ctx, tx, files[i])
			if err != nil {
				return err
			}
			hs[i] = h
		}
		return nil
	}))
	return hs, files
}

func (d *device) requireAll(t *testing.T, hs []cas.Hash, files [][]byte) {
	t.Helper()
	for i, h := range hs {
		got, err := d.blobs.ReadAll(context.Background(), h)
		require.NoError(t, err, "file %d", i)
		require.Equal(t, files[i], got, "file %d", i)
	}
}

func TestPushPull(t *testing.T) {
	srv := fakeBucket(t)
	ctx := context.Background()
	a := newDevice(t, srv.URL, "bkt", remote.Options{PackSize: 16 << 10})
	files := contents(60)
	hs := a.put(t, files)
	n, err := a.st.Pending(ctx, a.db)
	require.NoError(t, err)
	assert.Greater(t, n, 60, "blobs and chunks wait in the cache")
	assert.Zero(t, srv.Count("PUT"), "a put does not touch the network")

	st, err := a.st.Push(ctx, a.db)
	require.NoError(t, err)
	assert.Greater(t, st.Packs, 3, "small objects are gathered into packs of about PackSize")
	assert.Less(t, st.Packs, n/3)
	assert.Equal(t, 6, st.Chunked)
	assert.Zero(t, st.Pending)
	assert.Equal(t, 2*st.Packs+1+1, srv.Count("PUT"), "a pack and its index each, one index of chunk lists, and the push's lock")
	left, err := a.st.Pending(ctx, a.db)
	require.NoError(t, err)
	assert.Zero(t, left)
	for _, k := range srv.Keys("bkt", "store/") {
		assert.True(t, strings.HasPrefix(k, "store/data/") || strings.HasPrefix(k, "store/index/"), k)
	}

	// A push with nothing pending sends no request.
	puts, gets := srv.Count("PUT"), srv.Count("GET")
	lists, _ := srv.Lists("")
	st, err = a.st.Push(ctx, a.db)
	require.NoError(t, err)
	assert.Zero(t, st.Packs+st.Chunked)
	listsAfter, _ := srv.Lists("")
	assert.Equal(t, [3]int{puts, gets, lists}, [3]int{srv.Count("PUT"), srv.Count("GET"), listsAfter})

	// Reads after eviction come from the packs, range by range.
	evicted, err := a.st.Evict(ctx, a.db)
	require.NoError(t, err)
	assert.Equal(t, int64(n-6), evicted, "every object but the chunk lists had bytes cached")
	gets = srv.Count("GET")
	a.requireAll(t, hs, files)
	assert.Greater(t, srv.Count("GET"), gets)

	// A second device with nothing pulls the indexes and reads every file.
	b := newDevice(t, srv.URL, "bkt", remote.Options{})
	ps, err := b.st.Pull(ctx, b.db)
	require.NoError(t, err)
	assert.Equal(t, n0(t, a), ps.Objects)
	b.requireAll(t, hs, files)
	ps, err = b.st.Pull(ctx, b.db)
	require.NoError(t, err)
	assert.Zero(t, ps.Indexes, "an index is read once")
}

// n0 counts the objects a device records.
func n0(t *testing.T, d *device) int {
	var n int
	for _, k := range []cas.Kind{cas.KindBlob, cas.KindChunk} {
		require.NoError(t, d.db.View(context.Background(), func(tx *index.Tx) error {
			return d.st.Iterate(context.Background(), tx, k, func(cas.Object) error { n++; return nil })
		}))
	}
	return n
}

// TestPushResumes cuts the connection mid-upload after some packs landed:
// Push fails with ErrUnavailable (store.busy), every file stays readable
// from the cache, and the next Push uploads only what did not land.
func TestPushResumes(t *testing.T) {
	srv := fakeBucket(t)
	ctx := context.Background()
	a := newDevice(t, srv.URL, "bkt", remote.Options{PackSize: 8 << 10})
	files := contents(80)
	hs := a.put(t, files)

	var puts atomic.Int64
	srv.SetFault(func(r *http.Request) int {
		if r.Method == http.MethodPut && puts.Add(1) > 10 { // the lock, four packs, one more pack
			return s3fake.Drop
		}
		return 0
	})
	st, err := a.st.Push(ctx, a.db)
	require.Error(t, err)
	assert.ErrorIs(t, err, remote.ErrUnavailable)
	assert.True(t, wserr.Is(err, wserr.Busy), "coded store.busy: %v", err)
	assert.Greater(t, st.Pending, 0)
	landed := srv.Count("PUT")
	assert.Equal(t, 10, landed)
	a.requireAll(t, hs, files)

	srv.SetFault(nil)
	st2, err := a.st.Push(ctx, a.db)
	require.NoError(t, err)
	written, existed := a.st.Uploads()
	total := srv.Count("PUT")
	assert.Equal(t, int64(total), written, "every PUT the server took was one this device wrote")
	assert.Equal(t, int64(1), existed, "the pack whose index was cut off is offered again, and found there")
	assert.Equal(t, 2*(st.Packs+st2.Packs)+1+2, total, "nothing that landed is uploaded twice (and a lock for each push)")
	n, err := a.st.Pending(ctx, a.db)
	require.NoError(t, err)
	assert.Zero(t, n)

	b := newDevice(t, srv.URL, "bkt", remote.Options{})
	_, err = b.st.Pull(ctx, b.db)
	require.NoError(t, err)
	b.requireAll(t, hs, files)
}

// TestRetries: a server error on the first attempts of each request is
// retried with backoff, and the push succeeds.
func TestRetries(t *testing.T) {
	srv := fakeBucket(t)
	ctx := context.Background()
	a := newDevice(t, srv.URL, "bkt", remote.Options{MaxAttempts: 4})
	files := contents(5)
	a.put(t, files)
	var n atomic.Int64
	srv.SetFault(func(r *http.Request) int {
		if n.Add(1)%2 == 1 {
			return http.StatusServiceUnavailable
		}
		return 0
	})
	_, err := a.st.Push(ctx, a.db)
	require.NoError(t, err)
	assert.Equal(t, 3, srv.Count("PUT"), "the lock, the pack and its index")
}

// TestConditionalWrite: a device pushing objects already on the object
// store gets a 412 for each pack and takes it as success; its index
// objects, which name the device that pushed, are its own.
func TestConditionalWrite(t *testing.T) {
	srv := fakeBucket(t)
	ctx := context.Background()
	files := contents(20)
	a := newDevice(t, srv.URL, "bkt", remote.Options{})
	a.put(t, files)
	_, err := a.st.Push(ctx, a.db)
	require.NoError(t, err)
	packs, indexes := srv.Keys("bkt", "store/data/"), srv.Keys("bkt", "store/index/")
	require.NotEmpty(t, packs)

	b := newDevice(t, srv.URL, "bkt", remote.Options{})
	hs := b.put(t, files)
	_, err = b.st.Push(ctx, b.db)
	require.NoError(t, err)
	written, existed := b.st.Uploads()
	assert.Equal(t, packs, srv.Keys("bkt", "store/data/"), "the same content makes the same packs")
	assert.Equal(t, int64(len(packs)), existed, "each pack was there already")
	assert.Equal(t, int64(len(indexes))+1, written, "each index object names its device (and the push's lock)")
	assert.Len(t, srv.Keys("bkt", "store/index/"), 2*len(indexes))
	_, err = b.st.Evict(ctx, b.db)
	require.NoError(t, err)
	b.requireAll(t, hs, files)
}

// TestDamagedObjects: a pack that went missing fails reads with
// ErrMissing, one whose bytes changed with cas.ErrCorrupt, both coded
// store.corrupt; neither is cached, and a read after repair succeeds.
func TestDamagedObjects(t *testing.T) {
	srv := fakeBucket(t)
	ctx := context.Background()
	a := newDevice(t, srv.URL, "bkt", remote.Options{})
	files := contents(3)
	hs := a.put(t, files)
	_, err := a.st.Push(ctx, a.db)
	require.NoError(t, err)
	_, err = a.st.Evict(ctx, a.db)
	require.NoError(t, err)
	packs := srv.Keys("bkt", "store/data/")
	require.Len(t, packs, 1)
	orig, _ := srv.Object("bkt", packs[0])

	srv.SetObject("bkt", packs[0], nil)
	_, err = a.blobs.ReadAll(ctx, hs[0])
	assert.ErrorIs(t, err, remote.ErrMissing)
	assert.ErrorIs(t, err, cas.ErrCorrupt)
	assert.Equal(t, 1, strings.Count(err.Error(), remote.ErrMissing.Error()), "said once: %v", err)

	bad := bytes.Clone(orig)
	bad[3] ^= 0xff
	srv.SetObject("bkt", packs[0], bad)
	_, err = a.blobs.ReadAll(ctx, hs[0])
	assert.ErrorIs(t, err, cas.ErrCorrupt)
	assert.NotErrorIs(t, err, remote.ErrMissing)

	// A pack cut short is damage too, not an outage: the ranges its
	// index names are past its end (416) or come back short.
	srv.SetObject("bkt", packs[0], orig[:1])
	for _, h := range hs {
		_, err = a.blobs.ReadAll(ctx, h)
		assert.Equal(t, wserr.Corrupt, wserr.CodeOf(err), "%v", err)
		assert.NotErrorIs(t, err, remote.ErrUnavailable)
	}

	srv.SetObject("bkt", packs[0], orig)
	a.requireAll(t, hs, files)

	// A damaged index object is skipped by Pull and named; Recover finds
	// what it lists in the pack, which ends with the same index.
	idx := srv.Keys("bkt", "store/index/")
	require.Len(t, idx, 1)
	srv.SetObject("bkt", idx[0], []byte(`{"version":1}`))
	b := newDevice(t, srv.URL, "bkt", remote.Options{})
	st, err := b.st.Pull(ctx, b.db)
	require.NoError(t, err)
	assert.Equal(t, []string{strings.TrimPrefix(idx[0], "store/")}, st.Damaged)
	assert.Zero(t, st.Objects)
	n, err := b.st.Recover(ctx, b.db, hs)
	require.NoError(t, err)
	assert.Equal(t, len(hs), n)
	b.requireAll(t, hs, files)
}

// TestMotoKilledMidPush kills a real S3 server (moto) while a push is
// uploading: Push fails with ErrUnavailable, every file stays readable
// from the cache, and after a restart the push completes.
func TestMotoKilledMidPush(t *testing.T) {
	testEnv(t)
	m := s3fake.StartMoto(t)
	m.CreateBucket("wsstore-kill")
	ctx := context.Background()
	a := newDevice(t, m.URL, "wsstore-kill", remote.Options{PackSize: 2 << 10})
	files := contents(300)
	hs := a.put(t, files)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if w, _ := a.st.Uploads(); w >= 4 {
				m.Stop()
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	_, err := a.st.Push(ctx, a.db)
	<-done
	require.Error(t, err)
	assert.ErrorIs(t, err, remote.ErrUnavailable)
	assert.True(t, wserr.Is(err, wserr.Busy))
	left, err := a.st.Pending(ctx, a.db)
	require.NoError(t, err)
	assert.Greater(t, left, 0)
	a.requireAll(t, hs, files)

	// moto keeps objects in memory: the restarted server is empty, so
	// this push starts a new bucket with what was pending.
	m.Start()
	m.CreateBucket("wsstore-kill")
	_, err = a.st.Push(ctx, a.db)
	require.NoError(t, err)
	left, err = a.st.Pending(ctx, a.db)
	require.NoError(t, err)
	assert.Zero(t, left)
}

// TestRefusedRequests: what no retry changes (credentials or permissions
// refused, no such bucket, an endpoint that is not a URL) is
// store.invalid_options, not store.busy.
func TestRefusedRequests(t *testing.T) {
	srv := fakeBucket(t)
	ctx := context.Background()
	for _, st := range []int{http.StatusUnauthorized, http.StatusForbidden} {
		srv.SetFault(func(*http.Request) int { return st })
		a := newDevice(t, srv.URL, "bkt", remote.Options{})
		a.put(t, contents(3))
		_, err := a.st.Push(ctx, a.db)
		assert.Equal(t, wserr.InvalidOptions, wserr.CodeOf(err), "%d: %v", st, err)
		assert.NotErrorIs(t, err, remote.ErrUnavailable)
		assert.ErrorContains(t, err, "credentials")
	}
	srv.SetFault(nil)

	a := newDevice(t, srv.URL, "nosuch", remote.Options{})
	a.put(t, contents(3))
	_, err := a.st.Push(ctx, a.db)
	assert.Equal(t, wserr.InvalidOptions, wserr.CodeOf(err), "%v", err)
	assert.ErrorContains(t, err, "no such bucket")
	_, err = a.st.Pull(ctx, a.db)
	assert.Equal(t, wserr.InvalidOptions, wserr.CodeOf(err), "%v", err)

	for _, ep := range []string{"not a url", "127.0.0.1:9000", "ftp://host", "http://"} {
		_, err := remote.ParseURL("s3://bkt/p?endpoint=" + url.QueryEscape(ep))
		assert.Equal(t, wserr.InvalidOptions, wserr.CodeOf(err), "%q: %v", ep, err)
	}
	_, err = remote.ParseURL("s3://bkt/p?endpoint=" + url.QueryEscape(srv.URL))
	assert.NoError(t, err)
	// A region is a name.
	for _, u := range []string{"s3://bkt/p?region=us-east-1/x", "s3://bkt/p?region=", "s3://bkt/p?region=a%20b"} {
		_, err := remote.ParseURL(u)
		assert.Equal(t, wserr.InvalidOptions, wserr.CodeOf(err), "%q: %v", u, err)
	}
	for _, u := range []string{"s3://bkt", "s3://bkt/", "s3://bkt/p/q/", "s3://bkt/p?region=auto", "s3://bkt/p.d/q_r-1?region=eu-west-3"} {
		_, err := remote.ParseURL(u)
		assert.NoError(t, err, "%q", u)
	}
}

// TestPushCostsWhatIsPending: a push reads the pending objects a page at
// a time, in an index of them alone, so what it costs (and what it holds)
// grows with what is pending, not with every object the store records; a
// push of more than a page's objects pushes them all.
func TestPushCostsWhatIsPending(t *testing.T) {
	srv := fakeBucket(t)
	ctx := context.Background()
	var rec storetest.Statements
	db, err := index.Open(ctx, filepath.Join(t.TempDir(), "wsstore.db"), index.Options{Trace: rec.Trace})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	st := openStorage(t, srv.URL, "bkt", "store", remote.Options{PackSize: 64 << 10})
	blobs, err := cas.New(db, cas.Options{Storage: st, InlineMax: 4 << 10})
	require.NoError(t, err)
	a := &device{db: db, st: st, blobs: blobs}
	files := make([][]byte, 1500) // more than a page of the push's reads
	for i := range files {
		files[i] = fmt.Appendf(nil, "file %d: %s", i, strings.Repeat("x", i%300))
	}
	hs := a.put(t, files)
	n, err := st.Pending(ctx, db)
	require.NoError(t, err)
	require.Greater(t, n, 1024)
	ps, err := st.Push(ctx, db)
	require.NoError(t, err)
	assert.Equal(t, n, ps.Objects+ps.Chunked)
	left, err := st.Pending(ctx, db)
	require.NoError(t, err)
	assert.Zero(t, left)

	a.put(t, [][]byte{[]byte("one more")})
	for _, stmts := range [][]string{
		rec.Record(func() { _, err = st.Push(ctx, db) }),
		rec.Record(func() { _, err = st.Push(ctx, db) }), // nothing pending
	} {
		require.NoError(t, err)
		assert.NotZero(t, requireObjectsBy(t, db, stmts, "remote_objects_pending"))
	}
	_, err = st.Evict(ctx, db)
	require.NoError(t, err)
	a.requireAll(t, hs, files)
}

// requireObjectsBy checks that each of stmts that reads remote_objects
// finds its rows through the index named or by key, never by a scan, and
// returns how many read it.
func requireObjectsBy(t *testing.T, db *index.DB, stmts []string, idx string) int {
	t.Helper()
	var read int
	for _, q := range stmts {
		if !strings.Contains(q, "remote_objects") {
			continue
		}
		read++
		args := make([]any, strings.Count(q, "?"))
		for i := range args {
			args[i] = make([]byte, 32)
		}
		for _, step := range storetest.QueryPlan(t, db, q, args...) {
			if strings.Contains(step, "remote_objects") {
				assert.True(t, strings.Contains(step, idx) || strings.Contains(step, "PRIMARY KEY (kind=? AND hash=?)"), "%s\n  %s", q, step)
			}
		}
	}
	return read
}

// TestPushWaitsForWhatAListNeeds: a chunked file written while a push is
// part way, after the push read the pending chunks, is not pushed as a
// list naming chunks that are not on the object store: it waits, with
// its chunks, for the next push, and another device reads it whole then.
func TestPushWaitsForWhatAListNeeds(t *testing.T) {
	srv := fakeBucket(t)
	ctx := context.Background()
	a := newDevice(t, srv.URL, "bkt", remote.Options{PackSize: 16 << 10})
	a.put(t, contents(60)) // chunks enough to fill packs before the blobs are read
	big := make([]byte, 40<<10)
	r := rand.New(rand.NewPCG(7, 7))
	for i := range big {
		big[i] = byte(r.IntN(256))
	}
	var once atomic.Bool
	var written cas.Hash
	var putErr error
	srv.SetFault(func(req *http.Request) int {
		if req.Method == http.MethodPut && strings.Contains(req.URL.Path, "/store/data/") && once.CompareAndSwap(false, true) {
			written, putErr = a.blobs.Put(ctx, bytes.NewReader(big))
		}
		return 0
	})
	_, err := a.st.Push(ctx, a.db)
	srv.SetFault(nil)
	require.NoError(t, err)
	require.NoError(t, putErr)
	require.True(t, once.Load())

	b := newDevice(t, srv.URL, "bkt", remote.Options{})
	_, err = b.st.Pull(ctx, b.db)
	require.NoError(t, err)
	_, err = b.blobs.ReadAll(ctx, written)
	assert.True(t, wserr.Is(err, wserr.NotFound), "not on the object store yet, rather than a list without its chunks: %v", err)

	_, err = a.st.Push(ctx, a.db)
	require.NoError(t, err)
	n, err := a.st.Pending(ctx, a.db)
	require.NoError(t, err)
	assert.Zero(t, n)
	_, err = b.st.Pull(ctx, b.db)
	require.NoError(t, err)
	got, err := b.blobs.ReadAll(ctx, written)
	require.NoError(t, err)
	assert.Equal(t, big, got)
}

// TestRecoverRecordsWhatIsWanted: a device that has no record of blobs
// another device pushed records them, with the chunks of the chunked
// ones, from the index objects, and reads them; a hash no index lists
// stays missing, and a second call records nothing more.
func TestRecoverRecordsWhatIsWanted(t *testing.T) {
	srv := fakeBucket(t)
	ctx := context.Background()
	a := newDevice(t, srv.URL, "bkt", remote.Options{PackSize: 8 << 10})
	files := contents(20) // two of them chunked
	hs := a.put(t, files)
	_, err := a.st.Push(ctx, a.db)
	require.NoError(t, err)
	recorded, err := a.st.ObjectDelta(ctx, a.db, true)
	require.NoError(t, err)
	defer recorded.Close()
	var chunks int
	require.NoError(t, recorded.Each(func(_ bool, kind cas.Kind, _ cas.Hash) error {
		if kind == cas.KindChunk {
			chunks++
		}
		return nil
	}))
	require.Positive(t, chunks)

	b := newDevice(t, srv.URL, "bkt", remote.Options{})
	nowhere := cas.Sum([]byte("pushed by no one"))
	n, err := b.st.Recover(ctx, b.db, append(slices.Clone(hs), nowhere))
	require.NoError(t, err)
	assert.Equal(t, len(hs)+chunks, n, "every blob and every chunk of the chunked ones")
	b.requireAll(t, hs, files)
	_, err = b.blobs.ReadAll(ctx, nowhere)
	assert.True(t, wserr.Is(err, wserr.NotFound), "%v", err)
	n, err = b.st.Recover(ctx, b.db, hs)
	require.NoError(t, err)
	assert.Zero(t, n)
}

// TestPackObjectsAreBounded: a push of many tiny objects, which would fit
// one pack by bytes, splits them into packs of at most 4,096 objects, so
// no index object (built by the push, read whole by reclaim and pull)
// grows with the objects pending; every object reads back from a device
// that pulls them.
func TestPackObjectsAreBounded(t *testing.T) {
	srv := fakeBucket(t)
	ctx := context.Background()
	a := newDevice(t, srv.URL, "bkt", remote.Options{})
	const n = 10000
	hs, files := a.putTiny(t, n)
	ps, err := a.st.Push(ctx, a.db)
	require.NoError(t, err)
	assert.Equal(t, n, ps.Objects)
	assert.GreaterOrEqual(t, ps.Packs, 3, "10,000 objects of a few bytes: at least three packs")
	for _, k := range srv.Keys("bkt", "store/index/") {
		b, ok := srv.Object("bkt", k)
		require.True(t, ok)
		var idx struct {
			Objects []json.RawMessage `json:"objects"`
		}
		require.NoError(t, json.Unmarshal(b, &idx))
		assert.LessOrEqual(t, len(idx.Objects), 4096, k)
	}
	b := newDevice(t, srv.URL, "bkt", remote.Options{})
	_, err = b.st.Pull(ctx, b.db)
	require.NoError(t, err)
	b.requireAll(t, hs[:50], files[:50])
	b.requireAll(t, hs[n-50:], files[n-50:])
}
