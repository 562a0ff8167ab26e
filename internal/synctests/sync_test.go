package synctests_test

import (
	"context"
	"io/fs"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/archive"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/remote"
	"github.com/wsstore/wsstore/remote/s3fake"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// endpoint stands between the stores and moto_server: it is the object
// store's address as the stores see it, so stopping it kills the server
// for them (connections in flight cut) while moto keeps what landed, as a
// durable store would. It records every PUT and its status.
type endpoint struct {
	t     *testing.T
	URL   string
	addr  string
	proxy *httputil.ReverseProxy
	srv   *http.Server
	mu    sync.Mutex
	puts  map[string][]int // key → statuses
}

func newEndpoint(t *testing.T, target string) *endpoint {
	u, err := url.Parse(target)
	require.NoError(t, err)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	e := &endpoint{t: t, addr: l.Addr().String(), proxy: httputil.NewSingleHostReverseProxy(u), puts: map[string][]int{}}
	e.URL = "http://" + e.addr
	e.serve(l)
	t.Cleanup(e.Stop)
	return e
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(s int) { w.status = s; w.ResponseWriter.WriteHeader(s) }

func (e *endpoint) serve(l net.Listener) {
	e.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, status: 200}
		e.proxy.ServeHTTP(sw, r)
		if r.Method == http.MethodPut {
			e.mu.Lock()
			e.puts[r.URL.Path] = append(e.puts[r.URL.Path], sw.status)
			e.mu.Unlock()
		}
	})}
	go e.srv.Serve(l)
}

// Stop kills the endpoint: the listener and every open connection close.
func (e *endpoint) Stop() { _ = e.srv.Close() }

// Start brings it back on the same address.
func (e *endpoint) Start() {
	l, err := net.Listen("tcp", e.addr)
	require.NoError(e.t, err)
	e.serve(l)
}

// landed counts the PUTs the server took (2xx), and the keys it took more
// than once.
func (e *endpoint) landed() (n int, twice []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for k, ss := range e.puts {
		ok := 0
		for _, s := range ss {
			if s/100 == 2 {
				ok++
			}
		}
		n += ok
		if ok > 1 {
			twice = append(twice, k)
		}
	}
	return n, twice
}

func (e *endpoint) status(code int) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, ss := range e.puts {
		for _, s := range ss {
			if s == code {
				n++
			}
		}
	}
	return n
}

// promote runs one run in chat that writes persist/notes.md and finishes,
// promoting its persist layer.
func promote(t *testing.T, st *wsstore.Store, chat, id, text string) error {
	t.Helper()
	ctx := context.Background()
	_, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: chat}, RunID: id})
	require.NoError(t, err)
	_, err = st.Runs.Workspace(id, runs.ModelScope).Write(ctx, vfs.MustPath("persist/notes.md"), []byte(text), vfs.WriteOptions{})
	require.NoError(t, err)
	_, err = st.Runs.Finish(ctx, id)
	return err
}

// edit writes one more file into run id, with its checkpoint.
func edit(t *testing.T, st *wsstore.Store, id, name, text string) {
	t.Helper()
	_, err := st.Runs.Workspace(id, runs.ModelScope).Write(context.Background(), vfs.MustPath("output/"+name), []byte(text), vfs.WriteOptions{})
	require.NoError(t, err)
}

func runIDs(t *testing.T, st *wsstore.Store) []string {
	t.Helper()
	rs, err := st.Runs.Runs(context.Background(), runs.ListQuery{})
	require.NoError(t, err)
	var ids []string
	for _, r := range rs {
		ids = append(ids, r.ID)
	}
	sort.Strings(ids)
	return ids
}

func requireSame(t *testing.T, want, got map[string]string, skip ...string) {
	t.Helper()
	n := 0
outer:
	for k, v := range want {
		for _, s := range skip {
			if strings.HasPrefix(k, s+"/") {
				continue outer
			}
		}
		g, ok := got[k]
		require.True(t, ok, "%s missing", k)
		require.True(t, v == g, "%s differs", k)
		n++
	}
	require.Greater(t, n, 0)
}

func conflictNames(cs []archive.Conflict) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Kind+" "+c.ID)
	}
	sort.Strings(out)
	return out
}

