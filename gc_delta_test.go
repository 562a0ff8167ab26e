package wsstore_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/checkpoint"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

// TestGCKeepsDeltaBases: a version another run still reaches is stored as
// a delta against a newer version that only a deleted run reached. GC must
// keep that base, and frees what nothing needs.
func TestGCKeepsDeltaBases(t *testing.T) {
	e := newEnv(t)
	v := func(n int) []byte {
		return []byte(strings.Repeat(fmt.Sprintf("draft line %d of the keeper's log\n", n), 60) + strings.Repeat("shared paragraph\n", 40))
	}
	e.create("chat-1", "run_a")
	e.create("chat-1", "run_b")
	e.write("run_a", "output/main.md", v(1))
	e.write("run_b", "output/main.md", v(1))
	e.write("run_b", "output/main.md", v(2))
	e.write("run_b", "output/other.md", []byte("only in b, nothing depends on it"))
	e.settle()

	v1, v2 := cas.Sum(v(1)), cas.Sum(v(2))
	info, err := e.s.Blobs.Stat(e.ctx, v1)
	require.NoError(t, err)
	require.Equal(t, cas.CodecDelta, info.Codec, "v1 became a delta against v2")
	require.Equal(t, v2, info.Base)

	e.drop("run_b")
	e.collect()

	assert.True(t, e.has(v2), "v2 is unreachable but it is the base of v1, which run_a reaches")
	assert.False(t, e.has(cas.Sum([]byte("only in b, nothing depends on it"))), "b's unique blob is freed")
	e.requireReadable("run_a", map[string][]byte{"output/main.md": v(1)})

	rep, err := e.s.Fsck(e.ctx, nil)
	require.NoError(t, err)
	assert.True(t, rep.OK(), "%v", rep.Problems)
}

func TestFsckNamesABrokenDeltaBase(t *testing.T) {
	e := newCorruptibleEnv(t, wsstore.Options{})
	var lines []string
	for i := range 200 {
		lines = append(lines, fmt.Sprintf("%d: the keeper lit lamp %d at dusk", i, i*i%97))
	}
	v1 := []byte(strings.Join(lines, "\n"))
	v2 := append(append([]byte{}, v1...), []byte("and watched the ships\n")...)
	e.create("chat-1", "run_a")
	e.write("run_a", "output/main.md", v1)
	e.write("run_a", "output/main.md", v2)
	e.settle()
	base := cas.Sum(v2)
	info, err := e.s.Blobs.Stat(e.ctx, cas.Sum(v1))
	require.NoError(t, err)
	require.Equal(t, base, info.Base, "v1 is a delta against v2")
	require.NoError(t, e.s.DB.Update(e.ctx, func(tx *index.Tx) error {
		_, err := tx.ExecContext(e.ctx, `UPDATE blobs SET data = substr(data, 1, length(data) - 3) || x'000000' WHERE hash = ?`, base)
		return err
	}))
	rep, err := e.s.Fsck(e.ctx, nil)
	require.NoError(t, err)
	require.False(t, rep.OK())
	var named bool
	for _, p := range rep.Problems {
		if p.Ref == cas.Sum(v1).String() && strings.Contains(p.Detail, base.String()) {
			named = true
		}
	}
	assert.True(t, named, "the delta's problem names its broken base: %v", rep.Problems)
}

