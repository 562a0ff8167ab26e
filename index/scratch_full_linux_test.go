package index_test

import (
	"context"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/wserr"
)

// scratchFullEnv names, in the environment of a child process of the
// test, the full file system TestSpillFullDisk fills.
const scratchFullEnv = "WSSTORE_TEST_SCRATCH_FULL"

// TestSpillFullDisk: sets that spill onto a file system out of room, or
// out of inodes so that SQLite cannot even create its file, fail with
// store.disk_full as the store's own writes do, and so does every later
// use of them: never store.internal, nor store.corrupt from the
// half-written file. SQLite reads $TMPDIR once a process, so the sets
// fill up in a child process of the test's binary.
func TestSpillFullDisk(t *testing.T) {
	if os.Getenv(scratchFullEnv) != "" {
		fillSpill(t)
		return
	}
	for _, tc := range []struct{ name, opts string }{
		{"NoRoom", "size=1m"},
		{"NoInodes", "size=16m,nr_inodes=1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "mnt")
			require.NoError(t, os.Mkdir(dir, 0o755))
			if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, tc.opts); err != nil {
				t.Skipf("cannot mount a tmpfs here: %v", err)
			}
			t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
			cmd := exec.Command(os.Args[0], "-test.run=^TestSpillFullDisk$", "-test.v")
			cmd.Env = append(os.Environ(), "TMPDIR="+dir, "SQLITE_TMPDIR="+dir, scratchFullEnv+"=1")
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)
			require.Contains(t, string(out), "--- PASS: TestSpillFullDisk", "%s", out)
			left, err := os.ReadDir(dir)
			require.NoError(t, err)
			assert.Empty(t, left, "nothing left behind")
		})
	}
}

// fillSpill pushes to a list spilled to disk until the file system under
// it is full, and checks the codes of that failure and the later ones.
func fillSpill(t *testing.T) {
	sp := index.NewSpill(context.Background(), 0)
	defer func() { assert.NoError(t, sp.Close()) }()
	l := sp.NewList()
	item := make([]byte, 256)
	var err error
	for i := 0; err == nil && i < 1<<17; i++ { // 32 MiB: past the page cache and the file systems
		err = l.Push(binary.BigEndian.AppendUint32(item[:0:256], uint32(i))[:256])
	}
	requireCode(t, err, wserr.DiskFull)
	requireCode(t, l.Push(item), wserr.DiskFull)
	_, err = l.At(0)
	requireCode(t, err, wserr.DiskFull)
	_, err = sp.NewMap().Add(item, 1)
	requireCode(t, err, wserr.DiskFull)
}