// TestTwoDeviceSync is the two-device story against a real S3 server
// (moto_server on 127.0.0.1): device A writes 20 runs and syncs, with the
// server killed mid-push and back again, the push resuming without
// uploading again what landed; device B starts from nothing, syncs, and
// reads every file at every checkpoint and every journal from the object
// store, equal to A's; both write and sync and end with the same runs,
// a run continued on one device brought forward on the other, and a run
// written on both and a persist/ layer promoted on both reported by name.
func TestTwoDeviceSync(t *testing.T) {
	awsTestEnv(t)
	m := s3fake.StartMoto(t)
	m.CreateBucket("wsstore")
	ep := newEndpoint(t, m.URL)
	ctx := context.Background()
	u := "s3://wsstore/team?endpoint=" + ep.URL
	open := func(dir string) *wsstore.Store {
		st, err := wsstore.Open(ctx, dir, wsstore.Options{Blobs: u, Remote: remote.Options{PackSize: 64 << 10, MaxAttempts: 2, MaxBackoff: 10 * time.Millisecond}})
		require.NoError(t, err)
		t.Cleanup(func() { st.Close() })
		return st
	}

	a := open(t.TempDir())
	writeRuns(t, a, "chat-a", "run-a", 20)
	require.NoError(t, promote(t, a, "chat-p", "run-p-0", "first notes\n"))

	// The server dies after the fifth PUT; the push fails, coded, and
	// nothing is lost locally.
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			if n, _ := ep.landed(); n >= 5 {
				ep.Stop()
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	_, err := a.Sync(ctx)
	<-stopped
	require.Error(t, err)
	n, _ := ep.landed()
	t.Logf("first sync: %v after %d PUTs", err, n)
	assert.True(t, wserr.Is(err, wserr.Busy), "store.busy: %v", err)
	assert.ErrorIs(t, err, remote.ErrUnavailable)
	left, err := a.Remote.Pending(ctx, a.DB)
	require.NoError(t, err)
	require.Greater(t, left, 0)
	before, _ := ep.landed()
	wantA := contents(t, a)

	ep.Start()
	repA, err := a.Sync(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, repA.Published)
	after, twice := ep.landed()
	assert.Empty(t, twice, "no key was uploaded twice")
	again := ep.status(http.StatusPreconditionFailed)
	assert.LessOrEqual(t, again, 2, "at most the pack in flight and its index are offered again, and answered 412")
	assert.Equal(t, 2*repA.Pushed.Packs+min(repA.Pushed.Chunked, 1)+2, after-before+again,
		"the second sync uploads its lock, the rest of the packs with their indexes, the chunk lists and its segment, nothing more")
	left, err = a.Remote.Pending(ctx, a.DB)
	require.NoError(t, err)
	assert.Zero(t, left)

	// Device B, from nothing.
	b := open(t.TempDir())
	repB, err := b.Sync(ctx)
	require.NoError(t, err)
	assert.Len(t, repB.Added, 2+21, "two chats and 21 runs")
	assert.Empty(t, repB.Conflicts)
	_, err = b.Remote.Evict(ctx, b.DB)
	require.NoError(t, err)
	gotB := contents(t, b)
	assert.Equal(t, keys(wantA), keys(gotB))
	requireSame(t, wantA, gotB)
	fr, err := b.Fsck(ctx, nil)
	require.NoError(t, err)
	assert.Empty(t, fr.Problems)

	// Both write. A continues run-a-00 and writes new runs; B writes its
	// own; both write run-a-01 and promote chat-p's persist/ from the
	// same version.
	edit(t, a, "run-a-00", "later.md", "written on A after the sync\n")
	writeRuns(t, a, "chat-a", "run-a2", 2)
	writeRuns(t, b, "chat-b", "run-b", 2)
	edit(t, a, "run-a-01", "both.md", "A's line\n")
	edit(t, b, "run-a-01", "both.md", "B's line\n")
	require.NoError(t, promote(t, a, "chat-p", "run-p-a", "A's notes\n"))
	require.NoError(t, promote(t, b, "chat-p", "run-p-b", "B's notes\n"))

	repA, err = a.Sync(ctx)
	require.NoError(t, err)
	repB, err = b.Sync(ctx)
	require.NoError(t, err)
	chatP := runs.ChatWorkspaceID(runs.ChatKey{Kind: "character", StableChatID: "chat-p"})
	assert.Equal(t, []string{"chat " + chatP, "run run-a-01"}, conflictNames(repB.Conflicts))
	assert.Contains(t, repB.Updated, "run run-a-00", "a run A continued is brought forward on B")
	repA, err = a.Sync(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"chat " + chatP, "run run-a-01"}, conflictNames(repA.Conflicts))
	for _, c := range repA.Conflicts {
		assert.NotEmpty(t, c.Reason)
	}
	assert.Equal(t, runIDs(t, a), runIDs(t, b), "both devices end with the same runs")

	ca, cb := contents(t, a), contents(t, b)
	assert.Equal(t, keys(ca), keys(cb))
	requireSame(t, ca, cb, "run-a-01")
	requireSame(t, cb, ca, "run-a-01")
	fr, err = a.Fsck(ctx, nil)
	require.NoError(t, err)
	assert.Empty(t, fr.Problems)

	// Remote space: a run both devices deleted (and collected) leaves a
	// pack no device names; reclaim removes it and nothing else.
	cl := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(m.URL), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
	packs := func() int {
		out, err := cl.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("wsstore"), Prefix: aws.String("team/data/")})
		require.NoError(t, err)
		return len(out.Contents)
	}
	_, err = a.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "chat-a"}, RunID: "run-doomed",
		Inputs: map[string][]byte{"prompt_snapshot.json": []byte(`{"doomed":true}`)}})
	require.NoError(t, err)
	edit(t, a, "run-doomed", "gone.md", "only the doomed run holds this\n")
	_, err = a.Sync(ctx)
	require.NoError(t, err)
	_, err = b.Sync(ctx)
	require.NoError(t, err)
	withDoomed := packs()
	for _, st := range []*wsstore.Store{a, b} {
		_, err := st.Runs.CancelAndDeleteRun(ctx, "run-doomed")
		require.NoError(t, err)
		_, err = st.GC(ctx, wsstore.GCOptions{Grace: -1})
		require.NoError(t, err)
	}
	rec, err := a.ReclaimRemote(ctx, remote.ReclaimOptions{Grace: -1})
	require.NoError(t, err)
	assert.Zero(t, rec.Packs, "B's object set, as its last segment states it, still names the doomed run's objects")
	_, err = b.Sync(ctx)
	require.NoError(t, err)
	_, err = a.Sync(ctx)
	require.NoError(t, err)
	rec, err = a.ReclaimRemote(ctx, remote.ReclaimOptions{Grace: -1, Max: 100})
	require.NoError(t, err)
	assert.Zero(t, rec.Packs, "A's segment that brought the run is still one a device may read")
	// Bases of both stand for the segments before them: the pack goes.
	for _, st := range []*wsstore.Store{a, b} {
		_, err = st.SyncWith(ctx, wsstore.SyncOptions{Base: true})
		require.NoError(t, err)
	}
	rec, err = a.ReclaimRemote(ctx, remote.ReclaimOptions{Grace: -1, Max: 100})
	require.NoError(t, err)
	assert.Equal(t, 1, rec.Packs, "the pack of the doomed run's blobs")
	assert.Equal(t, withDoomed-1, packs())
	for _, st := range []*wsstore.Store{a, b} {
		_, err = st.Remote.Evict(ctx, st.DB)
		require.NoError(t, err)
		fr, err = st.Fsck(ctx, nil)
		require.NoError(t, err)
		assert.Empty(t, fr.Problems, "every file still reads from the object store")
	}
	_, err = b.Sync(ctx)
	require.NoError(t, err, "the archives left are the newest of each device")

	// A damaged archive on the object store is refused, coded, and not
	// taken as read.
	c := open(t.TempDir())
	segs, err := c.Remote.Segments(ctx, repA.Device, "")
	require.NoError(t, err)
	base := remote.FromBase(segs)[0]
	require.True(t, base.Base)
	_, err = cl.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("wsstore"), Key: aws.String("team/" + base.Key),
		Body: strings.NewReader("not a segment")})
	require.NoError(t, err)
	_, err = c.Sync(ctx)
	require.Error(t, err)
	assert.True(t, wserr.Is(err, wserr.Corrupt), "store.corrupt: %v", err)
	assert.ErrorIs(t, err, cas.ErrCorrupt)
	applied, err := c.Remote.Applied(ctx, c.DB)
	require.NoError(t, err)
	assert.NotContains(t, applied, repA.Device, "the damaged segment is not taken as read")

	// A pack missing from the object store: reads of its objects fail,
	// coded (fsck names them), nothing is cached in their place.
	out, err := cl.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("wsstore"), Prefix: aws.String("team/data/")})
	require.NoError(t, err)
	require.NotEmpty(t, out.Contents)
	for _, o := range out.Contents {
		_, err = cl.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("wsstore"), Key: o.Key})
		require.NoError(t, err)
	}
	_, err = b.Remote.Evict(ctx, b.DB)
	require.NoError(t, err)
	cps, err := b.Checkpoints.List(ctx, "run-a-00")
	require.NoError(t, err)
	_, err = fs.ReadFile(b.Trees.FS(ctx, cps[len(cps)-1].Root), "input/prompt_snapshot.json")
	require.Error(t, err)
	assert.ErrorIs(t, err, remote.ErrMissing)
	assert.True(t, wserr.Is(err, wserr.Corrupt), "store.corrupt: %v", err)
	fr, err = b.Fsck(ctx, nil)
	require.NoError(t, err)
	assert.NotEmpty(t, fr.Problems)
}
