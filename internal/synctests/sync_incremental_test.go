package synctests_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/archive"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/remote"
	"github.com/wsstore/wsstore/remote/s3fake"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// tier is an object store the tests sync through: open makes a store on
// it in a new directory; puts counts the PUTs it took; getBytes counts the
// object bytes it sent (nil where the server does not say).
type tier struct {
	open     func() *wsstore.Store
	puts     func() int
	putBytes func() int64
	getBytes func() int64
}

func tierOpener(t *testing.T, endpoint, prefix string) func() *wsstore.Store {
	u := "s3://wsstore/" + prefix + "?endpoint=" + endpoint
	return func() *wsstore.Store {
		st, err := wsstore.Open(context.Background(), t.TempDir(), wsstore.Options{Blobs: u,
			Remote: remote.Options{PackSize: 64 << 10, MaxAttempts: 2, MaxBackoff: 10 * time.Millisecond}})
		require.NoError(t, err)
		t.Cleanup(func() { st.Close() })
		return st
	}
}

// fakeTier starts the in-process object store and returns it with a
// function that opens a store on it in a new directory.
func fakeTier(t *testing.T) (*s3fake.Server, func() *wsstore.Store) {
	t.Helper()
	awsTestEnv(t)
	srv := s3fake.New("wsstore")
	t.Cleanup(srv.Close)
	return srv, tierOpener(t, srv.URL, "team")
}

func onFake(fn func(t *testing.T, tr tier)) func(t *testing.T) {
	return func(t *testing.T) {
		srv, open := fakeTier(t)
		fn(t, tier{open: open, puts: func() int { return srv.Count("PUT") },
			putBytes: func() int64 { return srv.Bytes("PUT") }, getBytes: func() int64 { return srv.Bytes("GET") }})
	}
}

// TestSyncOnMoto runs the incremental, deletion and actor-space stories
// against a real S3 server (moto_server on 127.0.0.1), one prefix each.
func TestSyncOnMoto(t *testing.T) {
	awsTestEnv(t)
	m := s3fake.StartMoto(t)
	m.CreateBucket("wsstore")
	ep := newEndpoint(t, m.URL)
	for name, fn := range map[string]func(*testing.T, tier){
		"Incremental": testSyncIncremental, "Deletions": testSyncDeletions, "ActorSpaces": testSyncActorSpaces} {
		t.Run(name, func(t *testing.T) {
			before, _ := ep.landed()
			open := tierOpener(t, ep.URL, strings.ToLower(name))
			fn(t, tier{open: open, puts: func() int { n, _ := ep.landed(); return n - before }})
		})
	}
}

// smallRuns writes n runs named prefix-NN in chat, each a few small
// checkpointed files.
func smallRuns(t *testing.T, st *wsstore.Store, chat, prefix string, n int) {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		id := fmt.Sprintf("%s-%02d", prefix, i)
		_, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: chat}, RunID: id,
			Inputs: map[string][]byte{"prompt_snapshot.json": []byte(fmt.Sprintf(`{"run":%q}`, id))}})
		require.NoError(t, err)
		ws := st.Runs.Workspace(id, runs.ModelScope)
		for j := range 3 {
			_, err = ws.Write(ctx, vfs.MustPath(fmt.Sprintf("output/%d.md", j)), []byte(strings.Repeat(id+" line\n", 20+j)), vfs.WriteOptions{})
			require.NoError(t, err)
		}
	}
}

func syncOK(t *testing.T, st *wsstore.Store) wsstore.SyncReport {
	t.Helper()
	rep, err := st.Sync(context.Background())
	require.NoError(t, err)
	return rep
}

func runsOf(rep wsstore.SyncReport, names []string) []string {
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, "run ") {
			out = append(out, n)
		}
	}
	return out
}

// TestSyncIncremental: a sync after one new run uploads that run, not the
// store, and the other device reads only that segment.
func TestSyncIncremental(t *testing.T) { onFake(testSyncIncremental)(t) }

