//go:build unix

package runs_test

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// locksOn counts the POSIX locks this process holds on the file at path
// (Linux's /proc/locks), -1 where that cannot be read.
func locksOn(t *testing.T, path string) int {
	f, err := os.Open("/proc/locks")
	if err != nil {
		return -1
	}
	defer f.Close()
	var st syscall.Stat_t
	require.NoError(t, syscall.Stat(path, &st))
	ino := fmt.Sprintf(":%d ", st.Ino)
	pid := fmt.Sprintf(" %d ", os.Getpid())
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := sc.Text() + " "; strings.Contains(l, pid) && strings.Contains(l, ino) {
			n++
		}
	}
	return n
}

// TestHostPathHardLinkToTheStore: a hard link to the store's database (or
// its shared-memory index) in an allowed host directory is never opened:
// reads, stats, writes through it are workspace.path_not_allowed, and a
// search passes it over, so the SQLite locks the process holds on the
// file are not dropped by closing a descriptor of it.
func TestHostPathHardLinkToTheStore(t *testing.T) {
	h := newHostEnv(t)
	db := h.st.DB.Path()
	for _, f := range []string{db, db + "-shm"} {
		if _, err := os.Stat(f); err != nil {
			continue
		}
		require.NoError(t, os.Link(f, filepath.Join(h.proj, filepath.Base(f)+".link")))
	}
	locks := locksOn(t, db)
	ws := h.ws()
	for _, name := range []string{"wsstore.db.link", "wsstore.db-shm.link"} {
		if _, err := os.Stat(filepath.Join(h.proj, name)); err != nil {
			continue
		}
		p := vfs.MustPath("host/proj/" + name)
		_, err := ws.Read(h.ctx, p, vfs.ReadOptions{})
		assert.Equal(t, wserr.PathNotAllowed, wserr.CodeOf(err), "read %s: %v", name, err)
		_, err = ws.Stat(h.ctx, p)
		assert.Equal(t, wserr.PathNotAllowed, wserr.CodeOf(err), "stat %s: %v", name, err)
		_, err = ws.Write(h.ctx, p, []byte("x"), vfs.WriteOptions{Mode: vfs.Append})
		assert.Equal(t, wserr.PathNotAllowed, wserr.CodeOf(err), "append %s: %v", name, err)
	}
	hits, err := hitsOf(ws.Search(h.ctx, "SQLite", vfs.SearchOptions{Path: vfs.MustPath("host/proj")}))
	require.NoError(t, err)
	assert.Empty(t, hits, "the links are passed over")
	if runtime.GOOS == "linux" && locks > 0 {
		assert.Equal(t, locks, locksOn(t, db), "the process's locks on the database are as they were")
	}
	_, err = h.svc.Run(h.ctx, h.run.ID)
	require.NoError(t, err)
}
