package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

var bigFile = flag.Bool("wsctl.bigfile", false, "read, append to, patch and cat a 1 GiB file instead of 64 MiB")

// The child half of childRun: wsctl itself, run from this test binary, so
// that its peak RSS is wsctl's alone.
func TestWsctlChild(t *testing.T) {
	if os.Getenv("WSCTL_CHILD") != "1" {
		t.Skip("run as a child by childRun")
	}
	var args []string
	if err := json.Unmarshal([]byte(os.Getenv("WSCTL_CHILD_ARGS")), &args); err != nil {
		panic(err)
	}
	code := execute(context.Background(), newApp(), args, os.Stdin, os.Stdout, os.Stderr)
	hwm, err := vmHWM()
	if err != nil {
		panic(err)
	}
	if err := os.WriteFile(os.Getenv("WSCTL_CHILD_HWM"), []byte(strconv.FormatInt(hwm, 10)), 0o644); err != nil {
		panic(err)
	}
	os.Exit(code)
}

// vmHWM returns this process's peak resident set size in bytes.
func vmHWM() (int64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmHWM in /proc/self/status")
}

// childResult is what a wsctl child did.
type childResult struct {
	out  []byte // stdout, unless it went to a writer
	err  string
	code int
	hwm  int64 // peak RSS
}

// childRun runs wsctl --store <store> args in a child process with stdin,
// its stdout to w (nil: kept in the result), and returns what it did and
// its peak RSS (VmHWM).
func childRun(t *testing.T, store string, stdin string, w io.Writer, args ...string) childResult {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("peak RSS from /proc")
	}
	all, err := json.Marshal(append([]string{"--store", store}, args...))
	require.NoError(t, err)
	hwmFile := filepath.Join(t.TempDir(), "hwm")
	cmd := exec.Command(os.Args[0], "-test.run=^TestWsctlChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), "WSCTL_CHILD=1", "WSCTL_CHILD_ARGS="+string(all), "WSCTL_CHILD_HWM="+hwmFile)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if w != nil {
		cmd.Stdout = w
	}
	err = cmd.Run()
	res := childResult{out: out.Bytes(), err: errOut.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		res.code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	b, err := os.ReadFile(hwmFile)
	require.NoError(t, err, "the child reports its peak RSS: %s", res.err)
	res.hwm, err = strconv.ParseInt(string(b), 10, 64)
	require.NoError(t, err)
	return res
}

// lineGen yields n bytes of numbered lines, line i (from 1) starting
// "line %09d:", so any line can be found and checked.
type lineGen struct {
	n, off int64
	line   int
	cur    []byte
}

func (g *lineGen) Read(p []byte) (int, error) {
	if g.off >= g.n {
		return 0, io.EOF
	}
	w := 0
	for w < len(p) && g.off < g.n {
		if len(g.cur) == 0 {
			g.line++
			g.cur = fmt.Appendf(g.cur[:0], "line %09d: the quick brown fox jumps over the lazy dog %d\n", g.line, g.line*7919%100003)
		}
		c := copy(p[w:], g.cur[:min(int64(len(g.cur)), g.n-g.off)])
		g.cur, w, g.off = g.cur[c:], w+c, g.off+int64(c)
	}
	return w, nil
}

// countWriter counts and checks what a child writes against a lineGen.
type countWriter struct {
	want   *bufio.Reader
	n      int64
	differ bool
}

func (c *countWriter) Write(p []byte) (int, error) {
	want := make([]byte, len(p))
	n, _ := io.ReadFull(c.want, want)
	if !bytes.Equal(want[:n], p) {
		c.differ = true
	}
	c.n += int64(len(p))
	return len(p), nil
}

