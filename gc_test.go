package wsstore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// t0 is when every test store starts.
var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// clock is a fake clock that moves only when told to, so the created time
// of every row a test writes is known.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// at returns a clock function stuck at t, for GCOptions.Now.
func at(t time.Time) func() time.Time { return func() time.Time { return t } }

// env is a store on a fake clock with helpers to fill it.
type env struct {
	t     *testing.T
	ctx   context.Context
	s     *wsstore.Store
	clock *clock
}

// newEnv opens a store that is fsck'ed when the test ends.
func newEnv(t *testing.T) *env {
	t.Helper()
	c := &clock{t: t0}
	return &env{t: t, ctx: context.Background(), clock: c, s: storetest.OpenStoreWith(t, wsstore.Options{Now: c.Now})}
}

// newCorruptibleEnv opens a store whose cleanup only closes it, for tests
// that damage it on purpose.
func newCorruptibleEnv(t *testing.T, opts wsstore.Options) *env {
	t.Helper()
	c := &clock{t: t0}
	opts.Now = c.Now
	s, err := wsstore.Open(context.Background(), t.TempDir(), opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return &env{t: t, ctx: context.Background(), clock: c, s: s}
}

func (e *env) create(chat, runID string) runs.Run {
	e.t.Helper()
	r, err := e.s.Runs.CreateRun(e.ctx, runs.CreateRequest{
		Chat:  runs.ChatKey{Kind: "character", StableChatID: chat},
		RunID: runID,
	})
	require.NoError(e.t, err)
	return r
}

func (e *env) write(runID, path string, content []byte) vfs.FileInfo {
	e.t.Helper()
	fi, err := e.s.Runs.Workspace(runID, runs.HostScope).Write(e.ctx, vfs.MustPath(path), content, vfs.WriteOptions{})
	require.NoError(e.t, err)
	return fi
}

// settle runs the re-encodings writes queued (the background step may
// have run some already), so the test sees the store as they leave it.
func (e *env) settle() {
	e.t.Helper()
	_, err := e.s.Blobs.Reencode(e.ctx, 0)
	require.NoError(e.t, err)
}

// drop cancels and deletes a run.
func (e *env) drop(runID string) {
	e.t.Helper()
	require.NoError(e.t, e.s.Runs.SetStatus(e.ctx, runID, runs.Cancelled, "test"))
	require.NoError(e.t, e.s.Runs.DeleteRun(e.ctx, runID))
}

func (e *env) gc(opt wsstore.GCOptions) wsstore.GCReport {
	e.t.Helper()
	rep, err := e.s.GC(e.ctx, opt)
	require.NoError(e.t, err)
	return rep
}

// collect removes all garbage now, so a test starts from a store holding
// only reachable rows (creating a run leaves a few intermediate trees).
func (e *env) collect() {
	e.t.Helper()
	e.gc(wsstore.GCOptions{Grace: -1, Now: e.later})
}

// later is a GC clock a second after the store's: with no grace, GC
// deletes only rows created before it starts.
func (e *env) later() time.Time { return e.clock.Now().Add(time.Second) }

func (e *env) count(table string) int {
	e.t.Helper()
	var n int
	require.NoError(e.t, e.s.DB.View(e.ctx, func(tx *index.Tx) error {
		return tx.GetContext(e.ctx, &n, `SELECT count(*) FROM `+table)
	}))
	return n
}

// counts returns the rows of the three object tables.
func (e *env) counts() wsstore.ObjectCounts {
	return wsstore.ObjectCounts{Blobs: e.count("blobs"), Chunks: e.count("chunks"), Trees: e.count("trees")}
}

func (e *env) has(h cas.Hash) bool {
	e.t.Helper()
	ok, err := e.s.Blobs.Has(e.ctx, h)
	require.NoError(e.t, err)
	return ok
}

// files reads every file of a workspace (live, or at checkpoint seq).
func (e *env) files(runID string, seq int64) map[string][]byte {
	e.t.Helper()
	ws := e.s.Runs.Workspace(runID, runs.HostScope)
	if seq > 0 {
		ws = e.s.Runs.WorkspaceAt(runID, seq, runs.HostScope)
	}
	infos, err := ws.List(e.ctx, vfs.Root(), 64)
	require.NoError(e.t, err)
	out := map[string][]byte{}
	for _, fi := range infos {
		if fi.Kind != vfs.KindFile {
			continue
		}
		res, err := ws.Read(e.ctx, fi.Path, vfs.ReadOptions{})
		require.NoError(e.t, err, "read %s at %d", fi.Path, seq)
		out[fi.Path.String()] = res.Content
	}
	return out
}

// requireReadable reads every file of the run's live workspace and of each
// of its checkpoints, and checks the live files hold want (paths outside
// want, such as input/, must merely be readable).
func (e *env) requireReadable(runID string, want map[string][]byte) {
	e.t.Helper()
	live := e.files(runID, 0)
	for p, b := range want {
		assert.True(e.t, bytes.Equal(b, live[p]), "%s of %s", p, runID)
	}
	cps, err := e.s.Checkpoints.List(e.ctx, runID)
	require.NoError(e.t, err)
	require.NotEmpty(e.t, cps)
	for _, cp := range cps {
		e.files(runID, cp.Seq)
	}
}

// random returns n pseudo-random (incompressible) bytes from seed.
func random(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := r.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}

// twoRuns fills one chat with two runs that write some identical and some
// unique files, and returns the live files of each.
func twoRuns(e *env) (a, b map[string][]byte) {
	e.create("chat-1", "run_a")
	e.create("chat-1", "run_b")
	a = map[string][]byte{
		"output/shared.md":   []byte("# Shared\nboth runs write this\n"),
		"output/notes/a.md":  []byte("only run a\n"),
		"scratch/shared.bin": random(1, 3000),
	}
	b = map[string][]byte{
		"output/shared.md":   a["output/shared.md"],
		"scratch/shared.bin": a["scratch/shared.bin"],
		"output/notes/b.md":  []byte("only run b\n"),
		"plan/b.bin":         random(2, 5000),
	}
	for _, run := range []struct {
		id    string
		files map[string][]byte
	}{{"run_a", a}, {"run_b", b}} {
		for _, p := range []string{"output/shared.md", "output/notes/a.md", "output/notes/b.md", "scratch/shared.bin", "plan/b.bin"} {
			if c, ok := run.files[p]; ok {
				e.write(run.id, p, c)
			}
		}
	}
	return a, b
}

func TestGCFreesDeletedRunKeepsShared(t *testing.T) {
	e := newEnv(t)
	a, b := twoRuns(e)
	e.collect()
	du, err := collectDU(e.ctx, e.s)
	require.NoError(t, err)
	var uniqueB int64
	for _, u := range du {
		if u.RunID == "run_b" {
			uniqueB = u.UniqueStoredBytes
		}
	}
	before := e.counts()
	e.drop("run_b")

	rep := e.gc(wsstore.GCOptions{Grace: -1, Now: e.later})

	// run_b's own blobs were output/notes/b.md and plan/b.bin; everything
	// else it held is run_a's too.
	assert.Equal(t, 2, rep.Freed.Blobs)
	assert.Zero(t, rep.Freed.Chunks)
	assert.Positive(t, rep.Freed.Trees)
	assert.Equal(t, uniqueB, rep.FreedBytes, "du's unique bytes are what deleting the run frees")
	assert.Zero(t, rep.Kept)
	assert.False(t, rep.DryRun)
	after := e.counts()
	assert.Equal(t, before.Blobs-2, after.Blobs)
	assert.Equal(t, before.Trees-rep.Freed.Trees, after.Trees)
	assert.Equal(t, wsstore.ObjectCounts{Blobs: after.Blobs, Chunks: after.Chunks, Trees: after.Trees}, rep.Reachable,
		"after a full collection every row is reachable")

	assert.False(t, e.has(cas.Sum(b["output/notes/b.md"])))
	assert.False(t, e.has(cas.Sum(b["plan/b.bin"])))
	for p, c := range a {
		assert.True(t, e.has(cas.Sum(c)), p)
	}
	e.requireReadable("run_a", a)

	again := e.gc(wsstore.GCOptions{Grace: -1, Now: e.later})
	assert.Zero(t, again.Freed, "a second collection finds nothing")
	assert.Equal(t, rep.Reachable, again.Reachable)
}

func TestGCChunks(t *testing.T) {
	e := newEnv(t)
	e.create("chat-1", "run_a")
	e.create("chat-1", "run_b")
	// Two large files with a common 3 MB prefix: content-defined chunking
	// cuts both the same way there, so they share their first chunks.
	prefix := random(10, 3<<20)
	fa := append(append([]byte{}, prefix...), random(11, 2<<20)...)
	fb := append(append([]byte{}, prefix...), random(12, 2<<20)...)
	e.write("run_a", "output/a.bin", fa)
	e.write("run_b", "output/b.bin", fb)
	e.collect()
	info, err := e.s.Blobs.Stat(e.ctx, cas.Sum(fb))
	require.NoError(t, err)
	require.Equal(t, cas.CodecChunked, info.Codec)
	chunksBefore := e.count("chunks")
	e.drop("run_b")

	rep := e.gc(wsstore.GCOptions{Grace: -1, Now: e.later})

	assert.Equal(t, 1, rep.Freed.Blobs)
	assert.Positive(t, rep.Freed.Chunks)
	assert.Less(t, rep.Freed.Chunks, info.Chunks, "the chunks of the common prefix stay")
	assert.Equal(t, chunksBefore-rep.Freed.Chunks, e.count("chunks"))
	assert.Zero(t, e.count("blob_chunks WHERE blob NOT IN (SELECT hash FROM blobs)"))
	assert.Greater(t, rep.FreedBytes, int64(2<<20), "the unique tail is incompressible")
	e.requireReadable("run_a", map[string][]byte{"output/a.bin": fa})
}

// TestGCGrace collects a deleted run's garbage at various ages and graces.
func TestGCGrace(t *testing.T) {
	tests := []struct {
		name      string
		age       time.Duration // since the garbage was last written
		grace     time.Duration
		dryRun    bool
		wantFreed bool
	}{
		{name: "Freed/NoGrace", age: time.Nanosecond, grace: -1, wantFreed: true},
		{name: "KeptYoung/NoGraceSameInstant", grace: -1},
		{name: "KeptYoung/DefaultGrace", age: 5 * time.Minute},
		{name: "KeptYoung/JustUnderDefaultGrace", age: wsstore.DefaultGCGrace - time.Nanosecond},
		{name: "Freed/OlderThanDefaultGrace", age: wsstore.DefaultGCGrace + time.Second, wantFreed: true},
		{name: "KeptYoung/LongGrace", age: time.Hour, grace: 2 * time.Hour},
		{name: "Freed/ShortGrace", age: time.Hour, grace: time.Minute, wantFreed: true},
		{name: "DryRun/DeletesNothing", age: time.Second, grace: -1, dryRun: true, wantFreed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			twoRuns(e)
			e.collect()
			e.drop("run_b")
			before := e.counts()
			// What a collection frees once all the garbage is old: a dry
			// run a second after everything was written.
			now := t0.Add(tt.age)
			plan := e.gc(wsstore.GCOptions{DryRun: true, Grace: -1, Now: at(t0.Add(time.Second))})
			require.Equal(t, 2, plan.Freed.Blobs)

			rep := e.gc(wsstore.GCOptions{DryRun: tt.dryRun, Grace: tt.grace, Now: at(now)})

			assert.Equal(t, tt.dryRun, rep.DryRun)
			if tt.wantFreed {
				assert.Equal(t, plan.Freed, rep.Freed)
				assert.Equal(t, plan.FreedBytes, rep.FreedBytes)
				assert.Zero(t, rep.Kept)
			} else {
				assert.Zero(t, rep.Freed)
				assert.Zero(t, rep.FreedBytes)
				assert.Equal(t, plan.Freed, rep.Kept, "the young garbage is kept")
			}
			want := before
			if tt.wantFreed && !tt.dryRun {
				want = wsstore.ObjectCounts{Blobs: before.Blobs - plan.Freed.Blobs, Chunks: before.Chunks - plan.Freed.Chunks,
					Trees: before.Trees - plan.Freed.Trees}
			}
			assert.Equal(t, want, e.counts())
		})
	}
}

