package wsstore_test

// Stress tests of one store used from many goroutines at once, as a
// desktop host embeds it: run them under the race detector
// (go test -race -run 'TestStress' .).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/actors"
	"github.com/wsstore/wsstore/archive"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/checkpoint"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// acked is a change the store acknowledged: the file's content at the
// checkpoint it reported.
type acked struct {
	run, cp, path string
	content       []byte // whole content expected (write, apply)
	suffix        []byte // expected ending (append)
	op            string
}

type errLog struct {
	mu   sync.Mutex
	errs []string
}

// check records err unless it carries a code other than store.internal
// and is one of ok.
func (l *errLog) check(op string, err error, ok ...wserr.Code) {
	if err == nil {
		return
	}
	var e *wserr.Error
	if !errors.As(err, &e) {
		l.add("%s: uncoded error %T: %v", op, err, err)
		return
	}
	for _, c := range ok {
		if e.Code == c {
			return
		}
	}
	l.add("%s: unexpected %s: %v", op, e.Code, err)
}

func (l *errLog) add(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, fmt.Sprintf(format, args...))
}

// TestStressMixedOps mixes, on one store from many goroutines, writes,
// appends, patches and applies to the same run and to others, checkpoints,
// rollbacks, diffs, run ends and deletions, chat deletion, actor uploads
// and gc, store gc (no grace), reclaim, vacuum and export, then checks
// every acknowledged change at the checkpoint it reported, and fsck.
func TestStressMixedOps(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := wsstore.Open(ctx, dir, wsstore.Options{})
	require.NoError(t, err)
	defer st.Close()

	const nRuns = 3
	var live []string
	for i := range nRuns {
		r, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "chat", StableChatID: fmt.Sprintf("c%d", i%2)}, RunID: fmt.Sprintf("live%d", i)})
		require.NoError(t, err)
		live = append(live, r.ID)
		ws := st.Runs.Workspace(r.ID, runs.ModelScope)
		_, err = ws.Write(ctx, vfs.MustPath("output/shared.log"), []byte("start\n"), vfs.WriteOptions{})
		require.NoError(t, err)
		_, err = ws.Write(ctx, vfs.MustPath("output/patch.md"), []byte("alpha beta gamma\n"), vfs.WriteOptions{})
		require.NoError(t, err)
	}
	// Runs and a chat that are ended or deleted while written to.
	var doomed []string
	for i := range 4 {
		chat := "doomed"
		if i%2 == 1 {
			chat = "doomed2"
		}
		r, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "chat", StableChatID: chat}, RunID: fmt.Sprintf("doomed%d", i)})
		require.NoError(t, err)
		doomed = append(doomed, r.ID)
	}

	var (
		mu   sync.Mutex
		acks []acked
		rbs  int
	)
	record := func(a acked) {
		mu.Lock()
		acks = append(acks, a)
		mu.Unlock()
	}
	var log errLog
	var progress atomic.Int64 // writer steps taken
	var wg sync.WaitGroup

	benign := []wserr.Code{wserr.NotFound, wserr.RunNotFound, wserr.CheckpointNotFound, wserr.InvalidState, wserr.FileNotFound, wserr.PatchOldStringNotFound,
		wserr.PatchOldStringNotUnique, wserr.WriteStaleFile}

	// Writers.
	for g := range 6 {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(g), 1))
			for i := 0; i < 40; i++ {
				progress.Add(1)
				run := live[rnd.IntN(len(live))]
				if rnd.IntN(5) == 0 {
					run = doomed[rnd.IntN(len(doomed))]
				}
				ws := st.Runs.Workspace(run, runs.ModelScope)
				switch rnd.IntN(5) {
				case 0:
					p := fmt.Sprintf("output/g%d/f%d.txt", g, i)
					c := []byte(fmt.Sprintf("%s %d %d %s\n", run, g, i, strings.Repeat("x", rnd.IntN(3000))))
					fi, err := ws.Write(ctx, vfs.MustPath(p), c, vfs.WriteOptions{})
					log.check("write", err, benign...)
					if err == nil {
						record(acked{run: run, cp: fi.Checkpoint, path: p, content: c, op: "write"})
					}
				case 1:
					line := []byte(fmt.Sprintf("g%d i%d\n", g, i))
					fi, err := ws.Write(ctx, vfs.MustPath("output/shared.log"), line, vfs.WriteOptions{Mode: vfs.Append})
					log.check("append", err, benign...)
					if err == nil {
						record(acked{run: run, cp: fi.Checkpoint, path: "output/shared.log", suffix: line, op: "append"})
					}
				case 2:
					from, to := "beta", fmt.Sprintf("beta%d_%d", g, i)
					fi, err := ws.Patch(ctx, vfs.MustPath("output/patch.md"), from, to, vfs.PatchOptions{})
					log.check("patch", err, benign...)
					if err == nil {
						_ = fi
					}
				case 3:
					var edits []runs.Edit
					for k := range 3 {
						edits = append(edits, runs.Edit{Path: vfs.MustPath(fmt.Sprintf("output/apply/g%d_%d_%d.txt", g, i, k)), Content: []byte(fmt.Sprintf("apply %s %d %d %d", run, g, i, k))})
					}
					fis, err := ws.Apply(ctx, edits)
					log.check("apply", err, benign...)
					if err == nil {
						for k, fi := range fis {
							record(acked{run: run, cp: fi.Checkpoint, path: edits[k].Path.String(), content: edits[k].Content, op: "apply"})
						}
					}
				case 4:
					_, err := ws.Read(ctx, vfs.MustPath("output/shared.log"), vfs.ReadOptions{})
					log.check("read", err, benign...)
				}
			}
		})
	}
	// Checkpoints, rollbacks and diffs.
	for g := range 2 {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(g), 2))
			for i := 0; i < 30; i++ {
				run := live[rnd.IntN(len(live))]
				cps, err := st.Checkpoints.List(ctx, run)
				log.check("list checkpoints", err)
				if err != nil || len(cps) == 0 {
					continue
				}
				switch rnd.IntN(3) {
				case 0:
					_, err := st.Runs.Checkpoint(ctx, run, "explicit")
					log.check("checkpoint", err, benign...)
				case 1:
					cp := cps[rnd.IntN(len(cps))]
					r, err := st.Runs.Rollback(ctx, run, cp.Seq, runs.RollbackOptions{})
					log.check("rollback", err, benign...)
					if err == nil {
						mu.Lock()
						rbs++
						mu.Unlock()
						if r.Root != cp.Root || r.HeadCheckpoint != cp.Seq {
							log.add("rollback of %s to %s: root %s head %d, want %s %d", run, cp.ID, r.Root.Short(), r.HeadCheckpoint, cp.Root.Short(), cp.Seq)
						}
					}
				case 2:
					a, b := cps[rnd.IntN(len(cps))], cps[rnd.IntN(len(cps))]
					_, err := st.Runs.Diff(ctx, run, a.Seq, b.Seq, runs.DiffOptions{})
					log.check("diff", err, benign...)
					_, err = st.Runs.Diff(ctx, run, a.Seq, runs.Live, runs.DiffOptions{})
					log.check("diff live", err, benign...)
				}
			}
		})
	}
	// Ends and deletions of the doomed runs, chat deletion.
	// They come while the writers are at it: each waits for a share of
	// the writers' steps.
	waitFor := func(n int64) {
		for progress.Load() < n {
			time.Sleep(time.Millisecond)
		}
	}
	wg.Go(func() {
		waitFor(30)
		_, err := st.Runs.Finish(ctx, doomed[0])
		log.check("finish", err, benign...)
		waitFor(60)
		err = st.Runs.SetStatus(ctx, doomed[1], runs.Cancelled, "stress")
		log.check("cancel", err, benign...)
		waitFor(90)
		_, err = st.Runs.CancelAndDeleteRun(ctx, doomed[2])
		log.check("cancel+delete", err, benign...)
		waitFor(120)
		err = st.Runs.DeleteRun(ctx, doomed[0])
		log.check("delete", err, benign...)
		waitFor(150)
		_, err = st.Runs.DeleteChats(ctx, []runs.ChatKey{{Kind: "chat", StableChatID: "doomed2"}}, true)
		log.check("delete chats", err, benign...)
	})
	// Actors.
	wg.Go(func() {
		rnd := rand.New(rand.NewPCG(9, 9))
		for i := 0; i < 30; i++ {
			actor := fmt.Sprintf("a%d", rnd.IntN(2))
			switch rnd.IntN(4) {
			case 0, 1:
				_, err := st.Actors.Upload(ctx, actor, fmt.Sprintf("docs/%d.md", rnd.IntN(5)), strings.NewReader(fmt.Sprintf("v%d %s", i, strings.Repeat("y", rnd.IntN(2000)))))
				log.check("actor upload", err, benign...)
			case 2:
				_, err := st.Actors.Delete(ctx, actor, fmt.Sprintf("docs/%d.md", rnd.IntN(5)))
				log.check("actor delete", err, benign...)
			case 3:
				_, _, err := st.ActorGC(ctx, actors.GCOptions{KeepVersions: 1}, wsstore.GCOptions{Grace: -1})
				log.check("actor gc", err, benign...)
			}
		}
	})
	// Maintenance.
	var exports []string
	exportDir := t.TempDir()
	wg.Go(func() {
		for i := 0; i < 8; i++ {
			switch i % 4 {
			case 0:
				_, err := st.GC(ctx, wsstore.GCOptions{Grace: -1})
				log.check("gc", err)
			case 1:
				_, err := st.Reclaim(ctx)
				log.check("reclaim", err)
			case 2:
				_, err := st.Vacuum(ctx)
				log.check("vacuum", err)
			case 3:
				p := filepath.Join(exportDir, fmt.Sprintf("e%d.wsar", i))
				_, err := st.ExportFile(ctx, p, archive.Scope{All: true}, archive.Options{})
				// An export is no snapshot: a run deleted, or objects the
				// actor gc beside it collects, while it is written make it
				// store.conflict ("export again", as documented). What it
				// wrote otherwise is checked below, and so is an export
				// once the store is still.
				log.check("export", err, wserr.Conflict)
				if err == nil {
					exports = append(exports, p)
				}
			}
		}
	})

	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(90 * time.Second):
		buf := make([]byte, 1<<20)
		n := runtime.Stack(buf, true)
		t.Fatalf("hang:\n%s", buf[:n])
	}
	for _, e := range log.errs {
		t.Error(e)
	}
	t.Logf("%d acknowledged changes, %d rollbacks, %d exports", len(acks), rbs, len(exports))

	// Every acknowledged change reads at the checkpoint it reported.
	gone := map[string]bool{}
	cpRoots := map[string]map[string]cas.Hash{}
	for _, a := range acks {
		if _, ok := cpRoots[a.run]; ok || gone[a.run] {
			continue
		}
		if _, err := st.Runs.Run(ctx, a.run); wserr.Is(err, wserr.RunNotFound) {
			gone[a.run] = true
			continue
		}
		cps, err := st.Checkpoints.List(ctx, a.run)
		require.NoError(t, err)
		m := map[string]cas.Hash{}
		for _, c := range cps {
			m[c.ID] = c.Root
		}
		cpRoots[a.run] = m
	}
	checked := 0
	for _, a := range acks {
		if gone[a.run] {
			continue
		}
		if a.cp == "" {
			t.Errorf("%s of %s in %s: no checkpoint reported", a.op, a.path, a.run)
			continue
		}
		root, ok := cpRoots[a.run][a.cp]
		if !ok {
			t.Errorf("%s of %s in %s: checkpoint %s is gone", a.op, a.path, a.run, a.cp)
			continue
		}
		b, err := fs.ReadFile(st.Trees.FS(ctx, root), a.path)
		if !assert.NoError(t, err, "%s of %s in %s at %s", a.op, a.path, a.run, a.cp) {
			continue
		}
		checked++
		if a.content != nil {
			assert.Equal(t, a.content, b, "%s of %s in %s at %s", a.op, a.path, a.run, a.cp)
		} else {
			assert.True(t, bytes.HasSuffix(b, a.suffix), "%s of %s in %s at %s: %q does not end in %q", a.op, a.path, a.run, a.cp, b, a.suffix)
		}
	}
	t.Logf("%d checked", checked)

	// A live run's root is its head checkpoint's: a rollback racing a
	// write leaves one or the other, never a tree that is neither.
	for _, id := range live {
		run, err := st.Runs.Run(ctx, id)
		require.NoError(t, err)
		head, ok := cpRoots[id][checkpoint.ID(run.HeadCheckpoint)]
		if !ok {
			cps, err := st.Checkpoints.List(ctx, id)
			require.NoError(t, err)
			for _, c := range cps {
				if c.Seq == run.HeadCheckpoint {
					head, ok = c.Root, true
				}
			}
		}
		if assert.True(t, ok, "head checkpoint %d of %s", run.HeadCheckpoint, id) {
			assert.Equal(t, head, run.Root, "live root of %s", id)
		}
	}

	rep, err := st.Fsck(ctx, nil)
	require.NoError(t, err)
	assert.Empty(t, rep.Problems)

	still := filepath.Join(exportDir, "still.wsar")
	_, err = st.ExportFile(ctx, still, archive.Scope{All: true}, archive.Options{})
	require.NoError(t, err, "an export of the store once still")
	exports = append(exports, still)

	// Each export imports into a new store, which is sound.
	for _, p := range exports {
		d := t.TempDir()
		other, err := wsstore.Open(ctx, d, wsstore.Options{})
		require.NoError(t, err)
		_, err = other.ImportFile(ctx, p, archive.Options{})
		assert.NoError(t, err, "import %s", p)
		rep, err := other.Fsck(ctx, nil)
		require.NoError(t, err)
		assert.Empty(t, rep.Problems, "import of %s", p)
		require.NoError(t, other.Close())
	}
}