// TestLargeFileMemory reads, appends to, patches and cats a large file
// (64 MiB; 1 GiB with -wsctl.bigfile) through wsctl in child processes,
// each of which stays under 64 MiB of peak RSS whatever the file's size:
// cat streams, a read takes a line range (a whole read is refused), and
// append and patch stream the file into its next version.
func TestLargeFileMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a large file")
	}
	size := int64(64 << 20)
	if *bigFile {
		size = 1 << 30
	}
	const rssLimit = 64 << 20
	ctx := context.Background()
	c := newCLI(t)
	st := c.open()
	run := c.seedRun(st, "run_big")
	p := vfs.MustPath("output/big.log")
	_, err := st.Runs.Workspace(run.ID, runs.HostScope).WriteFrom(ctx, p, &lineGen{n: size}, vfs.WriteOptions{})
	require.NoError(t, err)
	require.NoError(t, st.Close())

	report := func(name string, r childResult) {
		t.Logf("%s of %d MiB: peak RSS %.1f MiB", name, size>>20, float64(r.hwm)/(1<<20))
		assert.Less(t, r.hwm, int64(rssLimit), "%s peak RSS", name)
	}

	cw := &countWriter{want: bufio.NewReader(&lineGen{n: size})}
	r := childRun(t, c.store, "", cw, "cat", run.ID, p.String())
	require.Equal(t, 0, r.code, r.err)
	assert.Equal(t, size, cw.n)
	assert.False(t, cw.differ, "cat writes the file's bytes")
	report("cat", r)

	batch := func(lines ...string) []map[string]any {
		r := childRun(t, c.store, strings.Join(lines, "\n")+"\n", nil, "batch")
		require.Equal(t, 0, r.code, r.err)
		var out []map[string]any
		for line := range strings.Lines(string(r.out)) {
			var m map[string]any
			require.NoError(t, json.Unmarshal([]byte(line), &m), line)
			out = append(out, m)
		}
		report("batch "+strings.Join(lines, " "), r)
		return out
	}
	out := batch(`{"op":"read","runId":"run_big","path":"output/big.log","startLine":1000,"endLine":1002}`)
	require.Len(t, out, 1)
	require.Equal(t, true, out[0]["ok"], out[0])
	res := out[0]["result"].(map[string]any)
	assert.True(t, strings.HasPrefix(res["content"].(string), "line 000001000:"))
	assert.Equal(t, 3, strings.Count(res["content"].(string), "\n"))
	assert.Equal(t, true, res["totalLinesUnknown"])

	out = batch(`{"op":"read","runId":"run_big","path":"output/big.log"}`)
	require.Equal(t, false, out[0]["ok"], out[0])
	assert.Equal(t, "workspace.size_limit_exceeded", out[0]["error"].(map[string]any)["code"])

	out = batch(`{"op":"append","runId":"run_big","path":"output/big.log","content":"END\n"}`)
	require.Equal(t, true, out[0]["ok"], out[0])
	assert.EqualValues(t, size+4, out[0]["result"].(map[string]any)["size"])

	out = batch(`{"op":"patch","runId":"run_big","path":"output/big.log","old":"line 000000100:","new":"LINE 000000100:"}`)
	require.Equal(t, true, out[0]["ok"], out[0])
	assert.EqualValues(t, size+4, out[0]["result"].(map[string]any)["size"])

	out = batch(`{"op":"read","runId":"run_big","path":"output/big.log","startLine":100,"endLine":101}`)
	require.Equal(t, true, out[0]["ok"], out[0])
	assert.True(t, strings.HasPrefix(out[0]["result"].(map[string]any)["content"].(string), "LINE 000000100:"))
	tail := &tailWriter{}
	r = childRun(t, c.store, "", tail, "cat", run.ID, "output/big.log")
	require.Equal(t, 0, r.code, r.err)
	assert.Equal(t, size+4, tail.n)
	assert.True(t, bytes.HasSuffix(tail.last, []byte("END\n")), "%q", tail.last)
	report("cat after append and patch", r)
}

// tailWriter keeps the count and the last bytes of what it is written.
type tailWriter struct {
	n    int64
	last []byte
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	w.last = append(w.last, p...)
	if len(w.last) > 64 {
		w.last = append([]byte(nil), w.last[len(w.last)-64:]...)
	}
	return len(p), nil
}
