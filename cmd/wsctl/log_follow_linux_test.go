package main

import (
	"bufio"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLogFollowEndsWhenItsReaderGoes: `wsctl log --follow | head -1` ends
// once head has gone, though the run goes on and nothing new is written
// (only a write would fail): each poll looks whether the output pipe
// still has a reader.
func TestLogFollowEndsWhenItsReaderGoes(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	st := c.open()
	c.seedRun(st, "run_a")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pr, pw, err := os.Pipe()
	require.NoError(t, err)
	done := make(chan int, 1)
	go func() {
		code := execute(ctx, c.app(), []string{"--store", c.store, "log", "run_a", "--follow"}, strings.NewReader(""), pw, &strings.Builder{})
		pw.Close()
		done <- code
	}()
	lines := bufio.NewScanner(pr)
	for range 9 { // the journal so far: nothing more is written
		require.True(t, lines.Scan(), "the journal so far: %v", lines.Err())
	}
	require.NoError(t, pr.Close()) // what reads it exits
	code := <-done
	assert.NoError(t, ctx.Err(), "the follow ended by itself, not at the test's deadline")
	assert.Equal(t, 0, code)
}
