package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHeapPeak: WSCTL_HEAPPEAK makes the command write the largest heap it
// held when it ends: a few MiB for a command that holds little, at least
// the 16 MiB a batch request line of 16 MiB of content takes.
func TestHeapPeak(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := wsctlBinary(t)
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	peak := func(stdin string, args ...string) uint64 {
		t.Helper()
		f := filepath.Join(dir, "peak")
		cmd := exec.Command(bin, append([]string{"--store", store}, args...)...)
		cmd.Env = append(os.Environ(), heapPeakEnv+"="+f)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		n, err := strconv.ParseUint(string(b), 10, 64)
		require.NoError(t, err)
		return n
	}
	small := peak("", "init")
	assert.Positive(t, small)
	assert.Less(t, small, uint64(16<<20))

	content := strings.Repeat("the keeper lit the lamp at dusk\n", (16<<20)/32)
	session := `{"op":"run.create","runId":"big","chat":{"kind":"character","stableChatId":"keeper"}}` + "\n" +
		`{"op":"write","path":"output/big.md","content":"` + strings.ReplaceAll(content, "\n", `\n`) + `"}` + "\n"
	big := peak(session, "batch")
	assert.GreaterOrEqual(t, big, uint64(16<<20), "the request line and its content were held")
}
