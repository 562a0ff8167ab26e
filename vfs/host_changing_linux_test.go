//go:build linux

package vfs_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// TestReadOfALogBeingWritten: a 20 MB build log another program appends a
// line to every few milliseconds: a read of its first lines answers them
// (its hash is of the bytes streamed, the log as it grew).
func TestReadOfALogBeingWritten(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "build.log")
	line := strings.Repeat("x", 99) + "\n"
	require.NoError(t, os.WriteFile(name, []byte(strings.Repeat(line, 200_000)), 0o644))
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	defer f.Close()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			fmt.Fprintf(f, "step %d\n", i)
		}
	}()
	defer func() { close(stop); <-done }()
	h, err := vfs.OpenHost(dir, false)
	require.NoError(t, err)
	defer h.Close()
	res, err := h.Read(context.Background(), vfs.MustPath("build.log"), vfs.ReadOptions{StartLine: 1, EndLine: 10})
	if assert.NoError(t, err) {
		assert.Equal(t, strings.Repeat(line, 10), string(res.Content))
	}
}

// TestReadOfAProcFile: a file whose stat size is not its length (procfs,
// sysfs, some FUSE file systems) is read whole.
func TestReadOfAProcFile(t *testing.T) {
	h, err := vfs.OpenHost("/proc/self", false)
	require.NoError(t, err)
	defer h.Close()
	res, err := h.Read(context.Background(), vfs.MustPath("status"), vfs.ReadOptions{})
	if assert.NoError(t, err) {
		assert.Contains(t, string(res.Content), "Name:")
	}
}

// TestReadOfALeasedFile: another program (Samba's kernel oplocks, an NFS
// server's delegation) holds a write lease on a host file and gives it back
// when asked. A read waits for that, as a blocking open does, rather than
// fail where the non-blocking open is refused.
func TestReadOfALeasedFile(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "leased.txt")
	require.NoError(t, os.WriteFile(name, []byte("hello\n"), 0o644))
	holder, err := os.OpenFile(name, os.O_WRONLY, 0)
	require.NoError(t, err)
	defer holder.Close()
	if _, _, e := syscall.Syscall(syscall.SYS_FCNTL, holder.Fd(), syscall.F_SETLEASE, syscall.F_WRLCK); e != 0 {
		t.Skipf("no write lease here: %v", e)
	}
	// The holder gives the lease back as soon as the kernel asks it to, as
	// Samba and knfsd do (SIGIO is not delivered to this test; poll instead).
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			r, _, _ := syscall.Syscall(syscall.SYS_FCNTL, holder.Fd(), syscall.F_GETLEASE, 0)
			if r != syscall.F_WRLCK {
				syscall.Syscall(syscall.SYS_FCNTL, holder.Fd(), syscall.F_SETLEASE, syscall.F_UNLCK)
				return
			}
		}
	}()
	h, err := vfs.OpenHost(dir, false)
	require.NoError(t, err)
	defer h.Close()
	res, err := h.Read(context.Background(), vfs.MustPath("leased.txt"), vfs.ReadOptions{})
	assert.NotEqual(t, wserr.Internal, wserr.CodeOf(err), "a leased file's read: %v", err)
	if assert.NoError(t, err) {
		assert.Equal(t, "hello\n", string(res.Content))
	}
}
