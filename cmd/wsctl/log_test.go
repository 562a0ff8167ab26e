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

	// A deadline only so that a broken follow fails the test instead of
	// hanging it; nothing is asserted about time.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		code := execute(ctx, c.app(), []string{"--store", c.store, "log", "run_a", "--follow"}, strings.NewReader(""), pw, io.Discard)
		pw.Close()
		done <- code
	}()
	lines := bufio.NewScanner(pr)
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
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pr, pw := io.Pipe()
	var errOut strings.Builder
	done := make(chan int, 1)
	go func() {
		code := execute(ctx, c.app(), []string{"--store", c.store, "log", "run_a", "--follow"}, strings.NewReader(""), pw, &errOut)
		pw.Close()
		done <- code
	}()
	lines := bufio.NewScanner(pr)
	for range 9 {
		require.True(t, lines.Scan())
	}
	_, err := st.Runs.CancelAndDeleteRun(ctx, "run_a")
	require.NoError(t, err)
	for lines.Scan() {
	}
	assert.Equal(t, 3, <-done)
	assert.NoError(t, ctx.Err(), "the follow ended by itself")
	assert.Contains(t, errOut.String(), "run.not_found")
	assert.Contains(t, errOut.String(), "deleted while it was followed")
}
