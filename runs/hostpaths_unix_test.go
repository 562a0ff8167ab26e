//go:build linux || darwin || freebsd || openbsd || netbsd || dragonfly

package runs_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/vfs"
)

// TestHostDeleteDescribesWhatItRemoved: the file a host delete reports is
// the one it removed, read under the directory's write lock, even when
// another writer that holds the lock changes the file while the delete
// waits for it.
func TestHostDeleteDescribesWhatItRemoved(t *testing.T) {
	h := newHostEnv(t)
	name := filepath.Join(h.proj, "main.go")

	// Another writer of the directory holds its lock (flock, as the
	// store's own writers take it).
	d, err := os.Open(h.proj)
	require.NoError(t, err)
	defer d.Close()
	require.NoError(t, syscall.Flock(int(d.Fd()), syscall.LOCK_EX))

	type result struct {
		fi  vfs.FileInfo
		err error
	}
	done := make(chan result, 1)
	go func() {
		fi, err := h.ws().Delete(h.ctx, vfs.MustPath("host/proj/main.go"))
		done <- result{fi, err}
	}()
	// Give the delete time to reach the lock; the outcome below does not
	// depend on how long it takes, only a wrong delete shows faster.
	time.Sleep(100 * time.Millisecond)
	select {
	case r := <-done:
		t.Fatalf("the delete did not wait for the lock: %+v", r)
	default:
	}
	changed := []byte("package main // changed by the lock's holder\n")
	require.NoError(t, os.WriteFile(name, changed, 0o600))
	require.NoError(t, syscall.Flock(int(d.Fd()), syscall.LOCK_UN))

	r := <-done
	require.NoError(t, r.err)
	assert.Equal(t, cas.Sum(changed), r.fi.Hash, "the hash of the content removed, not of the content before the lock")
	assert.Equal(t, int64(len(changed)), r.fi.Size)
	assert.NoFileExists(t, name)
}
