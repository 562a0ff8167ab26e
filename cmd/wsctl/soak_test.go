package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

var (
	soakWriters  = flag.Int("soak.writers", 6, "wsctl batch writer processes of the concurrency soak (16 for the long form)")
	soakDuration = flag.Duration("soak.duration", 4*time.Second, "how long the concurrency soak runs (60s for the long form)")
)

// soakCounts are what the soak counts across every process.
type soakCounts struct {
	requests, acked, busy, otherErrs    atomic.Int64
	sessions, gcs, vacuums, fscks       atomic.Int64
	falseFsck, maintBusy, maintFailures atomic.Int64
}

// soakWriter is one writer's acknowledged state: per run, the last
// acknowledged content of each file.
type soakWriter struct {
	files map[string]map[string][]byte // run → path → content
}

// TestConcurrencySoak runs many processes on one store at once: writers
// (each a wsctl batch session writing, one request at a time, to its own
// run; sessions end and new ones start, so opens race too) beside gc,
// vacuum and fsck each looping in processes of their own. It counts
// store.busy errors surfaced to a client, lost writes (an acknowledged
// write not in the store afterwards) and false fsck reports (fsck failing
// on the sound store); all three must be 0. The default run is short;
// -soak.writers=16 -soak.duration=60s is the long form.
func TestConcurrencySoak(t *testing.T) {
	bin := wsctlBinary(t)
	dir := filepath.Join(t.TempDir(), "store")
	out, err := exec.Command(bin, "init", dir).CombinedOutput()
	require.NoError(t, err, "%s", out)

	var c soakCounts
	var mu sync.Mutex
	var unexpected []string
	note := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(unexpected) < 20 {
			unexpected = append(unexpected, fmt.Sprintf(format, args...))
		}
	}
	deadline := time.Now().Add(*soakDuration)
	var wg sync.WaitGroup
	writers := make([]*soakWriter, *soakWriters)
	for w := range writers {
		sw := &soakWriter{files: map[string]map[string][]byte{}}
		writers[w] = sw
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for s := 0; time.Now().Before(deadline); s++ {
				runID := fmt.Sprintf("soak_%d_%d", w, s)
				soakSession(t, bin, dir, runID, w, rng, deadline, sw, &c, note)
				c.sessions.Add(1)
			}
		})
	}
	maint := func(name string, n *atomic.Int64, args ...string) {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				cmd := exec.Command(bin, append([]string{"--store", dir}, args...)...)
				out, err := cmd.CombinedOutput()
				n.Add(1)
				switch status := exitStatusOf(err); {
				case status == 0:
				case status == 8 && strings.Contains(string(out), "store.busy"):
					c.maintBusy.Add(1)
					note("%s: %s", name, out)
				case name == "fsck" && status == 6:
					c.falseFsck.Add(1)
					note("fsck: %s", out)
				default:
					c.maintFailures.Add(1)
					note("%s exit %d: %s", name, status, out)
				}
			}
		})
	}
	maint("gc", &c.gcs, "gc", "--grace", "0")
	maint("vacuum", &c.vacuums, "vacuum")
	maint("fsck", &c.fscks, "fsck")
	wg.Wait()

	// Every acknowledged write is in the store, as last acknowledged.
	ctx := context.Background()
	st, err := wsstore.Open(ctx, dir, wsstore.Options{Index: index.Options{ReadOnly: true}})
	require.NoError(t, err)
	defer st.Close()
	lost, checked := 0, 0
	for _, sw := range writers {
		for runID, files := range sw.files {
			ws := st.Runs.Workspace(runID, runs.HostScope)
			for p, want := range files {
				checked++
				got, err := ws.Read(ctx, vfs.MustPath(p), vfs.ReadOptions{})
				if err != nil || cas.Sum(got.Content) != cas.Sum(want) {
					lost++
					note("lost %s %s: %v", runID, p, err)
				}
			}
		}
	}
	out, err = exec.Command(bin, "--store", dir, "fsck").CombinedOutput()
	assert.NoError(t, err, "fsck at the end: %s", out)

	t.Logf("soak: %d writers for %v: %d sessions, %d requests, %d acknowledged, %d busy surfaced to writers, %d other errors; "+
		"%d gc, %d vacuum, %d fsck runs, %d busy surfaced to maintenance, %d maintenance failures; %d false fsck reports; %d files checked, %d lost",
		*soakWriters, *soakDuration, c.sessions.Load(), c.requests.Load(), c.acked.Load(), c.busy.Load(), c.otherErrs.Load(),
		c.gcs.Load(), c.vacuums.Load(), c.fscks.Load(), c.maintBusy.Load(), c.maintFailures.Load(), c.falseFsck.Load(), checked, lost)
	assert.Empty(t, unexpected)
	assert.Zero(t, c.busy.Load(), "store.busy surfaced to writers")
	assert.Zero(t, c.maintBusy.Load(), "store.busy surfaced to maintenance")
	assert.Zero(t, c.falseFsck.Load(), "false fsck reports")
	assert.Zero(t, lost, "lost writes")
	assert.Positive(t, c.gcs.Load())
	assert.Positive(t, c.vacuums.Load())
	assert.Positive(t, c.fscks.Load())
}