func testSyncIncremental(t *testing.T, tr tier) {
	a, b := tr.open(), tr.open()
	smallRuns(t, a, "chat-a", "run-a", 20)

	first := syncOK(t, a)
	require.True(t, first.Base, "a device's first segment is a base")
	assert.Len(t, runsOf(first, first.Sent), 20)
	full := first.SegmentBytes
	rb := syncOK(t, b)
	assert.Len(t, runsOf(rb, rb.Added), 20)
	bsegs, err := b.Remote.Segments(context.Background(), rb.Device, "")
	require.NoError(t, err)
	require.Len(t, bsegs, 1)
	bh, err := b.Remote.ReadHeader(context.Background(), bsegs[0])
	require.NoError(t, err)
	assert.Zero(t, bh.Archive, "B's first base carries nothing it only took in")

	smallRuns(t, a, "chat-a", "run-new", 1)
	puts := tr.puts()
	var putBytes int64
	if tr.putBytes != nil {
		putBytes = tr.putBytes()
	}
	rep := syncOK(t, a)
	assert.False(t, rep.Base)
	assert.Equal(t, []string{"run run-new-00"}, runsOf(rep, rep.Sent), "only the new run is sent")
	assert.Less(t, rep.SegmentBytes*8, full, "the segment holds one run of 21: %d bytes against %d", rep.SegmentBytes, full)
	assert.Equal(t, 4, tr.puts()-puts, "the lock, one pack, its index and the segment")
	if tr.putBytes != nil {
		sent := tr.putBytes() - putBytes
		t.Logf("base segment %d bytes; after one run: segment %d bytes, %d bytes PUT in all", full, rep.SegmentBytes, sent)
		assert.Less(t, sent*4, full, "what the sync uploads grows with the change")
	}

	var getBytes int64
	if tr.getBytes != nil {
		getBytes = tr.getBytes()
	}
	rb = syncOK(t, b)
	assert.Len(t, rb.TookIn, 1, "B reads A's one new segment")
	assert.Equal(t, []string{"run run-new-00"}, runsOf(rb, rb.Added))
	assert.Empty(t, rb.Conflicts)
	if tr.getBytes != nil {
		got := tr.getBytes() - getBytes
		t.Logf("B's second sync read %d bytes", got)
		assert.Less(t, got*4, full)
	}
	assert.Equal(t, runIDs(t, a), runIDs(t, b))

	// Nothing changed: no segment, only the lock.
	puts = tr.puts()
	rep = syncOK(t, a)
	assert.Empty(t, rep.Published)
	assert.Equal(t, 1, tr.puts()-puts)
	rb = syncOK(t, b)
	assert.Empty(t, rb.TookIn)
	assert.Empty(t, rb.Published, "what B took in is not sent back")
}

// TestSyncDeletions: a run or chat deleted on one device is deleted on
// the other after both sync, stays deleted, also for a device that starts
// later; a deletion racing an edit is a named conflict on both sides.
func TestSyncDeletions(t *testing.T) { onFake(testSyncDeletions)(t) }

