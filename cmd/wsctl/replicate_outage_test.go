package main

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
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
	srv, url := fakeTier(t, "desk")
	desk := newCLI(t)
	desk.ok("--blobs", url, "demo")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		errOut string
		code   int
	}
	done := make(chan result, 1)
	var errOut storetest.Buffer // read while replicate writes it
	go func() {
		code := execute(ctx, desk.app(), []string{"--store", desk.store, "replicate", "--interval", "200ms"}, strings.NewReader(""), io.Discard, &errOut)
		done <- result{errOut.String(), code}
	}()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); !cond(); time.Sleep(50 * time.Millisecond) {
			select {
			case r := <-done:
				t.Fatalf("replicate ended (exit %d) waiting for %s: %s", r.code, what, r.errOut)
			default:
			}
			require.True(t, time.Now().Before(deadline), "waiting for %s", what)
		}
	}
	meta := func() int { return len(srv.Keys("wsstore", "desk/meta/")) }
	waitFor("the first round", func() bool { return meta() > 0 })

	// The outage: every request is cut. A run is written meanwhile.
	var cut atomic.Int64
	srv.SetFault(func(*http.Request) int { cut.Add(1); return s3fake.Drop })
	desk.ok("demo")
	// Rounds fail for a while (each gives up after the SDK's retries):
	// the outage lasts until replicate has said one failed.
	waitFor("a round to fail and be tried again", func() bool {
		return cut.Load() > 0 && strings.Contains(errOut.String(), "trying again")
	})
	before := meta()
	srv.SetFault(nil)
	waitFor("the run written during the outage to be shipped", func() bool { return meta() > before })
	cancel()
	r := <-done
	assert.Equal(t, 0, r.code, "stderr: %s", r.errOut)
	assert.Contains(t, r.errOut, "store.busy")
	assert.Contains(t, r.errOut, "trying again")

	dir := filepath.Join(t.TempDir(), "restored")
	var rep struct {
		Runs int `json:"runs"`
	}
	desk.jsonOut(&rep, "restore", "--from", "s3://wsstore/desk/meta?endpoint="+srv.URL, dir)
	assert.Equal(t, 2, rep.Runs, "the run written during the outage is on the replica")
}

// TestReplicateStartsDuringAnOutage: replicate started while the object
// store does not answer treats its first round as any other: it says so
// on stderr and keeps going, ships once the store answers, and exits 0
// at the signal.
func TestReplicateStartsDuringAnOutage(t *testing.T) {
	srv, url := fakeTier(t, "desk")
	desk := newCLI(t)
	desk.ok("--blobs", url, "demo")
	var cut atomic.Int64
	srv.SetFault(func(*http.Request) int { cut.Add(1); return s3fake.Drop })

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		errOut string
		code   int
	}
	done := make(chan result, 1)
	var errOut storetest.Buffer
	go func() {
		code := execute(ctx, desk.app(), []string{"--store", desk.store, "replicate", "--interval", "200ms"}, strings.NewReader(""), io.Discard, &errOut)
		done <- result{errOut.String(), code}
	}()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); !cond(); time.Sleep(50 * time.Millisecond) {
			select {
			case r := <-done:
				t.Fatalf("replicate ended (exit %d) waiting for %s: %s", r.code, what, r.errOut)
			default:
			}
			require.True(t, time.Now().Before(deadline), "waiting for %s", what)
		}
	}
	waitFor("the first round to fail and be tried again", func() bool {
		return cut.Load() > 0 && strings.Contains(errOut.String(), "trying again")
	})
	srv.SetFault(nil)
	waitFor("the store to be shipped", func() bool { return len(srv.Keys("wsstore", "desk/meta/")) > 0 })
	cancel()
	r := <-done
	assert.Equal(t, 0, r.code, "stderr: %s", r.errOut)

	dir := filepath.Join(t.TempDir(), "restored")
	var rep struct {
		Runs int `json:"runs"`
	}
	desk.jsonOut(&rep, "restore", "--from", url, dir)
	assert.Equal(t, 1, rep.Runs)
}
