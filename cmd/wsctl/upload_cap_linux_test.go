package main

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/internal/storetest"
)

// TestUploadOfAFileTheCapRefusesStoresNothing: actor upload of a file (or
// of stdin redirected from one) gives its size, so a file larger than the
// room under the store's cap is refused before any of it is stored,
// rather than stored until the room runs out and then dropped: nothing
// is written for it, and a process killed meanwhile would leave nothing
// for gc either.
func TestUploadOfAFileTheCapRefusesStoresNothing(t *testing.T) {
	c := newCLI(t)
	c.ok("actor", "upload", "alice", "notes.md", writeTemp(t, "notes.md", []byte("notes")))
	big := make([]byte, 24<<20)
	_, _ = rand.Read(big)
	src := writeTemp(t, "big.bin", big)
	for _, stdin := range []bool{false, true} {
		args := []string{"--max-store-bytes", strconv.Itoa(8 << 20), "actor", "upload", "alice", "big.bin"}
		f, err := os.Open(src)
		require.NoError(t, err)
		if !stdin {
			args = append(args, src)
		}
		before := storetest.ProcIO(t, "wchar")
		_, errOut, code := c.runCtx(t.Context(), f, args...)
		written := storetest.ProcIO(t, "wchar") - before
		require.NoError(t, f.Close())
		assert.Equal(t, 4, code, "stdin %v: %s", stdin, errOut)
		assert.Contains(t, errOut, "workspace.size_limit_exceeded")
		assert.Less(t, written, int64(1<<20), "stdin %v: the refused content is not written", stdin)
	}
	assert.NotContains(t, c.ok("actor", "ls", "alice"), "big.bin")
}

func writeTemp(t *testing.T, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, b, 0o644))
	return p
}
