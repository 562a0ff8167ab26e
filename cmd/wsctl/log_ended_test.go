package main

import (
	"bufio"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLogFollowEndedThenDeleted: a run that completes and is then
// deleted (by the host, or by retention right after its final status)
// before the follower's next poll ends the follow normally: it saw the
// final event.
func TestLogFollowEndedThenDeleted(t *testing.T) {
	c := newCLI(t)
	st := c.open()
	c.seedRun(st, "run_a")
	// A deadline only so that a broken follow fails the test instead of
	// hanging it; nothing is asserted about time.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pr, pw := io.Pipe()
	var errOut strings.Builder
	done := make(chan int, 1)
	a := c.app()
	// A slow poll, so that the deletion below comes before the follow's
	// next look (and whichever comes first, the follow must end with 0).
	a.followPoll = 300 * time.Millisecond
	go func() {
		code := execute(ctx, a, []string{"--store", c.store, "log", "run_a", "--follow"}, strings.NewReader(""), pw, &errOut)
		pw.Close()
		done <- code
	}()
	lines := bufio.NewScanner(pr)
	for range 9 {
		require.True(t, lines.Scan())
	}
	_, err := st.Runs.Finish(ctx, "run_a")
	require.NoError(t, err)
	for lines.Scan() {
		if strings.Contains(lines.Text(), "run_completed") {
			break
		}
	}
	require.NoError(t, st.Runs.DeleteRun(ctx, "run_a"))
	for lines.Scan() {
	}
	assert.Equal(t, 0, <-done, "stderr: %s", errOut.String())
}
