//go:build linux || darwin || freebsd || openbsd || netbsd || dragonfly

package vfs_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// TestHostSpecialFilesAreNotRemoved: a FIFO, which the store neither
// reads nor writes, is not removed either, nor through a link to it.
func TestHostSpecialFilesAreNotRemoved(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644))
	require.NoError(t, os.Symlink("fifo", filepath.Join(dir, "to-fifo")))
	h := openHost(t, dir, true)
	for _, name := range []string{"fifo", "to-fifo"} {
		_, err := h.RemoveFile(context.Background(), vfs.MustPath(name))
		hostCode(t, err, wserr.InvalidPath, name)
		_, err = os.Lstat(filepath.Join(dir, name))
		assert.NoError(t, err, "%s stays", name)
	}
}

// TestHostLockWaitIsBounded: a change whose directory another writer
// keeps locked fails with store.busy once the wait is over, changing
// nothing.
func TestHostLockWaitIsBounded(t *testing.T) {
	defer vfs.SetHostLockWait(200 * time.Millisecond)()
	dir := t.TempDir()
	writeHostTree(t, dir, map[string]string{"a.txt": "a\n"})
	h := openHost(t, dir, true)
	d, err := os.Open(dir)
	require.NoError(t, err)
	defer d.Close()
	require.NoError(t, syscall.Flock(int(d.Fd()), syscall.LOCK_EX))

	ctx := context.Background()
	_, err = h.Write(ctx, vfs.MustPath("a.txt"), []byte("b\n"), vfs.WriteOptions{})
	hostCode(t, err, wserr.Busy, "a.txt")
	_, err = h.RemoveFile(ctx, vfs.MustPath("a.txt"))
	hostCode(t, err, wserr.Busy, "a.txt")
	b, err := os.ReadFile(filepath.Join(dir, "a.txt"))
	require.NoError(t, err)
	assert.Equal(t, "a\n", string(b))

	require.NoError(t, syscall.Flock(int(d.Fd()), syscall.LOCK_UN))
	_, err = h.Write(ctx, vfs.MustPath("a.txt"), []byte("b\n"), vfs.WriteOptions{})
	require.NoError(t, err, "the lock released, the write goes through")
}

// TestHostRewriteKeepsPermissionBits: a rewrite keeps the permission bits
// exactly, and does not carry setuid or setgid to the new content.
func TestHostRewriteKeepsPermissionBits(t *testing.T) {
	dir := t.TempDir()
	h := openHost(t, dir, true)
	for _, mode := range []fs.FileMode{0o600, 0o755, 0o640 | fs.ModeSetuid, 0o750 | fs.ModeSetgid} {
		name := filepath.Join(dir, "f")
		os.Remove(name)
		require.NoError(t, os.WriteFile(name, []byte("x"), 0o600))
		require.NoError(t, os.Chmod(name, mode))
		_, err := h.Write(context.Background(), vfs.MustPath("f"), []byte("y"), vfs.WriteOptions{})
		require.NoError(t, err)
		fi, err := os.Stat(name)
		require.NoError(t, err)
		assert.Equal(t, mode.Perm(), fi.Mode()&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky), "from %v", mode)
	}
}