// TestGCConcurrentWriter shows GC keeps what writers put or reference while
// it runs. The writes happen between mark and sweep (from the Progress
// call that starts the sweep, made before its transaction begins), on a
// store clock far behind GC's, so the rows' created times alone would not
// save them.
func TestGCConcurrentWriter(t *testing.T) {
	garbage := []byte("only run b\n") // run_b's output/notes/b.md
	tests := []struct {
		name     string
		write    func(e *env) // between mark and sweep
		keptBlob bool         // the blob counts as kept young rather than reachable
	}{
		{name: "Kept/ReferencedAgain", write: func(e *env) {
			// A live run writes content that is garbage in the snapshot.
			e.write("run_a", "output/again.md", garbage)
		}},
		{name: "Kept/PutAgain", keptBlob: true, write: func(e *env) {
			// A writer stores the content again on its own, with a clock
			// that is ahead, and will reference it in a later transaction.
			e.clock.Set(t0.Add(3 * time.Hour))
			_, err := e.s.Blobs.PutBytes(e.ctx, nil, garbage)
			require.NoError(e.t, err)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			twoRuns(e)
			e.collect()
			e.drop("run_b")
			var phases []string
			progress := func(phase string, done, total int) {
				if done == 0 {
					phases = append(phases, phase)
				}
				if phase == "sweep" && done == 0 {
					tt.write(e)
				}
			}

			rep := e.gc(wsstore.GCOptions{Grace: -1, Now: at(t0.Add(2 * time.Hour)), Progress: progress})

			assert.Equal(t, []string{"mark", "sweep"}, phases)
			assert.True(t, e.has(cas.Sum(garbage)))
			assert.Equal(t, 1, rep.Freed.Blobs, "plan/b.bin is still freed")
			if tt.keptBlob {
				assert.Equal(t, 1, rep.Kept.Blobs)
			} else {
				assert.Zero(t, rep.Kept.Blobs)
			}
			e.requireReadable("run_a", nil)
			if tt.keptBlob {
				// Referenced within the grace, it stays for good.
				e.write("run_a", "output/again.md", garbage)
				e.gc(wsstore.GCOptions{Now: at(t0.Add(4 * time.Hour))})
			}
			got, err := e.s.Blobs.ReadAll(e.ctx, cas.Sum(garbage))
			require.NoError(t, err)
			assert.Equal(t, garbage, got)
		})
	}
}

