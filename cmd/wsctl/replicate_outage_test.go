package main

import (
	"context"
	"io"
	"math"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/remote/s3fake"
)

// TestReplicateOutlivesAnOutage: the object store stops answering while
// replicate runs and a run is written; replicate says so on stderr,
// keeps going, ships the run once the store answers again and exits 0 at
// the signal; a restore has the run written during the outage.
func TestReplicateOutlivesAnOutage(t *testing.T) {
	srv, _, desk := demoDesk(t)

	rep := startReplicate(t, desk)
	meta := func() int { return len(srv.Keys("wsstore", "desk/meta/")) }
	rep.waitFor("the first round", func() bool { return meta() > 0 })

	// The outage: every request is cut. A run is written meanwhile.
	var cut atomic.Int64
	srv.SetFault(func(*http.Request) int { cut.Add(1); return s3fake.Drop })
	desk.ok("demo")
	// Rounds fail for a while (each gives up after the SDK's retries):
	// the outage lasts until replicate has said one failed.
	rep.waitFor("a round to fail and be tried again", func() bool {
		return cut.Load() > 0 && strings.Contains(rep.errOut.String(), "trying again")
	})
	before := meta()
	srv.SetFault(nil)
	rep.waitFor("the run written during the outage to be shipped", func() bool { return meta() > before })
	r := rep.stop()
	assert.Equal(t, 0, r.code, "stderr: %s", r.errOut)
	assert.Contains(t, r.errOut, "store.busy")
	assert.Contains(t, r.errOut, "trying again")

	dir := filepath.Join(t.TempDir(), "restored")
	var restored struct {
		Runs int `json:"runs"`
	}
	desk.jsonOut(&restored, "restore", "--from", "s3://wsstore/desk/meta?endpoint="+srv.URL, dir)
	assert.Equal(t, 2, restored.Runs, "the run written during the outage is on the replica")
}

// TestReplicateStartsDuringAnOutage: replicate started while the object
// store does not answer treats its first round as any other: it says so
// on stderr and keeps going, ships once the store answers, and exits 0
// at the signal.
func TestReplicateStartsDuringAnOutage(t *testing.T) {
	srv, url, desk := demoDesk(t)
	var cut atomic.Int64
	srv.SetFault(func(*http.Request) int { cut.Add(1); return s3fake.Drop })

	rep := startReplicate(t, desk)
	rep.waitFor("the first round to fail and be tried again", func() bool {
		return cut.Load() > 0 && strings.Contains(rep.errOut.String(), "trying again")
	})
	srv.SetFault(nil)
	rep.waitFor("the store to be shipped", func() bool { return len(srv.Keys("wsstore", "desk/meta/")) > 0 })
	r := rep.stop()
	assert.Equal(t, 0, r.code, "stderr: %s", r.errOut)

	dir := filepath.Join(t.TempDir(), "restored")
	var restored struct {
		Runs int `json:"runs"`
	}
	desk.jsonOut(&restored, "restore", "--from", url, dir)
	assert.Equal(t, 1, restored.Runs)
}

// replicating is a wsctl replicate running on a store until stop.
type replicating struct {
	t      *testing.T
	errOut *storetest.Buffer // read while replicate writes it
	cancel context.CancelFunc
	done   chan replicateResult
}

type replicateResult struct {
	errOut string
	code   int
}

// startReplicate runs wsctl replicate on c's store, a round every 200 ms,
// until stop or the test's end.
func startReplicate(t *testing.T, c *cli) *replicating {
	return startReplicateEvery(t, c, 200*time.Millisecond)
}

// startReplicateEvery runs wsctl replicate on c's store, a round every
// interval, until stop or the test's end.
func startReplicateEvery(t *testing.T, c *cli, interval time.Duration) *replicating {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	r := &replicating{t: t, errOut: &storetest.Buffer{}, cancel: cancel, done: make(chan replicateResult, 1)}
	go func() {
		code := execute(ctx, c.app(), []string{"--store", c.store, "replicate", "--interval", interval.String()}, strings.NewReader(""), io.Discard, r.errOut)
		r.done <- replicateResult{r.errOut.String(), code}
	}()
	return r
}

// waitFor waits up to a minute for cond, failing the test if replicate
// ends first.
func (r *replicating) waitFor(what string, cond func() bool) {
	r.t.Helper()
	for deadline := time.Now().Add(60 * time.Second); !cond(); time.Sleep(50 * time.Millisecond) {
		select {
		case res := <-r.done:
			r.t.Fatalf("replicate ended (exit %d) waiting for %s: %s", res.code, what, res.errOut)
		default:
		}
		require.True(r.t, time.Now().Before(deadline), "waiting for %s", what)
	}
}

// stop interrupts replicate and returns how it ended.
func (r *replicating) stop() replicateResult {
	r.cancel()
	return <-r.done
}

// TestReplicateBacksOffInAnOutage: during an outage replicate's rounds
// back off as the replicator's own loop does: each failed round prints
// one line, counting the tries, its wait doubling from the interval; over
// the outage there are at most about log2(outage / interval) of them, not
// one a round. Once the object store answers a round says so, the store
// is shipped, and replicate exits 0 at the signal.
func TestReplicateBacksOffInAnOutage(t *testing.T) {
	srv, _, desk := demoDesk(t)
	// 501: a server error the SDK does not retry, so each round fails
	// at once and they come at the pace replicate sets.
	var rounds atomic.Int64
	srv.SetFault(func(r *http.Request) int {
		if strings.HasSuffix(r.URL.Query().Get("prefix"), "locks/reclaim/") {
			rounds.Add(1) // each round's push lists the reclaim locks first
		}
		return http.StatusNotImplemented
	})

	const interval = 20 * time.Millisecond
	rep := startReplicateEvery(t, desk, interval)
	began := time.Now()
	failed := regexp.MustCompile(`(?m)^wsctl: replicate: round failed \(tries (\d+), trying again in (\S+)\): .*store\.busy`)
	rep.waitFor("rounds to fail a while", func() bool {
		return rounds.Load() >= 4 && time.Since(began) > 3*time.Second
	})
	srv.SetFault(nil)
	window, tried := time.Since(began), rounds.Load()
	// The first round, then one at least 1, 2, 4, … intervals after the
	// one before: within the window at most 2 + log2(window / interval)
	// start, and one more may have begun as the outage ended.
	bound := 3 + int(math.Log2(float64(window)/float64(interval)))
	assert.LessOrEqual(t, int(tried), bound, "rounds tried in %s at an interval of %s", window, interval)
	rep.waitFor("a round to succeed", func() bool { return strings.Contains(rep.errOut.String(), "wsctl: replicate: round resumed after") })
	rep.waitFor("the store to be shipped", func() bool { return len(srv.Keys("wsstore", "desk/meta/")) > 0 })
	r := rep.stop()
	assert.Equal(t, 0, r.code, "stderr: %s", r.errOut)

	lines := failed.FindAllStringSubmatch(r.errOut, -1)
	assert.LessOrEqual(t, len(lines), bound, "failed rounds printed in %s at an interval of %s: %s", window, interval, r.errOut)
	wait := interval
	for i, l := range lines {
		assert.Equal(t, strconv.Itoa(i+1), l[1], "each line counts the tries")
		assert.Equal(t, wait.String(), l[2], "the wait doubles")
		wait = min(2*wait, time.Minute)
	}
	assert.Equal(t, 1, strings.Count(r.errOut, "round resumed"))
	t.Logf("%d rounds tried and %d failures printed over %s at an interval of %s (bound %d)", tried, len(lines), window.Round(time.Millisecond), interval, bound)
}
