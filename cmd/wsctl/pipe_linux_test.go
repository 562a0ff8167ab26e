package main

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// pipeRoom is the room growPipe can give a pipe here: pipeSize, or less
// where the system allows an unprivileged process less.
func pipeRoom() int {
	want := pipeSize
	if b, err := os.ReadFile("/proc/sys/fs/pipe-max-size"); err == nil {
		if max, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && max < want && os.Geteuid() != 0 {
			want = max
		}
	}
	return want
}

// growPipe gives a pipe pipeSize bytes of room, or the most this system
// allows, on either end, and leaves what is not a pipe alone.
func TestGrowPipe(t *testing.T) {
	want := pipeRoom()
	for _, end := range []string{"read", "write"} {
		t.Run(end, func(t *testing.T) {
			r, w, err := os.Pipe()
			require.NoError(t, err)
			defer r.Close()
			defer w.Close()
			f := r
			if end == "write" {
				f = w
			}
			before, err := unix.FcntlInt(f.Fd(), unix.F_GETPIPE_SZ, 0)
			require.NoError(t, err)
			require.Less(t, before, want, "a new pipe starts smaller")
			got := growPipe(f)
			assert.GreaterOrEqual(t, got, want)
			now, err := unix.FcntlInt(r.Fd(), unix.F_GETPIPE_SZ, 0)
			require.NoError(t, err)
			assert.Equal(t, got, now, "both ends share the pipe's room")
			assert.Equal(t, got, growPipe(f), "a pipe already large enough is left as it is")
		})
	}

	file, err := os.Create(filepath.Join(t.TempDir(), "not-a-pipe"))
	require.NoError(t, err)
	defer file.Close()
	assert.Zero(t, growPipe(file), "a regular file")
	assert.Zero(t, growPipe(strings.NewReader("x")), "a reader that is no file")
}

// wsctl batch, run as a host runs it with pipes for its input and output,
// grows both before it answers the first request, so a request of a few
// large files crosses in one write.
func TestBatchGrowsItsPipes(t *testing.T) {
	bin := wsctlBinary(t)
	cmd := exec.Command(bin, "--store", t.TempDir(), "batch")
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer cmd.Wait()
	defer in.Close()

	inFile, outFile := in.(*os.File), out.(*os.File)
	sizeOf := func(f *os.File) int {
		n, err := unix.FcntlInt(f.Fd(), unix.F_GETPIPE_SZ, 0)
		require.NoError(t, err)
		return n
	}
	want := pipeRoom()
	require.Less(t, sizeOf(inFile), want, "the pipes start at the default")
	require.Less(t, sizeOf(outFile), want)

	// A line past the default room, answered: the pipe had grown by then.
	line := `{"op":"run.create","runId":"r1","chat":{"kind":"k","stableChatId":"` + strings.Repeat("s", 100<<10) + `"}}` + "\n"
	_, err = io.WriteString(in, line)
	require.NoError(t, err)
	resp, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	assert.Contains(t, resp, `"ok"`)
	assert.GreaterOrEqual(t, sizeOf(inFile), want, "input pipe")
	assert.GreaterOrEqual(t, sizeOf(outFile), want, "output pipe")
}

// TestBatchCommitToAHostThatWentAway: the host reads two answers, then
// closes its end of batch's output (it crashed) and sends a commit. The
// commit's answer, which delivers its message, cannot be written: batch
// ends quietly with exit status 2 (the host's stream, not the store),
// not killed by SIGPIPE, after closing the store, and the commit is
// failed, not completed, so the host commits again when it comes back.
func TestBatchCommitToAHostThatWentAway(t *testing.T) {
	bin := wsctlBinary(t)
	store := t.TempDir()
	errOut := batchToAHostThatWentAway(t, bin, store, `{"op":"commit"}`)
	assert.Empty(t, errOut, "nothing printed: no one is left to read it")

	c := binCLI{t: t, bin: bin, store: store}
	listed, stderr, status := c.run("", "--json", "show", "r")
	require.Equal(t, 0, status, stderr)
	assert.Contains(t, listed, `"status": "failed"`)
	assert.NotContains(t, listed, `"completed"`)
	_, stderr, status = c.run("", "fsck")
	assert.Equal(t, 0, status, stderr)
}

// TestBatchWriteToAHostThatWentAway: a write whose answer cannot be
// written, the host's end closed, stays committed, and batch ends as
// for a commit: exit status 2, nothing printed, the store sound.
func TestBatchWriteToAHostThatWentAway(t *testing.T) {
	bin := wsctlBinary(t)
	store := t.TempDir()
	errOut := batchToAHostThatWentAway(t, bin, store,
		`{"op":"write","path":"output/late.md","content":"written"}`,
		`{"op":"write","path":"output/later.md","content":"never read"}`)
	assert.Empty(t, errOut, "nothing printed: no one is left to read it")

	c := binCLI{t: t, bin: bin, store: store}
	got, stderr, status := c.run("", "cat", "r", "output/late.md")
	require.Equal(t, 0, status, stderr)
	assert.Equal(t, "written", got, "the write whose answer was lost is committed")
	_, _, status = c.run("", "cat", "r", "output/later.md")
	assert.Equal(t, 3, status, "the line after it is not read")
	_, stderr, status = c.run("", "fsck")
	assert.Equal(t, 0, status, stderr)
}

// batchToAHostThatWentAway runs wsctl batch on store, reads the answers
// to a run.create and a write, closes its end of batch's output and sends
// lines. It requires batch to exit with status 2 and returns its stderr.
func batchToAHostThatWentAway(t *testing.T, bin, store string, lines ...string) string {
	t.Helper()
	cmd := exec.Command(bin, "--store", store, "batch")
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var errOut strings.Builder
	cmd.Stderr = &errOut
	require.NoError(t, cmd.Start())

	_, err = io.WriteString(in, `{"op":"run.create","runId":"r","chat":{"kind":"k","stableChatId":"s"}}`+"\n"+
		`{"op":"write","path":"output/main.md","content":"the reply"}`+"\n")
	require.NoError(t, err)
	br := bufio.NewReader(out)
	for range 2 {
		resp, err := br.ReadString('\n')
		require.NoError(t, err)
		require.Contains(t, resp, `"ok":true`)
	}
	require.NoError(t, out.(*os.File).Close())
	_, err = io.WriteString(in, strings.Join(lines, "\n")+"\n")
	require.NoError(t, err)
	require.NoError(t, in.Close())
	err = cmd.Wait()
	require.Equal(t, 2, exitStatusOf(err), "%v: %s", err, errOut.String())
	return errOut.String()
}