// TestGCKeepsUnreferencedPutWithinGrace: content stored on its own (as a
// large Put streams it) is kept under the grace until its tree commits.
func TestGCKeepsUnreferencedPutWithinGrace(t *testing.T) {
	e := newEnv(t)
	e.create("chat-1", "run_a")
	e.collect()
	content := []byte("stored first, referenced later")
	h, err := e.s.Blobs.PutBytes(e.ctx, nil, content)
	require.NoError(t, err)

	rep := e.gc(wsstore.GCOptions{Now: at(t0.Add(time.Minute))})
	assert.Equal(t, wsstore.ObjectCounts{Blobs: 1}, rep.Kept)
	assert.Zero(t, rep.Freed)
	assert.True(t, e.has(h))

	e.clock.Set(t0.Add(10 * time.Minute))
	e.write("run_a", "output/late.md", content)
	rep = e.gc(wsstore.GCOptions{Now: at(t0.Add(time.Hour))})
	assert.Zero(t, rep.Freed.Blobs)
	assert.True(t, e.has(h))

	_, err = e.s.Blobs.PutBytes(e.ctx, nil, []byte("never referenced"))
	require.NoError(t, err)
	rep = e.gc(wsstore.GCOptions{Now: at(t0.Add(2 * time.Hour))})
	assert.Equal(t, 1, rep.Freed.Blobs, "past the grace, unreferenced content goes")
}