func testSyncDeletions(t *testing.T, tr tier) {
	open := tr.open
	ctx := context.Background()
	a, b := open(), open()
	smallRuns(t, a, "chat-1", "r", 3)
	smallRuns(t, a, "chat-2", "q", 1)
	syncOK(t, a)
	syncOK(t, b)
	require.Equal(t, runIDs(t, a), runIDs(t, b))
	// B continues r-00 and A takes that in: B's segments now hold r-00
	// too.
	edit(t, b, "r-00", "b.md", "B's turn\n")
	syncOK(t, b)
	assert.Contains(t, syncOK(t, a).Updated, "run r-00")

	_, err := a.Runs.CancelAndDeleteRun(ctx, "r-00")
	require.NoError(t, err)
	chat2 := runs.ChatKey{Kind: "character", StableChatID: "chat-2"}
	_, err = a.Runs.DeleteChats(ctx, []runs.ChatKey{chat2}, true)
	require.NoError(t, err)
	chat2ID := runs.ChatWorkspaceID(chat2)

	rep := syncOK(t, a)
	assert.ElementsMatch(t, []string{"run r-00", "run q-00", "chat " + chat2ID}, rep.Tombstones)
	rb := syncOK(t, b)
	assert.ElementsMatch(t, []string{"run r-00", "run q-00", "chat " + chat2ID}, rb.Deleted)
	assert.Empty(t, rb.Conflicts)
	assert.Equal(t, []string{"r-01", "r-02"}, runIDs(t, b))
	assert.NoError(t, b.DB.View(ctx, func(tx *index.Tx) error {
		_, err := b.Runs.ExportChat(ctx, tx, chat2ID)
		assert.True(t, wserr.Is(err, wserr.NotFound), "the chat is gone on B: %v", err)
		return nil
	}))

	for range 2 {
		syncOK(t, a)
		syncOK(t, b)
	}
	assert.Equal(t, []string{"r-01", "r-02"}, runIDs(t, a), "nothing comes back")
	assert.Equal(t, []string{"r-01", "r-02"}, runIDs(t, b))

	// A device that starts now reads segments of A and of B that hold
	// r-00 and A's tombstone, in whichever order: r-00 stays deleted.
	c := open()
	rc := syncOK(t, c)
	assert.Empty(t, rc.Conflicts)
	assert.Equal(t, []string{"r-01", "r-02"}, runIDs(t, c))

	// Deleted on A, written on B meanwhile: a conflict, named on both
	// sides, and B's edit is not lost.
	_, err = a.Runs.CancelAndDeleteRun(ctx, "r-01")
	require.NoError(t, err)
	edit(t, b, "r-01", "late.md", "written on B while A deleted the run\n")
	syncOK(t, a)
	rb = syncOK(t, b)
	assert.Equal(t, []string{"run r-01"}, conflictNames(rb.Conflicts))
	assert.Contains(t, rb.Conflicts[0].Reason, "deleted on device")
	assert.Contains(t, runIDs(t, b), "r-01")
	rep = syncOK(t, a)
	assert.Equal(t, []string{"run r-01"}, conflictNames(rep.Conflicts), "A names it too as B's edit comes back")
	assert.Contains(t, runIDs(t, a), "r-01")
	f, err := a.Runs.Workspace("r-01", runs.ModelScope).Read(ctx, vfs.MustPath("output/late.md"), vfs.ReadOptions{})
	require.NoError(t, err)
	assert.Contains(t, string(f.Content), "written on B")

	// A chat deleted on A while B started a run in it: a conflict, and
	// B's run stays.
	smallRuns(t, a, "chat-3", "s", 1)
	syncOK(t, a)
	syncOK(t, b)
	chat3 := runs.ChatKey{Kind: "character", StableChatID: "chat-3"}
	_, err = a.Runs.DeleteChats(ctx, []runs.ChatKey{chat3}, true)
	require.NoError(t, err)
	smallRuns(t, b, "chat-3", "late", 1)
	syncOK(t, a)
	rb = syncOK(t, b)
	assert.Equal(t, []string{"chat " + runs.ChatWorkspaceID(chat3)}, conflictNames(rb.Conflicts))
	assert.Contains(t, runIDs(t, b), "late-00")
	assert.NotContains(t, runIDs(t, b), "s-00", "the run A deleted with the chat goes")
}

// TestSyncRetention: runs retention deleted on one device are deleted on
// the other.
func TestSyncRetention(t *testing.T) {
	_, open := fakeTier(t)
	ctx := context.Background()
	a, b := open(), open()
	smallRuns(t, a, "chat-r", "done", 3)
	for i := range 3 {
		_, err := a.Runs.Finish(ctx, fmt.Sprintf("done-%02d", i))
		require.NoError(t, err)
	}
	syncOK(t, a)
	syncOK(t, b)
	require.Equal(t, []string{"done-00", "done-01", "done-02"}, runIDs(t, b))
	keep := 1
	require.NoError(t, a.Runs.SetPolicy(ctx, "*", runs.Policy{KeepCompletedRuns: &keep}))
	pr, err := a.Runs.Prune(ctx, runs.PruneOptions{})
	require.NoError(t, err)
	require.Len(t, pr.Runs, 2)
	syncOK(t, a)
	rb := syncOK(t, b)
	assert.Len(t, rb.Deleted, 2)
	assert.Equal(t, runIDs(t, a), runIDs(t, b))
	assert.Len(t, runIDs(t, b), 1)
}