// TestDeltaHistoryGoesOnAfterGC: gc collects the older versions of a file
// no checkpoint reaches any more, among them versions the history would
// re-encode next; later writes go on with the versions that are left,
// every chain stays within the bound and everything reads back.
func TestDeltaHistoryGoesOnAfterGC(t *testing.T) {
	e := newEnv(t)
	e.create("chat-1", "run_a")
	draft := "# draft\n\n"
	var versions []string
	write := func(n int) {
		for range n {
			draft += fmt.Sprintf("paragraph %d: the keeper lit the lamp and watched the ships pass.\n", len(versions))
			versions = append(versions, draft)
			e.write("run_a", "output/main.md", []byte(draft))
		}
	}
	write(11) // version 11: versions 8 and 10 are open
	// Keep only the live workspace: every checkpoint goes, and with them
	// the older versions, which gc may now collect.
	require.NoError(t, e.s.DB.Update(e.ctx, func(tx *index.Tx) error {
		_, err := tx.ExecContext(e.ctx, `DELETE FROM checkpoints WHERE run_id = 'run_a'`)
		return err
	}))
	e.collect()
	assert.False(t, e.has(cas.Sum([]byte(versions[7]))), "version 8 was collected")

	write(30)
	for i, v := range versions {
		h := cas.Sum([]byte(v))
		if !e.has(h) {
			continue
		}
		b, err := e.s.Blobs.ReadAll(e.ctx, h)
		require.NoError(t, err, "version %d", i+1)
		assert.Equal(t, v, string(b))
		info, err := e.s.Blobs.Stat(e.ctx, h)
		require.NoError(t, err)
		assert.LessOrEqual(t, info.Depth, 16)
	}
	var wholes int
	require.NoError(t, e.s.DB.View(e.ctx, func(tx *index.Tx) error {
		return tx.GetContext(e.ctx, &wholes, `SELECT count(*) FROM blobs WHERE codec != 3 AND gen > 0`)
	}))
	assert.Equal(t, 1, wholes, "one history, whole only at its newest version")
}

// TestGCKeepsABaseMadeDuringTheSweep: between mark and sweep, a writer
// stores content X over P, where X was garbage in the snapshot (stored by
// a deleted run), so P, reachable, becomes a delta against X. The writer
// then moves on (a rollback to P, or a newer version) and no root names X
// any more. With no grace and the writer's clock behind gc's, X's age
// cannot save it: sweep must see that X became the newest version of a
// history and keep it, or P stops reading.
func TestGCKeepsABaseMadeDuringTheSweep(t *testing.T) {
	P, X := keeperLog("version P\n"), keeperLog("version X\n")
	tests := []struct {
		name   string
		moveOn func(e *env, cp checkpoint.Checkpoint)
	}{
		{name: "RollbackToP", moveOn: func(e *env, cp checkpoint.Checkpoint) {
			_, err := e.s.Runs.Rollback(e.ctx, "run_a", cp.Seq, runs.RollbackOptions{})
			require.NoError(e.t, err)
		}},
		{name: "NewerVersion", moveOn: func(e *env, _ checkpoint.Checkpoint) {
			e.write("run_a", "output/f.md", keeperLog("version Y, brand new\n"))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			// Checkpoints only when asked, so that no checkpoint holds X.
			createManual(t, e.s, "chat-1", "run_a")
			e.write("run_a", "output/f.md", P)
			cp, err := e.s.Runs.Checkpoint(e.ctx, "run_a", "keep P")
			require.NoError(t, err)
			e.create("chat-2", "run_b")
			e.write("run_b", "output/g.md", X)
			e.drop("run_b")

			raced := false
			progress := func(phase string, done, total int) {
				if phase != "sweep" || done != 0 {
					return
				}
				raced = true
				e.write("run_a", "output/f.md", X)
				e.settle()
				info, err := e.s.Blobs.Stat(e.ctx, cas.Sum(P))
				require.NoError(t, err)
				require.Equal(t, cas.CodecDelta, info.Codec)
				require.Equal(t, cas.Sum(X), info.Base, "P now rests on X")
				tt.moveOn(e, cp)
			}
			rep, err := e.s.GC(e.ctx, wsstore.GCOptions{Grace: -1, Now: at(t0.Add(2 * time.Hour)), Progress: progress})
			require.NoError(t, err)
			require.True(t, raced)
			assert.Positive(t, rep.Kept.Blobs, "X is kept")

			got, err := e.s.Blobs.ReadAll(e.ctx, cas.Sum(P))
			require.NoError(t, err, "P is reachable from run_a")
			require.Equal(t, P, got)
			// The next collection sees X as the base it now is.
			_, err = e.s.GC(e.ctx, wsstore.GCOptions{Grace: -1, Now: at(t0.Add(3 * time.Hour))})
			require.NoError(t, err)
			got, err = e.s.Blobs.ReadAll(e.ctx, cas.Sum(P))
			require.NoError(t, err)
			require.Equal(t, P, got)
		})
	}
}