func TestGCRefusesMissingReachableTree(t *testing.T) {
	e := newCorruptibleEnv(t, wsstore.Options{})
	twoRuns(e)
	e.drop("run_b")
	out, err := e.s.Runs.Workspace("run_a", runs.HostScope).Stat(e.ctx, vfs.MustPath("output"))
	require.NoError(t, err)
	require.NoError(t, e.s.DB.Update(e.ctx, func(tx *index.Tx) error {
		_, err := tx.ExecContext(e.ctx, `DELETE FROM trees WHERE hash = ?`, out.Hash)
		return err
	}))
	before := e.counts()

	_, err = e.s.GC(e.ctx, wsstore.GCOptions{Grace: -1})

	require.Error(t, err)
	assert.True(t, wserr.Is(err, wserr.Corrupt), "%v", err)
	assert.Contains(t, err.Error(), out.Hash.String())
	assert.Equal(t, before, e.counts(), "nothing deleted")
}

func TestGCReportJSON(t *testing.T) {
	b, err := json.Marshal(wsstore.GCReport{DryRun: true, Freed: wsstore.ObjectCounts{Blobs: 1}, FreedBytes: 7})
	require.NoError(t, err)
	assert.JSONEq(t, `{"dryRun":true,"reachable":{"blobs":0,"chunks":0,"trees":0},
		"freed":{"blobs":1,"chunks":0,"trees":0},"freedBytes":7,"keptYoung":{"blobs":0,"chunks":0,"trees":0}}`, string(b))
}