// TestSyncPrunedCheckpoints: checkpoints the run's cap pruned on the
// writing device go on the other one too when the run is brought forward.
func TestSyncPrunedCheckpoints(t *testing.T) {
	_, open := fakeTier(t)
	ctx := context.Background()
	a, b := open(), open()
	p := runs.DefaultProfile()
	p.MaxCheckpoints = 3
	_, err := a.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "chat-1"}, RunID: "capped", Profile: &p})
	require.NoError(t, err)
	for i := range 3 {
		edit(t, a, "capped", "main.md", fmt.Sprintf("draft %d\n", i))
	}
	ids := func(st *wsstore.Store) []string {
		cps, err := st.Checkpoints.List(ctx, "capped")
		require.NoError(t, err)
		var out []string
		for _, c := range cps {
			out = append(out, c.ID)
		}
		return out
	}
	syncOK(t, a)
	syncOK(t, b)
	require.Equal(t, ids(a), ids(b))
	before := ids(b)
	for i := range 3 {
		edit(t, a, "capped", "main.md", fmt.Sprintf("later draft %d\n", i))
	}
	syncOK(t, a)
	rb := syncOK(t, b)
	assert.Contains(t, rb.Updated, "run capped")
	assert.Equal(t, ids(a), ids(b), "B holds exactly A's checkpoints")
	assert.NotEqual(t, before[0], ids(b)[0], "the oldest were pruned on B too")
	fr, err := b.Fsck(ctx, nil)
	require.NoError(t, err)
	assert.Empty(t, fr.Problems)
}

// TestSyncActorSpaces: a space changed on one device fast-forwards the
// other; changed on both, it is a named conflict and each keeps its own.
func TestSyncActorSpaces(t *testing.T) { onFake(testSyncActorSpaces)(t) }

func testSyncActorSpaces(t *testing.T, tr tier) {
	open := tr.open
	ctx := context.Background()
	a, b := open(), open()
	up := func(st *wsstore.Store, path, text string) {
		t.Helper()
		_, err := st.Actors.Upload(ctx, "alice", path, strings.NewReader(text))
		require.NoError(t, err)
	}
	read := func(st *wsstore.Store, path string) string {
		t.Helper()
		rc, _, err := st.Actors.Download(ctx, "alice", path)
		require.NoError(t, err)
		defer rc.Close()
		bs, err := io.ReadAll(rc)
		require.NoError(t, err)
		return string(bs)
	}
	up(a, "notes/one.md", "one\n")
	syncOK(t, a)
	rb := syncOK(t, b)
	assert.Contains(t, rb.Added, "actor alice")

	up(a, "notes/two.md", "two\n")
	syncOK(t, a)
	rb = syncOK(t, b)
	assert.Contains(t, rb.Updated, "actor alice", "B fast-forwards to A's version")
	assert.Empty(t, rb.Conflicts)
	assert.Equal(t, "two\n", read(b, "notes/two.md"))

	up(b, "notes/three.md", "three from B\n")
	syncOK(t, b)
	ra := syncOK(t, a)
	assert.Contains(t, ra.Updated, "actor alice", "and back")
	assert.Equal(t, "three from B\n", read(a, "notes/three.md"))
	for _, st := range []*wsstore.Store{a, b} {
		stats, err := st.Actors.Stats(ctx, "alice")
		require.NoError(t, err)
		assert.EqualValues(t, 3, stats.Versions, "each device counts the versions a sync brought")
	}

	up(a, "notes/both.md", "A\n")
	up(b, "notes/both.md", "B\n")
	syncOK(t, a)
	rb = syncOK(t, b)
	assert.Equal(t, []string{"actor alice"}, conflictNames(rb.Conflicts))
	ra = syncOK(t, a)
	assert.Equal(t, []string{"actor alice"}, conflictNames(ra.Conflicts))
	assert.Equal(t, "A\n", read(a, "notes/both.md"))
	assert.Equal(t, "B\n", read(b, "notes/both.md"))
	for _, st := range []*wsstore.Store{a, b} {
		fr, err := st.Fsck(ctx, nil)
		require.NoError(t, err)
		assert.Empty(t, fr.Problems)
	}
}

