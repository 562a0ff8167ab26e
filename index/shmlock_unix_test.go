//go:build unix

package index

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// lockProbeEnv makes the test binary, run again as a child, try to take
// the lock that says a -shm file is in use (SQLite's "DMS" byte, 128, in
// the unix VFS) and exit 0 if it got it, 3 if another process holds it.
const lockProbeEnv = "WSSTORE_SHM_LOCK_PROBE"

func TestMain(m *testing.M) {
	if path := os.Getenv(lockProbeEnv); path != "" {
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			os.Exit(2)
		}
		lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: 0, Start: 128, Len: 1}
		if err := syscall.FcntlFlock(f.Fd(), syscall.F_SETLK, &lk); err != nil {
			os.Exit(3)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// shmInUse reports whether another process sees the -shm file at path in
// use by this one.
func shmInUse(t *testing.T, path string) bool {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), lockProbeEnv+"="+path)
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 3 {
		return true
	}
	require.NoError(t, err, "the lock probe")
	return false
}

// TestCheckpointerKeepsTheProcessShmLocks: closing the background
// checkpoint (the first part of DB.Close), and closing one of two DBs open
// on the same store in this process (the other one writing, or read-only),
// leave the process's locks on the -shm file in place while a connection
// still uses it. A descriptor of the
// file closed early dropped them all (POSIX), so another process could
// start the log's index over, or write, beside this one.
func TestCheckpointerKeepsTheProcessShmLocks(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	write := func(db *DB) {
		require.NoError(t, db.Update(ctx, func(tx *Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES ('shm.test', 'x') ON CONFLICT (key) DO UPDATE SET value = value || 'x'`)
			return err
		}))
	}
	db, err := Open(ctx, path, Options{})
	require.NoError(t, err)
	write(db) // the checkpointer reads the -shm header
	require.True(t, shmInUse(t, path+"-shm"), "the open store holds the lock")

	require.NoError(t, db.ckpt.close())
	require.True(t, shmInUse(t, path+"-shm"), "the write connection still uses the -shm file")

	other, err := Open(ctx, path, Options{})
	require.NoError(t, err)
	write(other)
	db.ckpt = nil // closed above
	require.NoError(t, db.Close())
	require.True(t, shmInUse(t, path+"-shm"), "the other DB still uses the -shm file")

	// A read-only DB holds the locks of its readers too.
	ro, err := Open(ctx, path, Options{ReadOnly: true})
	require.NoError(t, err)
	require.NoError(t, ro.View(ctx, func(tx *Tx) error {
		var n int
		return tx.GetContext(ctx, &n, `SELECT count(*) FROM meta`)
	}))
	write(other)
	require.NoError(t, other.Close())
	require.True(t, shmInUse(t, path+"-shm"), "the read-only DB still uses the -shm file")
	require.NoError(t, ro.Close())
}
