package wsstore_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

// besideGC runs fsck rounds times while one goroutine keeps creating
// runs (with inline, delta and chunked files, and a spread of small ones)
// and deleting them, and another keeps collecting them, so
// objects vanish between and during fsck's reads. A ballast run of
// stable files makes each fsck read long enough that the churn's objects
// are listed early and collected before fsck reaches them, as a check
// reading each object in a transaction of its own would show. It returns
// every report that named a problem.
func besideGC(t *testing.T, e *env, rounds int) []wsstore.FsckReport {
	t.Helper()
	ballast(e, 300)
	ctx, stop := context.WithCancel(e.ctx)
	var wg sync.WaitGroup
	var churn, collections, freed atomic.Int64
	errs := make(chan error, 2)
	wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			// Each run is a minute younger than the last: gc's 30 s grace
			// collects every run deleted before, never the rows this one is
			// writing (a chunked file's chunks commit before its blob).
			e.clock.Set(t0.Add(time.Duration(i+1) * time.Minute))
			id := fmt.Sprintf("churn_%d", i)
			_, err := e.s.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "churn"}, RunID: id})
			ws := e.s.Runs.Workspace(id, runs.HostScope)
			doc := []byte{}
			for v := 0; err == nil && v < 3; v++ {
				doc = append(doc, fmt.Sprintf("version %d of run %d: %s\n", v, i, random(uint64(i*10+v), 2000))...)
				_, err = ws.Write(ctx, vfs.MustPath("output/doc.md"), doc, vfs.WriteOptions{})
			}
			if err == nil {
				edits := make([]runs.Edit, 20)
				for k := range edits {
					edits[k] = runs.Edit{Path: vfs.MustPath(fmt.Sprintf("output/small/%02d.txt", k)), Content: random(uint64(i*100+k+1<<20), 600)}
				}
				_, err = ws.Apply(ctx, edits)
			}
			if err == nil {
				_, err = ws.Write(ctx, vfs.MustPath("scratch/big.bin"), random(uint64(1000+i), 80<<10), vfs.WriteOptions{})
			}
			if err == nil {
				err = e.s.Runs.SetStatus(ctx, id, runs.Cancelled, "test")
			}
			if err == nil {
				err = e.s.Runs.DeleteRun(ctx, id)
			}
			if err != nil {
				if ctx.Err() == nil {
					errs <- fmt.Errorf("churn: %w", err)
				}
				return
			}
			churn.Add(1)
		}
	})
	wg.Go(func() {
		for ctx.Err() == nil {
			rep, err := e.s.GC(ctx, wsstore.GCOptions{Grace: 30 * time.Second})
			if err != nil {
				if ctx.Err() == nil {
					errs <- fmt.Errorf("gc: %w", err)
				}
				return
			}
			collections.Add(1)
			freed.Add(int64(rep.Freed.Blobs + rep.Freed.Chunks + rep.Freed.Trees))
		}
	})
	var bad []wsstore.FsckReport
	// Every round counts, and enough of them overlap collections.
	for i := 0; i < rounds || (collections.Load() < 3 && i < 20*rounds); i++ {
		rep, err := e.s.Fsck(e.ctx, nil)
		require.NoError(t, err)
		if !rep.OK() {
			bad = append(bad, rep)
		}
	}
	stop()
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	t.Logf("%d+ fsck runs, %d reporting, beside %d churned runs and %d collections freeing %d objects",
		rounds, len(bad), churn.Load(), collections.Load(), freed.Load())
	require.Positive(t, freed.Load(), "gc collected the churn")
	return bad
}

// ballast writes n small files of stable content into a run of its own.
func ballast(e *env, n int) {
	e.t.Helper()
	e.create("ballast", "run_ballast")
	edits := make([]runs.Edit, n)
	for k := range edits {
		edits[k] = runs.Edit{Path: vfs.MustPath(fmt.Sprintf("output/ballast/%03d.txt", k)), Content: random(uint64(5000+k), 1000)}
	}
	_, err := e.s.Runs.Workspace("run_ballast", runs.HostScope).Apply(e.ctx, edits)
	require.NoError(e.t, err)
}

// fsckRounds is 25 by default and 100 with WSSTORE_CAMPAIGN_LONG=1.
func fsckRounds() int {
	if longCampaign() {
		return 100
	}
	return 25
}

// TestFsckBesideGCReportsNothingFalse: fsck reads one snapshot, so gc
// deleting objects while it runs never makes a sound store look corrupt.
func TestFsckBesideGCReportsNothingFalse(t *testing.T) {
	e := newCorruptibleEnv(t, wsstore.Options{CAS: cas.Options{InlineMax: 64 << 10}})
	twoRuns(e)
	bad := besideGC(t, e, fsckRounds())
	assert.Empty(t, bad, "fsck reported a sound store as damaged")
}

// TestFsckBesideGCFindsRealDamage: a blob damaged while gc runs is still
// reported, in every round.
func TestFsckBesideGCFindsRealDamage(t *testing.T) {
	e := newCorruptibleEnv(t, wsstore.Options{CAS: cas.Options{InlineMax: 64 << 10}})
	twoRuns(e)
	h := e.alterBlob(random(1, 3000))
	rounds := fsckRounds() / 4
	bad := besideGC(t, e, rounds)
	require.GreaterOrEqual(t, len(bad), rounds, "every round finds the damage")
	for _, rep := range bad {
		require.Len(t, rep.Problems, 1, "%v", rep.Problems)
		assert.Equal(t, "blob", rep.Problems[0].Kind)
		assert.Equal(t, h.String(), rep.Problems[0].Ref)
	}
}

// longCampaign reports whether the long forms of the reliability
// campaigns were asked for (WSSTORE_CAMPAIGN_LONG=1); by default each runs
// briefly, as CI runs it.
func longCampaign() bool { return os.Getenv("WSSTORE_CAMPAIGN_LONG") == "1" }