// TestSyncReclaimLocks: reclaim refuses while a device syncs, a sync
// refuses while a reclaim lease is live, and an expired lease is taken
// over.
func TestSyncReclaimLocks(t *testing.T) {
	srv, open := fakeTier(t)
	ctx := context.Background()
	a, b := open(), open()
	smallRuns(t, a, "chat-1", "r", 2)
	syncOK(t, a)
	syncOK(t, b)

	dev, err := remote.Device(ctx, b.DB)
	require.NoError(t, err)
	release, err := b.Remote.LockSync(ctx, dev)
	require.NoError(t, err)
	_, err = a.ReclaimRemote(ctx, remote.ReclaimOptions{Grace: -1})
	assert.True(t, wserr.Is(err, wserr.Busy), "store.busy while B syncs: %v", err)
	assert.ErrorIs(t, err, remote.ErrLocked)
	assert.Empty(t, srv.Keys("wsstore", "team/locks/reclaim/"), "the lease is given back")
	require.NoError(t, release(ctx, nil))
	_, err = a.ReclaimRemote(ctx, remote.ReclaimOptions{Grace: -1})
	require.NoError(t, err)

	lease := func(expires time.Time) {
		srv.SetObject("wsstore", "team/locks/reclaim/00000000000000000007",
			[]byte(fmt.Sprintf(`{"device":"elsewhere","at":%q,"expires":%q}`, time.Now().UTC().Format(time.RFC3339Nano), expires.UTC().Format(time.RFC3339Nano))))
	}
	lease(time.Now().Add(time.Hour))
	_, err = b.Sync(ctx)
	assert.True(t, wserr.Is(err, wserr.Busy), "store.busy while another device reclaims: %v", err)
	assert.ErrorIs(t, err, remote.ErrLocked)
	assert.Empty(t, srv.Keys("wsstore", "team/locks/sync/"), "the sync gave its lock back")
	_, err = a.ReclaimRemote(ctx, remote.ReclaimOptions{Grace: -1})
	assert.ErrorIs(t, err, remote.ErrLocked, "one lease at a time")

	lease(time.Now().Add(-time.Minute))
	syncOK(t, b)

	// A pull on its own publishes what the store now records, so reclaim
	// keeps it.
	c := open()
	pulled, err := c.PullRemote(ctx)
	require.NoError(t, err)
	require.Positive(t, pulled.Objects)
	cdev, err := remote.Device(ctx, c.DB)
	require.NoError(t, err)
	segs, err := c.Remote.Segments(ctx, cdev, "")
	require.NoError(t, err)
	require.Len(t, segs, 1)
	h, arch, err := c.Remote.FetchSegment(ctx, segs[0])
	require.NoError(t, err)
	assert.Nil(t, arch, "no metadata")
	assert.Equal(t, int64(pulled.Objects), h.AddedObjects)

	_, err = a.ReclaimRemote(ctx, remote.ReclaimOptions{Grace: -1})
	require.NoError(t, err, "an expired lease is taken over")
	assert.Empty(t, srv.Keys("wsstore", "team/locks/"), "lease 8 released, lease 7 removed")
}

// TestSyncCompaction: once the deltas outgrow the base a device writes a
// new base; reclaim removes the segments before it; a device that starts
// then reads the base and what follows, and ends equal.
func TestSyncCompaction(t *testing.T) {
	srv, open := fakeTier(t)
	ctx := context.Background()
	a := open()
	smallRuns(t, a, "chat-1", "base", 3)
	require.True(t, syncOK(t, a).Base)
	bases := 0
	for i := range 12 {
		smallRuns(t, a, "chat-1", fmt.Sprintf("more%02d", i), 1)
		if syncOK(t, a).Base {
			bases++
		}
	}
	require.Positive(t, bases, "the deltas outgrew the base")
	dev, err := remote.Device(ctx, a.DB)
	require.NoError(t, err)
	segs, err := a.Remote.Segments(ctx, dev, "")
	require.NoError(t, err)
	from := remote.FromBase(segs)
	rec, err := a.ReclaimRemote(ctx, remote.ReclaimOptions{Grace: -1})
	require.NoError(t, err)
	assert.Equal(t, len(segs)-len(from), rec.Segments, "the segments before the newest base")
	assert.Len(t, srv.Keys("wsstore", "team/sync/"+dev+"/"), len(from))

	c := open()
	rc := syncOK(t, c)
	assert.Len(t, rc.TookIn, len(from))
	assert.Equal(t, runIDs(t, a), runIDs(t, c))
	requireSame(t, contents(t, a), contents(t, c))
}