// TestGCWithConcurrentWriters collects in a loop, with no grace, while a
// run rewrites files whose contents recur (so content that was garbage a
// moment ago is referenced again) and takes no checkpoints (so every
// overwritten version is garbage at once). Whatever the interleaving, no
// live file may lose its content.
func TestGCWithConcurrentWriters(t *testing.T) {
	s := storetest.OpenStore(t)
	ctx := context.Background()
	createManual(t, s, "c", "run_a")
	ws := s.Runs.Workspace("run_a", runs.HostScope)

	const writes, files = 300, 4
	content := func(i int) []byte { return []byte(fmt.Sprintf("version %d\n", i%7)) }
	done := make(chan struct{})
	var writeErr error
	go func() {
		defer close(done)
		for i := range writes {
			p := vfs.MustPath(fmt.Sprintf("output/d%d/f%d.md", i%2, i%files))
			if _, err := ws.Write(ctx, p, content(i), vfs.WriteOptions{}); err != nil {
				writeErr = err
				return
			}
		}
	}()
	var freed int
	for collecting := true; collecting; {
		select {
		case <-done:
			collecting = false
		default:
		}
		rep, err := s.GC(ctx, wsstore.GCOptions{Grace: -1})
		require.NoError(t, err)
		freed += rep.Freed.Blobs + rep.Freed.Trees
	}
	require.NoError(t, writeErr)
	t.Logf("freed %d objects while writing", freed)

	for i := writes - files; i < writes; i++ {
		p := vfs.MustPath(fmt.Sprintf("output/d%d/f%d.md", i%2, i%files))
		res, err := ws.Read(ctx, p, vfs.ReadOptions{})
		require.NoError(t, err)
		assert.Equal(t, content(i), res.Content, "%s", p)
	}
}

