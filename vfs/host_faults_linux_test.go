package vfs_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// TestHostWritesOnAFullOrReadOnlyFilesystem: a host write that the file
// system refuses for room or for being read-only is store.disk_full or
// store.read_only, as the store's own writes are, and the file keeps its
// content. It mounts a tmpfs, so it runs as root only.
func TestHostWritesOnAFullOrReadOnlyFilesystem(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mnt")
	require.NoError(t, os.Mkdir(dir, 0o755))
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", 64<<10)); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.md"), []byte("old"), 0o644))
	h := openHost(t, dir, true)
	ctx := t.Context()
	big := []byte(strings.Repeat("x", 1<<20))
	for _, mode := range []vfs.WriteMode{vfs.Replace, vfs.Append} {
		_, err := h.Write(ctx, vfs.MustPath("a.md"), big, vfs.WriteOptions{Mode: mode})
		assert.Equal(t, wserr.DiskFull, wserr.CodeOf(err), "%s: %v", mode, err)
	}
	require.NoError(t, syscall.Mount("", dir, "", syscall.MS_REMOUNT|syscall.MS_RDONLY, ""))
	_, err := h.Write(ctx, vfs.MustPath("a.md"), []byte("new"), vfs.WriteOptions{})
	assert.Equal(t, wserr.ReadOnly, wserr.CodeOf(err), "%v", err)
	b, err := os.ReadFile(filepath.Join(dir, "a.md"))
	require.NoError(t, err)
	assert.Equal(t, "old", string(b))
}