// TestGCKeepsABaseAQueuedJobMade: the write of X over P commits after
// gc's snapshot (during its mark) and only queues P's re-encoding; the
// job runs before the sweep, making P, reachable, a delta against X, which
// the snapshot saw as garbage outside any history. The writer then rolls
// back to P, so no root names X. With no grace and the writer's clock
// behind gc's, only X's history number, changed by the job, can tell the
// sweep to keep it.
func TestGCKeepsABaseAQueuedJobMade(t *testing.T) {
	P, X := keeperLog("version P\n"), keeperLog("version X\n")
	e := newEnv(t)
	createManual(t, e.s, "chat-1", "run_a")
	e.write("run_a", "output/f.md", P)
	cp, err := e.s.Runs.Checkpoint(e.ctx, "run_a", "keep P")
	require.NoError(t, err)
	e.create("chat-2", "run_b")
	e.write("run_b", "output/g.md", X)
	e.drop("run_b")

	var wrote, ran bool
	progress := func(phase string, done, total int) {
		switch {
		case phase == "mark" && done > 0 && !wrote:
			// inside the mark's read transaction: after its snapshot
			wrote = true
			e.write("run_a", "output/f.md", X)
		case phase == "sweep" && done == 0 && !ran:
			ran = true
			e.settle()
			info, err := e.s.Blobs.Stat(e.ctx, cas.Sum(P))
			require.NoError(t, err)
			require.Equal(t, cas.Sum(X), info.Base, "P now rests on X")
			_, err = e.s.Runs.Rollback(e.ctx, "run_a", cp.Seq, runs.RollbackOptions{})
			require.NoError(t, err)
		}
	}
	rep, err := e.s.GC(e.ctx, wsstore.GCOptions{Grace: -1, Now: at(t0.Add(2 * time.Hour)), Progress: progress})
	require.NoError(t, err)
	require.True(t, wrote && ran)
	assert.Positive(t, rep.Kept.Blobs, "X is kept")
	got, err := e.s.Blobs.ReadAll(e.ctx, cas.Sum(P))
	require.NoError(t, err, "P is reachable from run_a")
	require.Equal(t, P, got)
	_, err = e.s.GC(e.ctx, wsstore.GCOptions{Grace: -1, Now: at(t0.Add(3 * time.Hour))})
	require.NoError(t, err)
	got, err = e.s.Blobs.ReadAll(e.ctx, cas.Sum(P))
	require.NoError(t, err)
	require.Equal(t, P, got)
}