// TestGCKeepsWhatYoungGarbageReferences: an unreachable row within the
// grace keeps everything it references, however old, so no row that
// survives a collection names a row it deleted.
func TestGCKeepsWhatYoungGarbageReferences(t *testing.T) {
	e := newEnv(t)
	createManual(t, e.s, "c", "run_a")
	old := []byte("written at t0")
	e.write("run_a", "output/old.md", old)
	e.clock.Set(t0.Add(time.Hour))
	e.write("run_a", "output/young.md", []byte("written an hour later"))
	e.drop("run_a") // the young root and output/ tree still name old.md's blob

	rep := e.gc(wsstore.GCOptions{Now: at(t0.Add(time.Hour + time.Minute))})

	assert.True(t, e.has(cas.Sum(old)))
	assert.Zero(t, rep.Freed.Blobs)
	assert.Equal(t, 3, rep.Kept.Blobs, "young.md's, and old.md's and the input snapshot's that the young root lists")
	// The young root is patch 2 of the root's history, made against the
	// run's first root (patch 1, old.md's root, rests on it too); the young
	// output/ is patch 1 on the first output/. Old rows a kept patch rests
	// on stay with it.
	assert.Equal(t, 1, rep.Freed.Trees, "old.md's root: old, and nothing young rests on it")
	assert.Equal(t, 5, rep.Kept.Trees, "the young root and output/, the first output/, the run's first root and its input/")

	rep = e.gc(wsstore.GCOptions{Now: at(t0.Add(2 * time.Hour))})
	assert.Zero(t, rep.Kept)
	assert.False(t, e.has(cas.Sum(old)))
}

// TestGCKeepsPatchBases: trees no root reaches but that a reachable tree is
// stored as a patch against are kept, the rest go, and the workspace reads
// back from a cold cache afterwards; a damaged base stops gc.
func TestGCKeepsPatchBases(t *testing.T) {
	dir := t.TempDir()
	c := &clock{t: t0}
	s, err := wsstore.Open(context.Background(), dir, wsstore.Options{Now: c.Now})
	require.NoError(t, err)
	e := &env{t: t, ctx: context.Background(), clock: c, s: s}
	createManual(t, s, "c", "run_a")
	want := map[string][]byte{}
	for i := range 40 {
		p := fmt.Sprintf("output/f%d.md", i%7)
		want[p] = fmt.Appendf(nil, "version %d", i)
		e.write("run_a", p, want[p])
	}
	var bases int
	require.NoError(t, s.DB.View(e.ctx, func(tx *index.Tx) error {
		return tx.GetContext(e.ctx, &bases, `SELECT count(DISTINCT base) FROM trees WHERE base IS NOT NULL`)
	}))
	require.Positive(t, bases)

	rep := e.gc(wsstore.GCOptions{Grace: -1, Now: e.later})

	assert.Positive(t, rep.Freed.Trees, "roots of earlier writes that no patch rests on")
	var dangling int
	require.NoError(t, s.DB.View(e.ctx, func(tx *index.Tx) error {
		return tx.GetContext(e.ctx, &dangling, `SELECT count(*) FROM trees t WHERE base IS NOT NULL
			AND NOT EXISTS (SELECT 1 FROM trees b WHERE b.hash = t.base)`)
	}))
	assert.Zero(t, dangling, "every patch's base is still stored")
	// A base is kept for its bytes only: the earlier versions of the
	// files its entries name are freed.
	liveBlobs := map[cas.Hash]bool{}
	for _, b := range e.files("run_a", 0) {
		liveBlobs[cas.Sum(b)] = true
	}
	var stored []cas.Hash
	require.NoError(t, s.DB.View(e.ctx, func(tx *index.Tx) error {
		return tx.SelectContext(e.ctx, &stored, `SELECT hash FROM blobs`)
	}))
	assert.Len(t, stored, len(liveBlobs))
	for _, h := range stored {
		assert.True(t, liveBlobs[h], "blob %s is not a live file", h.Short())
	}
	require.NoError(t, s.Close())

	s, err = wsstore.Open(context.Background(), dir, wsstore.Options{Now: c.Now})
	require.NoError(t, err)
	defer s.Close()
	e.s = s
	live := e.files("run_a", 0)
	for p, b := range want {
		assert.Equal(t, string(b), string(live[p]), p)
	}
	fsck, err := s.Fsck(e.ctx, nil)
	require.NoError(t, err)
	assert.True(t, fsck.OK(), "%v", fsck.Problems)

	// Damage the base the live root rests on: gc must refuse, deleting
	// nothing, and name it.
	run, err := s.Runs.Run(e.ctx, "run_a")
	require.NoError(t, err)
	var base cas.Hash
	require.NoError(t, s.DB.View(e.ctx, func(tx *index.Tx) error {
		return tx.GetContext(e.ctx, &base, `SELECT base FROM trees WHERE hash = ?`, run.Root)
	}))
	require.False(t, base.IsZero())
	require.NoError(t, s.DB.Update(e.ctx, func(tx *index.Tx) error {
		_, err := tx.ExecContext(e.ctx, `DELETE FROM trees WHERE hash = ?`, base)
		return err
	}))
	before := e.counts()
	_, err = s.GC(e.ctx, wsstore.GCOptions{Grace: -1})
	require.Error(t, err)
	assert.True(t, wserr.Is(err, wserr.Corrupt), "%v", err)
	assert.Contains(t, err.Error(), base.String())
	assert.Equal(t, before, e.counts(), "nothing deleted")
}