// soakSession is one writer process: it creates runID, writes to it one
// request at a time for a random while (or until deadline), finishes the
// run and ends its input. Every ok answer is recorded in sw.
func soakSession(t *testing.T, bin, dir, runID string, w int, rng *rand.Rand, deadline time.Time, sw *soakWriter,
	c *soakCounts, note func(string, ...any)) {
	cmd := exec.Command(bin, "--store", dir, "batch")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		note("pipe: %v", err)
		return
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		note("pipe: %v", err)
		return
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		note("start: %v", err)
		return
	}
	answers := bufio.NewReader(stdout)
	ask := func(req map[string]any) (bool, error) {
		line, _ := json.Marshal(req)
		c.requests.Add(1)
		if _, err := io.WriteString(stdin, string(line)+"\n"); err != nil {
			return false, err
		}
		got, err := answers.ReadString('\n')
		if err != nil {
			return false, err
		}
		var resp struct {
			OK    bool `json:"ok"`
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(got), &resp); err != nil {
			return false, err
		}
		switch {
		case resp.OK:
			c.acked.Add(1)
		case resp.Error.Code == "store.busy":
			c.busy.Add(1)
			note("%s busy: %s", runID, resp.Error.Message)
		default:
			c.otherErrs.Add(1)
			note("%s %v: %s %s", runID, req["op"], resp.Error.Code, resp.Error.Message)
		}
		return resp.OK, nil
	}
	end := time.Now().Add(time.Duration(300+rng.IntN(1200)) * time.Millisecond)
	if end.After(deadline) {
		end = deadline
	}
	ok, err := ask(map[string]any{"op": "run.create", "chat": map[string]string{"kind": "character", "stableChatId": fmt.Sprintf("soak_%d", w%4)}, "runId": runID})
	if err == nil && ok {
		files := map[string][]byte{}
		sw.files[runID] = files
		for j := 0; err == nil && time.Now().Before(end); j++ {
			p := fmt.Sprintf("output/f%d.md", rng.IntN(6))
			content := fmt.Sprintf("%s write %d\n%s", runID, j, text(rng, 100+rng.IntN(2000)))
			if ok, err = ask(map[string]any{"op": "write", "path": p, "content": content}); ok {
				files[p] = []byte(content)
			}
			if err == nil && j%5 == 4 {
				// Garbage for gc: scratch/ leaves the workspace when the run ends.
				_, err = ask(map[string]any{"op": "write", "path": fmt.Sprintf("scratch/s%d.txt", j), "content": text(rng, 4000)})
			}
		}
		if err == nil {
			_, err = ask(map[string]any{"op": "finish"})
		}
	}
	stdin.Close()
	werr := cmd.Wait()
	switch {
	case exitStatusOf(werr) == 8 && strings.Contains(stderr.String(), "store.busy"):
		c.busy.Add(1)
		note("%s: %s", runID, stderr.String())
	case err != nil || werr != nil:
		c.otherErrs.Add(1)
		note("%s: %v %v: %s", runID, err, werr, stderr.String())
	}
}