// TestSyncPullNoListing: after a device has read the tier once, a pull or
// a sync learns the new packs from the segments it reads, without
// listing index/.
func TestSyncPullNoListing(t *testing.T) {
	srv, open := fakeTier(t)
	ctx := context.Background()
	a, b, c := open(), open(), open()
	for i := range 4 {
		smallRuns(t, a, "chat-a", fmt.Sprintf("run-%d", i), 5)
		syncOK(t, a)
	}
	packs := len(srv.Keys("wsstore", "team/index/"))
	require.GreaterOrEqual(t, packs, 4)
	indexLists := func() int { n, _ := srv.Lists("team/index/"); return n }

	// Devices that read A from nothing (its base) list index/ once.
	lists := indexLists()
	st, err := open().PullRemote(ctx)
	require.NoError(t, err)
	assert.Equal(t, packs, st.Indexes)
	assert.Equal(t, 1, indexLists()-lists, "a device pulling from nothing lists index/")
	for _, d := range []*wsstore.Store{b, c} {
		lists = indexLists()
		// every pack there, A's and any B's sync pushed
		there := len(srv.Keys("wsstore", "team/index/"))
		assert.Equal(t, there, syncOK(t, d).Pulled.Indexes)
		assert.Equal(t, 1, indexLists()-lists, "a device reading a base lists index/")
	}
	// Each has read the others' first segments.
	syncOK(t, b)
	syncOK(t, c)

	// A's sync of one run pushes one pack, or two when A's background
	// runner stored a new dictionary meanwhile.
	before := len(srv.Keys("wsstore", "team/index/"))
	smallRuns(t, a, "chat-a", "run-new", 1)
	syncOK(t, a)
	added := len(srv.Keys("wsstore", "team/index/")) - before
	require.Positive(t, added)

	lists = indexLists()
	st, err = b.PullRemote(ctx)
	require.NoError(t, err)
	assert.Equal(t, added, st.Indexes, "B takes in the new packs' indexes")
	assert.Zero(t, indexLists()-lists, "B's pull lists no index/")
	rep := syncOK(t, b)
	assert.Equal(t, []string{"run run-new-00"}, runsOf(rep, rep.Added))
	assert.Zero(t, rep.Pulled.Indexes, "the pull took it in already")
	// C takes in every pack since its last sync: A's, and any B's sync
	// just pushed.
	sinceC := len(srv.Keys("wsstore", "team/index/")) - before
	rep = syncOK(t, c)
	assert.Equal(t, []string{"run run-new-00"}, runsOf(rep, rep.Added))
	assert.Equal(t, sinceC, rep.Pulled.Indexes)
	assert.Zero(t, indexLists()-lists, "nor do the syncs")

	// What they learned reads from the object store.
	for _, st := range []*wsstore.Store{b, c} {
		_, err := st.Remote.Evict(ctx, st.DB)
		require.NoError(t, err)
		got, err := st.Runs.Workspace("run-new-00", runs.ModelScope).Read(ctx, vfs.MustPath("output/0.md"), vfs.ReadOptions{})
		require.NoError(t, err)
		assert.Equal(t, strings.Repeat("run-new-00 line\n", 20), string(got.Content))
	}
}

