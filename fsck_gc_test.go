package wsstore_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

// besideGC runs fsck rounds times while one goroutine keeps creating
// runs (with inline, delta and chunked files) and deleting them, and
// another keeps collecting with no grace, so objects vanish between and
// during fsck's reads. It returns every report that named a problem.
func besideGC(t *testing.T, e *env, rounds int) []wsstore.FsckReport {
	t.Helper()
	ctx, stop := context.WithCancel(e.ctx)
	var wg sync.WaitGroup
	var churn, collections atomic.Int64
	errs := make(chan error, 2)
	// The churn moves on once per fsck round, so the store stays small
	// while runs come and go during every round; gc never rests.
	tick := make(chan struct{}, 1)
	wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			select {
			case <-tick:
			case <-ctx.Done():
				return
			}
			id := fmt.Sprintf("churn_%d", i)
			_, err := e.s.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "churn"}, RunID: id})
			ws := e.s.Runs.Workspace(id, runs.HostScope)
			doc := []byte{}
			for v := 0; err == nil && v < 3; v++ {
				doc = append(doc, fmt.Sprintf("version %d of run %d: %s\n", v, i, random(uint64(i*10+v), 2000))...)
				_, err = ws.Write(ctx, vfs.MustPath("output/doc.md"), doc, vfs.WriteOptions{})
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
			if _, err := e.s.GC(ctx, wsstore.GCOptions{Grace: -1}); err != nil {
				if ctx.Err() == nil {
					errs <- fmt.Errorf("gc: %w", err)
				}
				return
			}
			collections.Add(1)
		}
	})
	var bad []wsstore.FsckReport
	// Every round counts, and enough of them overlap collections.
	for i := 0; i < rounds || (collections.Load() < 3 && i < 20*rounds); i++ {
		select {
		case tick <- struct{}{}:
		default:
		}
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
	t.Logf("%d+ fsck runs, %d reporting,  beside %d churned runs and %d collections", rounds, len(bad), churn.Load(), collections.Load())
	require.Positive(t, collections.Load())
	return bad
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
