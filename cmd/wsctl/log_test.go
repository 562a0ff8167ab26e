package main

import (
	"bufio"
	"context"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

// TestLogFollow follows a running run: it prints the journal so far, then
// each new event as it is committed, and returns when the run completes.
func TestLogFollow(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	st := c.open()
	c.seedRun(st, "run_a")

	f := startFollow(t, c, c.app(), "run_a")
	ctx, lines, done := f.ctx, f.lines, f.done
	next := func() string {
		t.Helper()
		require.True(t, lines.Scan(), "follow ended early: %v", lines.Err())
		return lines.Text()
	}
	for i := 1; i <= 9; i++ {
		assert.True(t, strings.HasPrefix(strings.TrimSpace(next()), strconv.Itoa(i)+" "))
	}
	// Only now, with the backlog read, does the run change.
	_, err := st.Runs.Workspace("run_a", runs.ModelScope).Write(ctx, vfs.MustPath("output/c.md"), []byte("three\n"), vfs.WriteOptions{})
	require.NoError(t, err)
	assert.Contains(t, next(), "workspace_file_written   output/c.md")
	assert.Contains(t, next(), "checkpoint_created")
	_, err = st.Runs.Workspace("run_a", runs.ModelScope).Write(ctx, vfs.MustPath("scratch/s.md"), []byte("draft\n"), vfs.WriteOptions{})
	require.NoError(t, err)
	assert.Contains(t, next(), "workspace_file_written   scratch/s.md")
	assert.Contains(t, next(), "checkpoint_created")
	_, err = st.Runs.Finish(ctx, "run_a")
	require.NoError(t, err)
	assert.Contains(t, next(), "status_changed")
	assert.Contains(t, next(), "run_completed")
	// The transaction that completes the run journals the collection of
	// its scratch/ after the final event: the follow prints it too.
	assert.Contains(t, next(), "scratch_collected")
	assert.False(t, lines.Scan(), "follow stops after the run ends")
	assert.Equal(t, 0, <-done)
}

// TestLogFollowEndedRun returns at once for a run that has already ended.
func TestLogFollowEndedRun(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	st := c.open()
	c.seedRun(st, "run_a")
	_, err := st.Runs.Workspace("run_a", runs.ModelScope).Write(context.Background(), vfs.MustPath("scratch/s.md"), []byte("draft\n"), vfs.WriteOptions{})
	require.NoError(t, err)
	_, err = st.Runs.Finish(context.Background(), "run_a")
	require.NoError(t, err)
	out := c.ok("log", "run_a", "--follow", "--json")
	assert.Equal(t, c.ok("log", "run_a", "--json"), out, "every event, scratch_collected after the final one included")
	assert.Contains(t, out, `"scratch_collected"`)
}

// TestLogFollowDeletedRun: a run deleted while it is followed ends the
// follow with run.not_found (its journal, final event and all, went with
// it) instead of polling forever.
func TestLogFollowDeletedRun(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	st := c.open()
	c.seedRun(st, "run_a")
	f := startFollow(t, c, c.app(), "run_a")
	for range 9 {
		require.True(t, f.lines.Scan())
	}
	_, err := st.Runs.CancelAndDeleteRun(f.ctx, "run_a")
	require.NoError(t, err)
	for f.lines.Scan() {
	}
	assert.Equal(t, 3, <-f.done)
	assert.NoError(t, f.ctx.Err(), "the follow ended by itself")
	assert.Contains(t, f.errOut.String(), "run.not_found")
	assert.Contains(t, f.errOut.String(), "deleted while it was followed")
}

// TestLogFollowEndedThenDeleted: a run that completes and is then
// deleted (by the host, or by retention right after its final status)
// before the follower's next poll ends the follow normally: it saw the
// final event.
func TestLogFollowEndedThenDeleted(t *testing.T) {
	c := newCLI(t)
	st := c.open()
	c.seedRun(st, "run_a")
	a := c.app()
	// A slow poll, so that the deletion below comes before the follow's
	// next look (and whichever comes first, the follow must end with 0).
	a.followPoll = 300 * time.Millisecond
	f := startFollow(t, c, a, "run_a")
	for range 9 {
		require.True(t, f.lines.Scan())
	}
	_, err := st.Runs.Finish(f.ctx, "run_a")
	require.NoError(t, err)
	for f.lines.Scan() {
		if strings.Contains(f.lines.Text(), "run_completed") {
			break
		}
	}
	require.NoError(t, st.Runs.DeleteRun(f.ctx, "run_a"))
	for f.lines.Scan() {
	}
	assert.Equal(t, 0, <-f.done, "stderr: %s", f.errOut.String())
}

// follow is a "wsctl log RUN --follow" running in the background: its
// output line by line, its stderr, and its exit status once it ends.
type follow struct {
	ctx    context.Context
	lines  *bufio.Scanner
	errOut *strings.Builder
	done   chan int
}

// startFollow starts "log run --follow" with app. Its context has a
// deadline only so that a broken follow fails the test instead of hanging
// it; nothing is asserted about time.
func startFollow(t *testing.T, c *cli, app *app, run string) follow {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	pr, pw := io.Pipe()
	f := follow{ctx: ctx, lines: bufio.NewScanner(pr), errOut: &strings.Builder{}, done: make(chan int, 1)}
	go func() {
		code := execute(ctx, app, []string{"--store", c.store, "log", run, "--follow"}, strings.NewReader(""), pw, f.errOut)
		pw.Close()
		f.done <- code
	}()
	return f
}