// TestStressAppendsAndHead: appends to one file from many goroutines all
// land once each, and the run's live root is its head checkpoint's root
// after rollbacks raced them.
func TestStressAppendsAndHead(t *testing.T) {
	ctx := context.Background()
	st, err := wsstore.Open(ctx, t.TempDir(), wsstore.Options{})
	require.NoError(t, err)
	defer st.Close()
	r, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "chat", StableChatID: "c"}, RunID: "a"})
	require.NoError(t, err)
	ws := st.Runs.Workspace(r.ID, runs.ModelScope)
	p := vfs.MustPath("output/log.txt")
	var log errLog
	var mu sync.Mutex
	var lines []string
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 25 {
				line := fmt.Sprintf("g%d-%d\n", g, i)
				var err error
				if i%3 == 0 {
					_, err = ws.Apply(ctx, []runs.Edit{{Path: vfs.MustPath(fmt.Sprintf("output/x%d.txt", g)), Content: []byte(line)}})
					log.check("apply", err)
					continue
				}
				_, err = ws.Write(ctx, p, []byte(line), vfs.WriteOptions{Mode: vfs.Append})
				log.check("append", err)
				if err == nil {
					mu.Lock()
					lines = append(lines, line)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	for _, e := range log.errs {
		t.Error(e)
	}
	res, err := ws.Read(ctx, p, vfs.ReadOptions{})
	require.NoError(t, err)
	for _, l := range lines {
		assert.Equal(t, 1, strings.Count(string(res.Content), l), "line %q", l)
	}
	assert.Len(t, res.Content, len(strings.Join(lines, "")))

	// Rollbacks racing writes: the live root is always one checkpoint's.
	cps, err := st.Checkpoints.List(ctx, r.ID)
	require.NoError(t, err)
	for g := range 4 {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(g), 7))
			for i := range 25 {
				if g%2 == 0 {
					cp := cps[rnd.IntN(len(cps))]
					_, err := st.Runs.Rollback(ctx, r.ID, cp.Seq, runs.RollbackOptions{})
					log.check("rollback", err)
				} else {
					_, err := ws.Write(ctx, vfs.MustPath(fmt.Sprintf("output/r%d.txt", g)), []byte(fmt.Sprint(i)), vfs.WriteOptions{})
					log.check("write", err)
				}
			}
		})
	}
	wg.Wait()
	for _, e := range log.errs {
		t.Error(e)
	}
	run, err := st.Runs.Run(ctx, r.ID)
	require.NoError(t, err)
	all, err := st.Checkpoints.List(ctx, r.ID)
	require.NoError(t, err)
	for _, c := range all {
		if c.Seq == run.HeadCheckpoint {
			assert.Equal(t, c.Root, run.Root, "live root is the head checkpoint's")
		}
	}
	rep, err := st.Fsck(ctx, nil)
	require.NoError(t, err)
	assert.Empty(t, rep.Problems)
}

