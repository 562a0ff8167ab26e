package mkdirs

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMissingThenRemoveEmpty(t *testing.T) {
	root := t.TempDir()
	p := filepath.Join(root, "a", "b", "c")
	made := Missing(p)
	assert.Equal(t, []string{filepath.Join(root, "a"), filepath.Join(root, "a", "b"), p}, made)
	require.NoError(t, os.MkdirAll(p, 0o755))
	assert.Empty(t, Missing(p))
	RemoveEmpty(made)
	assert.NoDirExists(t, filepath.Join(root, "a"))
	assert.DirExists(t, root, "what existed before stays")
}

func TestRemoveEmptyStopsAtAFile(t *testing.T) {
	root := t.TempDir()
	p := filepath.Join(root, "a", "b", "c")
	made := Missing(p)
	require.NoError(t, os.MkdirAll(p, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "a", "keep"), []byte("x"), 0o644))
	require.NoError(t, os.Remove(p)) // gone already: passed over
	RemoveEmpty(made)
	assert.NoDirExists(t, filepath.Join(root, "a", "b"))
	assert.FileExists(t, filepath.Join(root, "a", "keep"), "another program's file stays, and its directory")
}
