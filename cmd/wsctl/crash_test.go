package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
)

var (
	crashPoints = flag.Int("crash.points", 50, "SIGKILLs the crash campaign makes (1000 for the long form)")
	crashSeed   = flag.Uint64("crash.seed", 0, "seed of the crash campaign's random choices; 0 picks one and logs it")
)

// crashSession is one wsctl batch child of the crash campaign: the lines
// it is sent and, for each, the output files the run holds once the line
// is applied.
type crashSession struct {
	runID string
	sync  string
	lines []string
	// states[i] maps each output/ path to its content's hash after lines[i].
	states []map[string]cas.Hash
}

// newCrashSession generates a checkpoint-heavy session: writes, appends
// and deletes under output/ (each taking a checkpoint), explicit
// checkpoints, scratch files that finishing the run turns into garbage,
// sometimes a file large enough to be stored in chunks, then finish.
func newCrashSession(rng *rand.Rand, n int) *crashSession {
	s := &crashSession{runID: fmt.Sprintf("crash_%d", n), sync: "normal"}
	if n%2 == 1 {
		s.sync = "full"
	}
	files := map[string][]byte{}
	snapshot := func() {
		m := make(map[string]cas.Hash, len(files))
		for p, c := range files {
			m[p] = cas.Sum(c)
		}
		s.states = append(s.states, m)
	}
	add := func(v any, changed string, content []byte) {
		b, _ := json.Marshal(v)
		s.lines = append(s.lines, string(b))
		if changed != "" {
			if content == nil {
				delete(files, changed)
			} else {
				files[changed] = content
			}
		}
		snapshot()
	}
	add(map[string]any{"op": "run.create", "chat": map[string]string{"kind": "character", "stableChatId": fmt.Sprintf("crash_chat_%d", n%3)},
		"runId": s.runID}, "", nil)
	ops := 4 + rng.IntN(40)
	large := n%10 == 3
	for j := 0; j < ops; j++ {
		path := fmt.Sprintf("output/f%d.md", rng.IntN(4))
		old, exists := files[path]
		switch k := rng.IntN(100); {
		case k < 45 || (!exists && k < 70):
			c := []byte(fmt.Sprintf("session %d op %d\n%s", n, j, text(rng, 100+rng.IntN(3000))))
			add(map[string]any{"op": "write", "path": path, "content": string(c)}, path, c)
		case k < 60:
			extra := fmt.Sprintf("appended %d/%d %s", n, j, text(rng, 50+rng.IntN(500)))
			add(map[string]any{"op": "append", "path": path, "content": extra}, path, append(append([]byte{}, old...), extra...))
		case k < 70:
			add(map[string]any{"op": "delete", "path": path}, path, nil)
		case k < 80:
			c := text(rng, 50<<10+rng.IntN(100<<10))
			add(map[string]any{"op": "write", "path": fmt.Sprintf("scratch/s%d.txt", j), "content": c}, "", nil)
		case k < 83 && large:
			large = false
			c := []byte(text(rng, 4<<20+rng.IntN(1<<20)))
			add(map[string]any{"op": "write", "path": "output/large.md", "content": string(c)}, "output/large.md", c)
		default:
			add(map[string]any{"op": "checkpoint", "reason": fmt.Sprintf("step %d", j)}, "", nil)
		}
	}
	add(map[string]any{"op": "finish"}, "", nil)
	return s
}

// text returns n bytes of lowercase words and newlines.
func text(rng *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		switch r := rng.IntN(40); {
		case r == 0:
			b[i] = '\n'
		case r < 6:
			b[i] = ' '
		default:
			b[i] = byte('a' + rng.IntN(26))
		}
	}
	return string(b)
}

// ackedCheckpoint is a checkpoint a response acknowledged, with the output
// files it must hold.
type ackedCheckpoint struct {
	runID string
	seq   int64
	files map[string]cas.Hash
}

// crashResult is what one child did before it died or ended.
type crashResult struct {
	killed bool
	acked  int // lines answered
	cps    []ackedCheckpoint
}

