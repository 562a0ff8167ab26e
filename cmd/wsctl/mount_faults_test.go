//go:build linux

package main

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mountTmpfs mounts a tmpfs of size bytes on a new directory and unmounts
// it when the test ends. It skips the test where this process may not
// mount (not root, or no CAP_SYS_ADMIN in its namespace).
func mountTmpfs(t *testing.T, size int64) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "mnt")
	require.NoError(t, os.Mkdir(dir, 0o755))
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// TestReadOnlyStoreIsReadNotChanged: a store on a read-only file system
// (a tmpfs remounted read-only) or in a directory this user may not write
// (chmod; root passes permissions, so that case runs only as another
// user) is served to every reading command, fsck included, and every
// change is refused with store.read_only (exit status 8), batch's too,
// while batch still answers reads.
func TestReadOnlyStoreIsReadNotChanged(t *testing.T) {
	bin := wsctlBinary(t)
	for _, how := range []string{"mount", "chmod"} {
		t.Run(how, func(t *testing.T) {
			var base string
			if how == "mount" {
				base = mountTmpfs(t, 64<<20)
			} else {
				if os.Geteuid() == 0 {
					t.Skip("root writes whatever the permissions say")
				}
				base = t.TempDir()
			}
			c := binCLI{t: t, bin: bin, store: filepath.Join(base, "store")}
			codes := c.batch(createLine, writeLine("r", "output/a.md", "alpha\n"), `{"op":"finish","runId":"r"}`)
			require.Equal(t, []string{"", "", ""}, codes)
			if how == "mount" {
				require.NoError(t, syscall.Mount("", base, "", syscall.MS_REMOUNT|syscall.MS_RDONLY, ""))
			} else {
				require.NoError(t, os.Chmod(filepath.Join(c.store, "wsstore.db"), 0o444))
				require.NoError(t, os.Chmod(c.store, 0o555))
				t.Cleanup(func() { _ = os.Chmod(c.store, 0o755) })
			}
			before, err := os.ReadDir(c.store)
			require.NoError(t, err)

			out, errOut, status := c.run("", "cat", "r", "output/a.md")
			assert.Equal(t, 0, status, errOut)
			assert.Equal(t, "alpha\n", out)
			for _, args := range [][]string{{"runs"}, {"ls", "r"}, {"log", "r"}, {"checkpoints", "r"}, {"stats"}, {"du"}, {"fsck"}, {"show", "r"},
				{"sql", "SELECT count(*) FROM runs"}, {"gc", "--dry-run"}, {"prune", "--dry-run"}} {
				_, errOut, status := c.run("", args...)
				assert.Equal(t, 0, status, "%v: %s", args, errOut)
			}
			for _, args := range [][]string{{"gc"}, {"vacuum"}, {"rm", "r"}, {"init"}} {
				_, errOut, status := c.run("", args...)
				assert.Equal(t, 8, status, "%v: %s", args, errOut)
				assert.Contains(t, errOut, "store.read_only", "%v", args)
			}
			codes = c.batch(`{"op":"read","runId":"r","path":"output/a.md"}`, writeLine("r", "output/b.md", "no\n"),
				`{"op":"run.create","chat":{"kind":"character","stableChatId":"f"},"runId":"r2"}`)
			assert.Equal(t, []string{"", "store.read_only", "store.read_only"}, codes)
			after, err := os.ReadDir(c.store)
			require.NoError(t, err)
			assert.Equal(t, len(before), len(after), "nothing made beside the store")
		})
	}
}

// TestDiskFullOnASmallFilesystem: on a tmpfs filled up but for a little
// room, a write that does not fit is refused with store.disk_full and
// changes nothing: fsck finds the store sound and the files as they were;
// once space frees, the same write succeeds.
func TestDiskFullOnASmallFilesystem(t *testing.T) {
	bin := wsctlBinary(t)
	base := mountTmpfs(t, 16<<20)
	c := binCLI{t: t, bin: bin, store: filepath.Join(base, "store")}
	require.Equal(t, []string{"", ""}, c.batch(createLine, writeLine("r", "output/a.md", "alpha\n")))

	// Fill the file system, then give back a little room: enough to open
	// the store, not enough for the big write.
	fillLeaving(t, base, 256<<10)
	filler := filepath.Join(base, "filler")

	rng := rand.New(rand.NewPCG(1, 2))
	big := make([]byte, 3<<20)
	for i := range big {
		big[i] = byte('a' + rng.IntN(26))
		if rng.IntN(50) == 0 {
			big[i] = '\n'
		}
	}
	for _, content := range []string{string(big), string(big[:1<<20])} {
		codes := c.batch(writeLine("r", "output/big.md", content))
		assert.Equal(t, []string{"store.disk_full"}, codes)
	}
	_, errOut, status := c.run("", "fsck")
	assert.Equal(t, 0, status, errOut)
	_, errOut, status = c.run("", "cat", "r", "output/big.md")
	assert.Equal(t, 3, status, "the refused write left nothing: %s", errOut)
	out, errOut, status := c.run("", "cat", "r", "output/a.md")
	assert.Equal(t, 0, status, errOut)
	assert.Equal(t, "alpha\n", out)

	require.NoError(t, os.Remove(filler))
	assert.Equal(t, []string{""}, c.batch(writeLine("r", "output/big.md", string(big))), "works again once space frees")
	_, errOut, status = c.run("", "fsck")
	assert.Equal(t, 0, status, errOut)
}