// TestStressCloseInFlight: Close while every kind of call is in flight;
// each call succeeds or fails coded (store.closed), none hangs or panics,
// and no goroutine of the store outlives Close.
func TestStressCloseInFlight(t *testing.T) {
	ctx := context.Background()
	before := runtime.NumGoroutine()
	for round := range 6 {
		dir := t.TempDir()
		st, err := wsstore.Open(ctx, dir, wsstore.Options{})
		require.NoError(t, err)
		r, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "chat", StableChatID: "c"}, RunID: "a"})
		require.NoError(t, err)
		ws := st.Runs.Workspace(r.ID, runs.ModelScope)
		_, err = ws.Write(ctx, vfs.MustPath("output/a.txt"), []byte("a\n"), vfs.WriteOptions{})
		require.NoError(t, err)
		_, err = st.Actors.Upload(ctx, "al", "x.md", strings.NewReader("x"))
		require.NoError(t, err)
		var log errLog
		var wg sync.WaitGroup
		start := make(chan struct{})
		calls := []func(i int) error{
			func(i int) error {
				_, err := ws.Write(ctx, vfs.MustPath("output/a.txt"), []byte("line\n"), vfs.WriteOptions{Mode: vfs.Append})
				return err
			},
			func(i int) error {
				_, err := ws.WriteFrom(ctx, vfs.MustPath("output/big.bin"), strings.NewReader(strings.Repeat(fmt.Sprint(i), 1<<16)), vfs.WriteOptions{})
				return err
			},
			func(i int) error { _, err := st.Runs.Checkpoint(ctx, r.ID, "x"); return err },
			func(i int) error { _, err := st.Runs.Rollback(ctx, r.ID, 1, runs.RollbackOptions{}); return err },
			func(i int) error { _, err := st.Runs.Diff(ctx, r.ID, 1, runs.Live, runs.DiffOptions{}); return err },
			func(i int) error { _, err := ws.Read(ctx, vfs.MustPath("output/a.txt"), vfs.ReadOptions{}); return err },
			func(i int) error {
				_, err := st.Actors.Upload(ctx, "al", fmt.Sprintf("d%d.md", i), strings.NewReader(strings.Repeat("z", 1<<15)))
				return err
			},
			func(i int) error {
				rc, _, err := st.Actors.Download(ctx, "al", "x.md")
				if err == nil {
					_, err = io.ReadAll(rc)
					rc.Close()
				}
				return err
			},
			func(i int) error { _, err := st.GC(ctx, wsstore.GCOptions{Grace: -1}); return err },
			func(i int) error { _, err := st.Reclaim(ctx); return err },
			func(i int) error { _, err := st.Vacuum(ctx); return err },
			func(i int) error { _, err := st.Fsck(ctx, nil); return err },
			func(i int) error {
				_, err := st.Archive.Export(ctx, io.Discard, archive.Scope{All: true}, archive.Options{})
				return err
			},
			func(i int) error { _, err := st.Stats(ctx); return err },
			func(i int) error { _, err := collectDU(ctx, st); return err },
			func(i int) error {
				_, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "chat", StableChatID: fmt.Sprint(i)}})
				return err
			},
		}
		for k, call := range calls {
			wg.Go(func() {
				<-start
				for i := 0; ; i++ {
					err := call(i)
					if err != nil {
						if errors.Is(err, io.ErrUnexpectedEOF) {
							log.add("call %d: %v", k, err)
						}
						log.check(fmt.Sprintf("round %d call %d", round, k), err, wserr.Closed, wserr.RunNotFound, wserr.InvalidState, wserr.FileNotFound)
						return
					}
				}
			})
		}
		close(start)
		time.Sleep(time.Duration(50+round*100) * time.Millisecond)
		closed := make(chan error, 1)
		go func() { closed <- st.Close() }()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		for _, ch := range []<-chan struct{}{done} {
			select {
			case <-ch:
			case <-time.After(60 * time.Second):
				buf := make([]byte, 1<<20)
				n := runtime.Stack(buf, true)
				t.Fatalf("hang:\n%s", buf[:n])
			}
		}
		select {
		case err := <-closed:
			assert.NoError(t, err)
		case <-time.After(60 * time.Second):
			buf := make([]byte, 1<<20)
			n := runtime.Stack(buf, true)
			t.Fatalf("close hangs:\n%s", buf[:n])
		}
		for _, e := range log.errs {
			t.Error(e)
		}
		again, err := wsstore.Open(ctx, dir, wsstore.Options{})
		require.NoError(t, err)
		rep, err := again.Fsck(ctx, nil)
		require.NoError(t, err)
		assert.Empty(t, rep.Problems, "round %d", round)
		require.NoError(t, again.Close())
	}
	var after int
	for range 50 {
		if after = runtime.NumGoroutine(); after <= before+2 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if after > before+2 {
		buf := make([]byte, 1<<20)
		n := runtime.Stack(buf, true)
		t.Errorf("%d goroutines before, %d after:\n%s", before, after, buf[:n])
	}
}