// TestSyncRunTail: a run that gains one event after many travels as that
// event (and its anchor), not as its whole journal; the other device
// brings its copy forward from it.
func TestSyncRunTail(t *testing.T) {
	_, open := fakeTier(t)
	ctx := context.Background()
	a, b := open(), open()
	smallRuns(t, a, "chat-a", "long", 1)
	for i := range 300 {
		edit(t, a, "long-00", "log.md", fmt.Sprintf("turn %d\n", i))
	}
	whole := syncOK(t, a)
	require.True(t, whole.Base)
	syncOK(t, b)
	events := func(st *wsstore.Store) int64 {
		var n int64
		require.NoError(t, st.DB.View(ctx, func(tx *index.Tx) error {
			var err error
			n, err = st.Journal.Last(ctx, tx, "long-00")
			return err
		}))
		return n
	}
	require.Greater(t, events(a), int64(300))

	edit(t, a, "long-00", "log.md", "turn 301\n")
	rep := syncOK(t, a)
	require.False(t, rep.Base)
	t.Logf("%d events: the base segment (the run whole) %d bytes; the segment of one event more %d bytes", events(a), whole.SegmentBytes, rep.SegmentBytes)
	assert.Less(t, rep.SegmentBytes*10, whole.SegmentBytes, "the segment carries the new event, not the journal")
	rb := syncOK(t, b)
	assert.Equal(t, []string{"run long-00"}, rb.Updated)
	assert.Empty(t, rb.Conflicts)
	assert.Equal(t, events(a), events(b))
	got, err := b.Runs.Workspace("long-00", runs.ModelScope).Read(ctx, vfs.MustPath("output/log.md"), vfs.ReadOptions{})
	require.NoError(t, err)
	assert.Equal(t, "turn 301\n", string(got.Content))

	// An archive holding a run from an event on merges only.
	var buf bytes.Buffer
	_, err = a.Archive.Export(ctx, &buf, archive.Scope{Runs: []string{"long-00"}, From: map[string]int64{"long-00": events(a)}},
		archive.Options{BlobsElsewhere: true})
	require.NoError(t, err)
	_, err = b.Archive.Import(ctx, bytes.NewReader(buf.Bytes()), archive.Options{})
	assert.True(t, wserr.Is(err, wserr.InvalidArgument), "%v", err)
}

// TestSyncRunTailMissing: a tail reaching a device that deleted the run
// is a named conflict there; the writing device, told of the deletion,
// sends the run whole, and the deleting device takes it back in.
func TestSyncRunTailMissing(t *testing.T) {
	_, open := fakeTier(t)
	ctx := context.Background()
	a, b := open(), open()
	smallRuns(t, a, "chat-a", "r", 1)
	syncOK(t, a)
	syncOK(t, b)
	_, err := b.Runs.CancelAndDeleteRun(ctx, "r-00")
	require.NoError(t, err)
	edit(t, a, "r-00", "more.md", "A's turn\n")
	syncOK(t, a)

	rb := syncOK(t, b)
	require.Len(t, rb.Conflicts, 1)
	assert.Equal(t, "run", rb.Conflicts[0].Kind)
	assert.Contains(t, rb.Conflicts[0].Reason, "does not hold it")
	assert.NotContains(t, runIDs(t, b), "r-00")

	ra := syncOK(t, a)
	require.Len(t, ra.Conflicts, 1, "A names the deletion it did not apply")
	assert.Equal(t, []string{"run r-00"}, runsOf(ra, ra.Sent), "and sends the run whole")
	rb = syncOK(t, b)
	assert.Equal(t, []string{"run r-00"}, runsOf(rb, rb.Added))
	assert.Equal(t, runIDs(t, a), runIDs(t, b))
}

