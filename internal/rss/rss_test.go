package rss_test

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/internal/rss"
)

// TestMain lets the test binary be its own child: with RSS_TEST_MIB set it
// touches that many mebibytes, holds them for 50 ms, and exits with
// RSS_TEST_EXIT.
func TestMain(m *testing.M) {
	if s := os.Getenv("RSS_TEST_MIB"); s != "" {
		n, _ := strconv.Atoi(s)
		b := make([]byte, n<<20)
		for i := range b {
			b[i] = byte(i)
		}
		code, _ := strconv.Atoi(os.Getenv("RSS_TEST_EXIT"))
		os.Stdout.Write(b[len(b)-1:])
		// Held past a few of Peak's polls: after a parent that held
		// more, wait4's mark cannot tell the child's own, and a child
		// gone within a millisecond of its growth could be missed on a
		// busy machine.
		time.Sleep(50 * time.Millisecond)
		os.Exit(code)
	}
	os.Exit(m.Run())
}

func child(t *testing.T, mib, exit int) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), "RSS_TEST_MIB="+strconv.Itoa(mib), "RSS_TEST_EXIT="+strconv.Itoa(exit))
	return cmd
}

func TestPeak(t *testing.T) {
	small, err := rss.Peak(child(t, 1, 0))
	if errors.Is(err, rss.ErrUnsupported) {
		t.Skip(err)
	}
	require.NoError(t, err)
	large, err := rss.Peak(child(t, 96, 0))
	require.NoError(t, err)
	t.Logf("peak of a child holding 1 MiB: %d KiB; 96 MiB: %d KiB", small>>10, large>>10)
	assert.Greater(t, large, int64(96<<20), "the child's 96 MiB are counted")
	assert.Less(t, large, int64(96<<20)+64<<20)
	assert.Less(t, small, int64(64<<20), "only the child's own memory, not the parent's")
	assert.Greater(t, small, int64(0))

	t.Run("ParentIsNotCounted", func(t *testing.T) {
		// The parent holds far more than the child: the child's peak
		// must not take it up.
		hold := make([]byte, 128<<20)
		for i := range hold {
			hold[i] = 1
		}
		n, err := rss.Peak(child(t, 1, 0))
		require.NoError(t, err)
		assert.Less(t, n, int64(64<<20))
		_ = hold[len(hold)-1]
	})
	t.Run("ExitStatus", func(t *testing.T) {
		n, err := rss.Peak(child(t, 8, 3))
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee)
		assert.Equal(t, 3, ee.ExitCode())
		assert.Greater(t, n, int64(8<<20))
	})
	t.Run("ErrStart", func(t *testing.T) {
		_, err := rss.Peak(exec.Command("/nonexistent/binary"))
		assert.Error(t, err)
	})
}