// TestGCDeltaReadsConcurrent reads a checkpointed version of a file over
// and over while a run keeps writing new versions of it (each re-encodes
// older ones as deltas against the newest, freeing their former bases) and
// gc collects with no grace. A read sees one state of the store from the
// version down to the whole blob it rests on, so it never finds a base
// missing.
func TestGCDeltaReadsConcurrent(t *testing.T) {
	s := storetest.OpenStore(t)
	ctx := context.Background()
	createManual(t, s, "c", "run_a")
	ws := s.Runs.Workspace("run_a", runs.HostScope)
	p := vfs.MustPath("output/draft.md")
	draft := []byte("# Draft\n")
	version := func(i int) []byte {
		draft = fmt.Appendf(draft, "Paragraph %d: the keeper lit lamp %d at dusk and logged it.\n", i, i*i%97)
		return bytes.Clone(draft)
	}
	var held [][]byte // versions checkpoints hold
	for i := range 4 {
		b := version(i)
		_, err := ws.Write(ctx, p, b, vfs.WriteOptions{})
		require.NoError(t, err)
		_, err = s.Runs.Checkpoint(ctx, "run_a", fmt.Sprintf("v%d", i))
		require.NoError(t, err)
		held = append(held, b)
	}

	const writes = 200
	done := make(chan struct{})
	var writeErr error
	go func() {
		defer close(done)
		for i := range writes {
			if _, err := ws.Write(ctx, p, version(4+i), vfs.WriteOptions{}); err != nil {
				writeErr = err
				return
			}
		}
	}()
	gcDone := make(chan error, 1)
	go func() {
		for {
			select {
			case <-done:
				gcDone <- nil
				return
			default:
			}
			if _, err := s.GC(ctx, wsstore.GCOptions{Grace: -1}); err != nil {
				gcDone <- err
				return
			}
		}
	}()
	for reading := true; reading; {
		select {
		case <-done:
			reading = false
		default:
		}
		for _, b := range held {
			got, err := s.Blobs.ReadAll(ctx, cas.Sum(b))
			require.NoError(t, err)
			require.Equal(t, b, got)
		}
	}
	require.NoError(t, <-gcDone)
	require.NoError(t, writeErr)
}

// TestGCKeepsDeltaBasesOnEitherSideInHashOrder: as TestGCKeepsDeltaBases,
// with many files, so that some bases sort before the delta that needs
// them and some after: mark reads blobs in hash order and must follow a
// base it has passed already as well as one still to come. gc's steps,
// whole gc and du all see every base reachable.
func TestGCKeepsDeltaBasesOnEitherSideInHashOrder(t *testing.T) {
	e := newEnv(t)
	v := func(f, n int) []byte {
		return []byte(strings.Repeat(fmt.Sprintf("file %d, draft line %d of the keeper's log\n", f, n), 60) + strings.Repeat("shared paragraph\n", 40))
	}
	e.create("chat-1", "run_a")
	e.create("chat-1", "run_b")
	const files = 16
	for f := range files {
		p := fmt.Sprintf("output/f%02d.md", f)
		e.write("run_a", p, v(f, 1))
		e.write("run_b", p, v(f, 1))
		e.write("run_b", p, v(f, 2))
	}
	e.settle()
	var before, after int
	for f := range files {
		info, err := e.s.Blobs.Stat(e.ctx, cas.Sum(v(f, 1)))
		require.NoError(t, err)
		require.Equal(t, cas.CodecDelta, info.Codec)
		if h := cas.Sum(v(f, 1)); bytes.Compare(info.Base[:], h[:]) < 0 {
			before++
		} else {
			after++
		}
	}
	require.Positive(t, before, "some bases sort before their delta")
	require.Positive(t, after, "some bases sort after their delta")

	e.drop("run_b")
	_, err := collectDU(e.ctx, e.s)
	require.NoError(t, err)
	dry := e.gc(wsstore.GCOptions{DryRun: true, Grace: -1, Now: e.later})
	e.collect()

	want := map[string][]byte{}
	for f := range files {
		assert.True(t, e.has(cas.Sum(v(f, 2))), "file %d: the base of a version run_a reaches is kept", f)
		want[fmt.Sprintf("output/f%02d.md", f)] = v(f, 1)
	}
	assert.GreaterOrEqual(t, dry.Reachable.Blobs, 2*files, "every base counts as reachable")
	e.requireReadable("run_a", want)
}

// keeperLog is a 200-line text ending in tag: two of them differ only in
// their last line, so each is a good delta base for the other.
func keeperLog(tag string) []byte {
	var b strings.Builder
	for i := range 200 {
		fmt.Fprintf(&b, "line %d of the keeper's log: lamp %d lit at dusk\n", i, i*i%97)
	}
	b.WriteString(tag)
	return []byte(b.String())
}