// TestGCSweepFollowsABaseGraftedMeanwhile: a tree gc marked only as the
// base of a patch (its entries not needed) is grafted into a live root
// between mark and sweep. Sweep must then keep what the tree names: the
// store stays sound.
func TestGCSweepFollowsABaseGraftedMeanwhile(t *testing.T) {
	e := newEnv(t)
	createManual(t, e.s, "c", "run_a")
	for i := range 8 {
		e.write("run_a", fmt.Sprintf("output/f%d.md", i), fmt.Appendf(nil, "file %d", i))
	}
	for i := range 12 {
		e.write("run_a", "output/a.md", fmt.Appendf(nil, "unrelated content number %d %d", i, i*7919))
	}
	run, err := e.s.Runs.Run(e.ctx, "run_a")
	require.NoError(t, err)
	out, err := e.s.Trees.Lookup(e.ctx, nil, run.Root, vfs.MustPath("output"))
	require.NoError(t, err)
	var base cas.Hash
	require.NoError(t, e.s.DB.View(e.ctx, func(tx *index.Tx) error {
		return tx.GetContext(e.ctx, &base, `SELECT base FROM trees WHERE hash = ?`, out.Hash)
	}))
	require.False(t, base.IsZero(), "output/ is a patch")

	e.clock.Set(t0.Add(time.Hour))
	grafted := false
	progress := func(phase string, done, total int) {
		if phase != "sweep" || grafted {
			return
		}
		grafted = true
		// A writer restores the older output/ next to the live one.
		require.NoError(t, e.s.DB.Update(e.ctx, func(tx *index.Tx) error {
			ge := vfs.Entry{Kind: vfs.KindDir, Hash: base}
			root, err := e.s.Trees.Set(e.ctx, tx, run.Root, vfs.MustPath("restored"), &ge)
			if err != nil {
				return err
			}
			_, err = tx.ExecContext(e.ctx, `UPDATE runs SET root = ? WHERE id = 'run_a'`, root)
			return err
		}))
	}
	_, err = e.s.GC(e.ctx, wsstore.GCOptions{Grace: 30 * time.Minute, Now: at(t0.Add(time.Hour)), Progress: progress})
	require.NoError(t, err)
	require.True(t, grafted)
	rep, err := e.s.Fsck(e.ctx, nil)
	require.NoError(t, err)
	assert.True(t, rep.OK(), "fsck after gc: %v", rep.Problems)
	for p, b := range e.files("run_a", 0) {
		assert.NotEmpty(t, b, p)
	}
}

// createManual creates a run that takes checkpoints only when asked, so
// that every version it overwrites is garbage at once.
func createManual(t *testing.T, s *wsstore.Store, chat, runID string) {
	t.Helper()
	off := false
	prof := runs.DefaultProfile()
	prof.AutoCheckpoint = &off
	_, err := s.Runs.CreateRun(context.Background(), runs.CreateRequest{
		Chat: runs.ChatKey{Kind: "character", StableChatID: chat}, RunID: runID, Profile: &prof,
	})
	require.NoError(t, err)
}