// runCrashChild starts bin with args, feeds it lines (all at once, as a
// pipelining host would) and kills it with SIGKILL once it has answered
// killAfter lines, or after delay if killAfter < 0. Every complete line
// it wrote before it died counts as acknowledged.
func runCrashChild(t *testing.T, bin string, args []string, s *crashSession, killAfter int, delay time.Duration) crashResult {
	t.Helper()
	cmd := exec.Command(bin, args...)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	if s != nil {
		go func() {
			for _, l := range s.lines {
				if _, err := io.WriteString(stdin, l+"\n"); err != nil {
					return
				}
			}
			stdin.Close()
		}()
	} else {
		stdin.Close()
	}
	var timer *time.Timer
	if killAfter < 0 {
		timer = time.AfterFunc(delay, func() { _ = cmd.Process.Signal(syscall.SIGKILL) })
	}
	var res crashResult
	r := bufio.NewReader(stdout)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			break // a partial last line is not an answer
		}
		i := res.acked
		res.acked++
		if s == nil {
			continue
		}
		var resp struct {
			OK     bool `json:"ok"`
			Result struct {
				CheckpointID string `json:"checkpointId"`
			} `json:"result"`
			Error json.RawMessage `json:"error"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &resp), line)
		require.True(t, resp.OK, "line %d %s: %s", i, s.lines[i][:min(len(s.lines[i]), 80)], line)
		if id := resp.Result.CheckpointID; id != "" {
			seq, err := strconv.ParseInt(strings.TrimPrefix(id, "cp_"), 10, 64)
			require.NoError(t, err)
			res.cps = append(res.cps, ackedCheckpoint{runID: s.runID, seq: seq, files: s.states[i]})
		}
		if res.acked == killAfter {
			_ = cmd.Process.Signal(syscall.SIGKILL)
		}
	}
	if killAfter == 0 {
		_ = cmd.Process.Signal(syscall.SIGKILL)
	}
	err = cmd.Wait()
	if timer != nil {
		timer.Stop()
	}
	var ee *exec.ExitError
	if err != nil && errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			res.killed = true
			return res
		}
	}
	require.NoError(t, err, "%s: %s", strings.Join(args, " "), stderr.String())
	return res
}

// TestCrashCampaign runs checkpoint-heavy wsctl batch sessions, and gc and
// vacuum, as children of the test and kills each with SIGKILL at a random
// point: during open, mid-request, mid-commit, mid-sweep, mid-rebuild.
// After every kill the store must pass fsck, and every checkpoint a
// response acknowledged before the kill must hold the files it was
// acknowledged with. Odd sessions run with --synchronous full. The
// default run makes 50 kills; -crash.points=1000 the long form.
func TestCrashCampaign(t *testing.T) {
	bin := wsctlBinary(t)
	seed := *crashSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("crash campaign: -crash.seed=%d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	ctx := context.Background()

	var dir string
	var acked []ackedCheckpoint
	kills := map[string]int{}
	total, losses, sessions, ackedLines, ackedCPs := 0, 0, 0, 0, 0
	observed := map[string]time.Duration{"gc": 50 * time.Millisecond, "vacuum": 50 * time.Millisecond}
	verify := func(what string) {
		t.Helper()
		if _, err := os.Stat(filepath.Join(dir, wsstore.DBName)); errors.Is(err, fs.ErrNotExist) {
			// Killed before the new store was linked into place.
			require.Empty(t, acked, "after %s: the store is gone", what)
			return
		}
		out, err := exec.Command(bin, "--store", dir, "fsck").CombinedOutput()
		require.NoError(t, err, "fsck after %s: %s", what, out)
		st, err := wsstore.Open(ctx, dir, wsstore.Options{Index: index.Options{ReadOnly: true}})
		require.NoError(t, err)
		defer st.Close()
		for _, a := range acked {
			v, err := st.Checkpoints.View(ctx, a.runID, a.seq)
			if !assert.NoError(t, err, "after %s: acknowledged %s cp %d", what, a.runID, a.seq) {
				losses++
				continue
			}
			got := map[string]cas.Hash{}
			for _, f := range v.Files {
				if strings.HasPrefix(f.Path, "output/") {
					got[f.Path] = f.Hash
				}
			}
			if !assert.Equal(t, a.files, got, "after %s: %s cp %d", what, a.runID, a.seq) {
				losses++
			}
		}
	}
	for attempt := 0; total < *crashPoints && attempt < 4**crashPoints; attempt++ {
		if total%10 == 0 && kills["epoch"] <= total/10 {
			// A fresh store every 10 kills keeps fsck and the checks short.
			kills["epoch"]++
			dir = filepath.Join(t.TempDir(), "store")
			acked = nil
		}
		var res crashResult
		var what string
		switch {
		case attempt%5 == 4 && len(acked) > 0:
			what = []string{"gc", "vacuum"}[attempt/5%2]
			args := []string{"--store", dir, what}
			if what == "gc" {
				args = append(args, "--grace", "0")
			}
			start := time.Now()
			res = runCrashChild(t, bin, args, nil, -1, time.Duration(rng.Int64N(int64(observed[what])*5/4+1)))
			if !res.killed {
				observed[what] = max(observed[what], time.Since(start))
			}
		default:
			what = "batch"
			s := newCrashSession(rng, sessions)
			sessions++
			killAfter := 1 + rng.IntN(len(s.lines))
			var delay time.Duration
			if rng.IntN(4) == 0 {
				killAfter, delay = -1, time.Duration(rng.IntN(40))*time.Millisecond // during open, or anywhere
			}
			res = runCrashChild(t, bin, []string{"--store", dir, "--synchronous", s.sync, "batch"}, s, killAfter, delay)
			acked = append(acked, res.cps...)
			ackedCPs += len(res.cps)
			ackedLines += res.acked
			what += " --synchronous " + s.sync
		}
		if res.killed {
			total++
			kills[what]++
		}
		verify(what)
	}
	delete(kills, "epoch")
	t.Logf("crash campaign: %d kills %v, %d sessions, %d acknowledged lines, %d acknowledged checkpoints, %d losses",
		total, kills, sessions, ackedLines, ackedCPs, losses)
	assert.GreaterOrEqual(t, total, *crashPoints)
	assert.Zero(t, losses)
}