// fillLeaving fills the file system under base with a file, leaving
// about room bytes free.
func fillLeaving(t *testing.T, base string, room int64) {
	t.Helper()
	f, err := os.Create(filepath.Join(base, "filler"))
	require.NoError(t, err)
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			require.True(t, errors.Is(err, syscall.ENOSPC), "%v", err)
			break
		}
	}
	fi, err := f.Stat()
	require.NoError(t, err)
	require.NoError(t, f.Truncate(fi.Size()-room))
	require.NoError(t, f.Close())
}

// TestSpaceComesBackOnANearlyFullDisk: with 160 KiB left on the file
// system, less than one step of giving pages back writes to the log, the
// gc after a 6 MiB run's deletion still shrinks the database file (the
// steps fit themselves to the room, folding the log after each), and
// vacuum finds nothing left to do.
func TestSpaceComesBackOnANearlyFullDisk(t *testing.T) {
	bin := wsctlBinary(t)
	base := mountTmpfs(t, 16<<20)
	c := binCLI{t: t, bin: bin, store: filepath.Join(base, "store")}
	big := randomLetters(5, 6, 6<<20)
	require.Equal(t, []string{"", ""}, c.batch(createLine, writeLine("r", "output/big.md", string(big))))
	_, errOut, status := c.run("", "rm", "--force", "r")
	require.Equal(t, 0, status, errOut)
	dbPath := filepath.Join(c.store, "wsstore.db")
	fi, err := os.Stat(dbPath)
	require.NoError(t, err)
	require.Greater(t, fi.Size(), int64(4<<20), "the file still holds the run's pages")

	fillLeaving(t, base, 160<<10)
	_, errOut, status = c.run("", "gc", "--grace", "0")
	require.Equal(t, 0, status, errOut)
	fi, err = os.Stat(dbPath)
	require.NoError(t, err)
	assert.Less(t, fi.Size(), int64(1<<20), "the freed pages went back to the file system")
	out, errOut, status := c.run("", "vacuum", "--json")
	require.Equal(t, 0, status, errOut)
	assert.Contains(t, out, `"freePagesBefore": 0,`)
	_, errOut, status = c.run("", "fsck")
	assert.Equal(t, 0, status, errOut)
}

// TestFilesOntoAFullOrReadOnlyFilesystem: export (to a file and to
// standard output), checkout, actor download and import into a new store,
// aimed at a file system that is full or read-only, fail with store.disk_full or
// store.read_only (exit status 8) and leave nothing behind there: no
// archive, no temporary file, no directory checkout made.
func TestFilesOntoAFullOrReadOnlyFilesystem(t *testing.T) {
	bin := wsctlBinary(t)
	c := binCLI{t: t, bin: bin, store: filepath.Join(t.TempDir(), "store")}
	big := randomLetters(3, 4, 1<<20)
	require.Equal(t, []string{"", ""}, c.batch(createLine, writeLine("r", "output/big.md", string(big))))
	arc := filepath.Join(t.TempDir(), "all.wsar")
	_, errOut, status := c.run("", "export", "--all", arc)
	require.Equal(t, 0, status, errOut)
	bigFile := filepath.Join(t.TempDir(), "big.md")
	require.NoError(t, os.WriteFile(bigFile, big, 0o644))
	_, errOut, status = c.run("", "actor", "upload", "alice", "big.md", bigFile)
	require.Equal(t, 0, status, errOut)
	// A directory where the downloaded file goes came from the command line.
	_, errOut, status = c.run("", "actor", "download", "alice", "big.md", t.TempDir())
	assert.Equal(t, 2, status, errOut)
	assert.Contains(t, errOut, "wsctl.invalid_argument")

	full := mountTmpfs(t, 256<<10)
	ro := mountTmpfs(t, 1<<20)
	require.NoError(t, syscall.Mount("", ro, "", syscall.MS_REMOUNT|syscall.MS_RDONLY, ""))
	empty := func(dir string) {
		t.Helper()
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		assert.Empty(t, entries, "nothing left in %s", dir)
	}

	for _, tc := range []struct {
		dir, code string
	}{{full, "store.disk_full"}, {ro, "store.read_only"}} {
		_, errOut, status = c.run("", "export", "--all", filepath.Join(tc.dir, "x.wsar"))
		assert.Equal(t, 8, status, errOut)
		assert.Contains(t, errOut, tc.code)
		_, errOut, status = c.run("", "checkout", "r", filepath.Join(tc.dir, "co"))
		assert.Equal(t, 8, status, errOut)
		assert.Contains(t, errOut, tc.code)
		_, errOut, status = c.run("", "actor", "download", "alice", "big.md", filepath.Join(tc.dir, "big.md"))
		assert.Equal(t, 8, status, errOut)
		assert.Contains(t, errOut, tc.code)
		_, errOut, status = binCLI{t: t, bin: bin, store: filepath.Join(tc.dir, "new")}.run("", "import", arc)
		if tc.dir == ro {
			assert.Equal(t, 8, status, errOut)
			assert.Contains(t, errOut, tc.code)
		}
		empty(tc.dir)
	}

	// Standard output on a full file system.
	out, err := os.Create(filepath.Join(full, "out.wsar"))
	require.NoError(t, err)
	defer out.Close()
	cmd := exec.Command(bin, "--store", c.store, "export", "--all", "-")
	var stderr strings.Builder
	cmd.Stdout, cmd.Stderr = out, &stderr
	assert.Equal(t, 8, exitStatusOf(cmd.Run()), stderr.String())
	assert.Contains(t, stderr.String(), "store.disk_full")
}
