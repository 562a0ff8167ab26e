package tempfile_test

import (
	"os"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/internal/tempfile"
)

// TestCreateLeavesNothing: the file works while open, and no name of it is
// in the directory, even before it is closed where the system unlinks an
// open file (so a process killed meanwhile leaves nothing); once done,
// nothing is left anywhere.
func TestCreateLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("TMPDIR", dir)
	f, done, err := tempfile.Create("wsstore-test-*")
	require.NoError(t, err)
	_, err = f.WriteString("kept while open")
	require.NoError(t, err)
	_, err = f.Seek(0, 0)
	require.NoError(t, err)
	buf := make([]byte, 15)
	_, err = f.Read(buf)
	require.NoError(t, err)
	assert.Equal(t, "kept while open", string(buf))
	if runtime.GOOS != "windows" {
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		assert.Empty(t, entries, "unlinked while open")
	}
	require.NoError(t, done())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries)
}