// TestReclaimKeepsAPushNotPublished: a pack a device pushed without
// publishing a segment since (a push on its own, or a sync cut off after
// its push step) is kept by another device's reclaim however old it is,
// so the device's next sync can name it; once that device has published,
// the pack goes by the object sets as any other.
func TestReclaimKeepsAPushNotPublished(t *testing.T) {
	srv, open := fakeTier(t)
	ctx := context.Background()
	a, b := open(), open()
	smallRuns(t, a, "chat-1", "r", 2)
	syncOK(t, a)
	syncOK(t, b)

	before := srv.Keys("wsstore", "team/")
	smallRuns(t, a, "chat-1", "late", 1)
	_, err := a.Remote.Push(ctx, a.DB) // as a sync cut off after its push
	require.NoError(t, err)
	var pushed []string
	for _, k := range srv.Keys("wsstore", "team/") {
		if !slices.Contains(before, k) {
			pushed = append(pushed, k)
		}
	}
	require.NotEmpty(t, pushed)
	// A month passes: what was there before the push is older still.
	for _, k := range before {
		srv.SetModified("wsstore", k, time.Now().Add(-31*24*time.Hour))
	}
	age := func() {
		for _, k := range pushed {
			srv.SetModified("wsstore", k, time.Now().Add(-30*24*time.Hour))
		}
	}
	age()
	there := func() (n int) {
		for _, k := range pushed {
			if _, ok := srv.Object("wsstore", k); ok {
				n++
			}
		}
		return n
	}

	rec, err := b.ReclaimRemote(ctx, remote.ReclaimOptions{}) // the default grace, 7 days
	require.NoError(t, err)
	assert.Zero(t, rec.Packs+rec.Indexes, "A has published no segment since it pushed them")
	assert.Equal(t, len(pushed), there())

	syncOK(t, a)
	rep := syncOK(t, b)
	assert.Equal(t, []string{"run late-00"}, runsOf(rep, rep.Added))
	_, err = b.Remote.Evict(ctx, b.DB)
	require.NoError(t, err)
	requireSame(t, contents(t, a), contents(t, b))
	fr, err := b.Fsck(ctx, nil)
	require.NoError(t, err)
	assert.Empty(t, fr.Problems)

	// Deleted and collected on both, and published in bases, which stand
	// for the segments that brought the run in, the pack goes.
	for _, st := range []*wsstore.Store{a, b} {
		_, err := st.Runs.CancelAndDeleteRun(ctx, "late-00")
		require.NoError(t, err)
		_, err = st.GC(ctx, wsstore.GCOptions{Grace: -1})
		require.NoError(t, err)
		_, err = st.SyncWith(ctx, wsstore.SyncOptions{Base: true})
		require.NoError(t, err)
	}
	age()
	// A segment written within a sync's longest time (LockTTL) after
	// the pack may hold an object set taken before the pack was recorded.
	devA, err := remote.Device(ctx, a.DB)
	require.NoError(t, err)
	segs := srv.Keys("wsstore", "team/sync/"+devA+"/")
	newest := segs[len(segs)-1]
	srv.SetModified("wsstore", newest, time.Now().Add(-30*24*time.Hour+30*time.Minute))
	rec, err = b.ReclaimRemote(ctx, remote.ReclaimOptions{})
	require.NoError(t, err)
	assert.Zero(t, rec.Packs, "A's newest segment is within an hour of the pack")
	srv.SetModified("wsstore", newest, time.Now())
	rec, err = b.ReclaimRemote(ctx, remote.ReclaimOptions{})
	require.NoError(t, err)
	assert.Positive(t, rec.Packs, "the late run's pack")
	assert.Less(t, there(), len(pushed))
}

// TestReclaimOwnPushes: a device that only pushes (never syncs) and
// reclaims its own tier gets back what it deleted and collected: its own
// records say what it uses, whatever segments it never wrote.
func TestReclaimOwnPushes(t *testing.T) {
	srv, open := fakeTier(t)
	ctx := context.Background()
	a := open()
	smallRuns(t, a, "chat-1", "r", 2)
	_, err := a.Remote.Push(ctx, a.DB)
	require.NoError(t, err)
	for _, id := range []string{"r-00", "r-01"} {
		_, err := a.Runs.CancelAndDeleteRun(ctx, id)
		require.NoError(t, err)
	}
	_, err = a.GC(ctx, wsstore.GCOptions{Grace: -1})
	require.NoError(t, err)
	for _, k := range srv.Keys("wsstore", "team/") {
		srv.SetModified("wsstore", k, time.Now().Add(-30*24*time.Hour))
	}
	rec, err := a.ReclaimRemote(ctx, remote.ReclaimOptions{})
	require.NoError(t, err)
	assert.Positive(t, rec.Packs, "the store's own deleted content is reclaimed")
}

// TestSyncReportsTheSegmentsSize: SegmentBytes is the length of the
// segment the sync uploaded (header, object set and archive), a base's
// and a delta's alike, not that of the archive in it.
func TestSyncReportsTheSegmentsSize(t *testing.T) {
	srv, open := fakeTier(t)
	a := open()
	for i := range 2 {
		smallRuns(t, a, "chat-a", fmt.Sprintf("run-%d", i), 2)
		rep := syncOK(t, a)
		assert.Equal(t, i == 0, rep.Base)
		seg, ok := srv.Object("wsstore", "team/"+rep.Published)
		require.True(t, ok, "segment %s on the object store", rep.Published)
		assert.Equal(t, int64(len(seg)), rep.SegmentBytes, "segment %s", rep.Published)
	}
}
