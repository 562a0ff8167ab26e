package vfs_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// moveOverAndOver runs move again and again in another goroutine (a
// program that does not take the store's lock) until the returned stop
// is called, which waits for it and fails the test if move failed.
func moveOverAndOver(t *testing.T, move func() error) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	var moveErr error
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			if err := move(); err != nil {
				moveErr = err
				return
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
		require.NoError(t, moveErr)
	}
}

// hostAppendsWhile appends "x\n" to p until n appends succeeded (or 50n
// were tried) while move runs over and over in another goroutine (a
// program that does not take the store's lock), and returns how many
// appends succeeded. An append may fail only because what it names is
// missing at that moment.
func hostAppendsWhile(t *testing.T, h *vfs.HostFS, p vfs.Path, n int, move func() error) int {
	t.Helper()
	ctx := context.Background()
	stop := moveOverAndOver(t, move)
	ok := 0
	for try := 0; ok < n && try < 50*n; try++ {
		_, err := h.Write(ctx, p, []byte("x\n"), vfs.WriteOptions{Mode: vfs.Append})
		switch {
		case err == nil:
			ok++
		case wserr.Is(err, wserr.FileNotFound):
		default:
			stop()
			t.Fatalf("append %s: %v", p, err)
		}
	}
	stop()
	return ok
}

// checkAppended checks that each file still starts with its own first
// line, followed only by appended lines, that the appends all landed
// (none was lost by one file's content being written over another), and
// that no temporary file was left.
func checkAppended(t *testing.T, dir string, firstLines map[string]string, appended int) {
	t.Helper()
	total := 0
	for name, first := range firstLines {
		b, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		require.Equal(t, first, lines[0], "%s keeps its own first line: it was not written with another file's content", name)
		for _, l := range lines[1:] {
			require.Equal(t, "x", l, "%s holds only its appends", name)
		}
		total += len(lines) - 1
	}
	assert.Equal(t, appended, total, "every append landed once")
	require.NoError(t, filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		require.NoError(t, err)
		assert.False(t, strings.HasPrefix(d.Name(), ".wsstore-write-"), "temporary file left: %s", p)
		return nil
	}))
}

// TestHostChangeWhileDirectoriesMove: another program swaps two
// directories of the mount by renaming them, over and over, while the
// store appends to a/f.txt. Each append reads and replaces the file of
// one directory, whichever held the name when the append resolved it;
// it never reads one directory's file and renames over the other's.
func TestHostChangeWhileDirectoriesMove(t *testing.T) {
	dir := t.TempDir()
	writeHostTree(t, dir, map[string]string{"a/f.txt": "a\n", "b/f.txt": "b\n", "a/id": "a", "b/id": "b"})
	h := openHost(t, dir, true)
	join := func(n string) string { return filepath.Join(dir, n) }
	ok := hostAppendsWhile(t, h, vfs.MustPath("a/f.txt"), 300, func() error {
		if err := os.Rename(join("a"), join("t")); err != nil {
			return err
		}
		if err := os.Rename(join("b"), join("a")); err != nil {
			return err
		}
		return os.Rename(join("t"), join("b"))
	})
	t.Logf("%d appends found the file", ok)
	// The directories moved with their id files; each f.txt starts with
	// the id of the directory it is in.
	first := map[string]string{}
	for _, d := range []string{"a", "b"} {
		id, err := os.ReadFile(filepath.Join(dir, d, "id"))
		require.NoError(t, err)
		first[d+"/f.txt"] = string(id)
	}
	checkAppended(t, dir, first, ok)
}

// TestHostChangeWhileLinkMoves: another program retargets a symlink
// between two files, over and over, while the store appends through it.
// Each append reads and replaces the file the link led to when the
// append resolved it.
func TestHostChangeWhileLinkMoves(t *testing.T) {
	dir := t.TempDir()
	writeHostTree(t, dir, map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
	require.NoError(t, os.Symlink("a.txt", filepath.Join(dir, "cur")))
	h := openHost(t, dir, true)
	tmp := filepath.Join(dir, "cur.new")
	toB := true
	ok := hostAppendsWhile(t, h, vfs.MustPath("cur"), 300, func() error {
		target := "a.txt"
		if toB {
			target = "b.txt"
		}
		toB = !toB
		if err := os.Symlink(target, tmp); err != nil {
			return err
		}
		return os.Rename(tmp, filepath.Join(dir, "cur"))
	})
	t.Logf("%d of 300 appends", ok)
	assert.Equal(t, 300, ok, "the link always leads to a file")
	checkAppended(t, dir, map[string]string{"a.txt": "a", "b.txt": "b"}, ok)
}

// TestHostRemoveWhileFileComesAndGoes: another program removes and
// creates the file again and again while the store removes it: each
// removal either removes a file and describes it, or finds none
// (workspace.file_not_found), or, if the file kept changing under it,
// says so (workspace.write_stale_file); never another error.
func TestHostRemoveWhileFileComesAndGoes(t *testing.T) {
	dir := t.TempDir()
	h := openHost(t, dir, true)
	name := filepath.Join(dir, "f.txt")
	stop := moveOverAndOver(t, func() error {
		os.WriteFile(name, []byte("content\n"), 0o644)
		os.Remove(name)
		return nil
	})
	codes := map[wserr.Code]int{}
	for range 3000 {
		fi, err := h.RemoveFile(context.Background(), vfs.MustPath("f.txt"))
		if err == nil {
			codes["ok"]++
			if fi.Size > 0 {
				assert.Equal(t, cas.Sum([]byte("content\n")), fi.Hash)
			}
			continue
		}
		codes[wserr.CodeOf(err)]++
	}
	stop()
	t.Logf("outcomes: %v", codes)
	for code := range codes {
		assert.Contains(t, []wserr.Code{"ok", wserr.FileNotFound, wserr.WriteStaleFile}, code)
	}
}

// TestHostRemoveLinkWhileDirectoriesMove: two directories each hold a
// link l to their own file id, and another program swaps the
// directories over and over. A removal of a/l describes the file the
// removed link led to, in the directory it was removed from.
func TestHostRemoveLinkWhileDirectoriesMove(t *testing.T) {
	dir := t.TempDir()
	writeHostTree(t, dir, map[string]string{"a/id": "a", "b/id": "b"})
	join := func(n ...string) string { return filepath.Join(append([]string{dir}, n...)...) }
	for _, d := range []string{"a", "b"} {
		require.NoError(t, os.Symlink("id", join(d, "l")))
	}
	h := openHost(t, dir, true)
	var mu sync.Mutex // held by the mover while the names are moving
	stop := moveOverAndOver(t, func() error {
		mu.Lock()
		defer mu.Unlock()
		return errors.Join(os.Rename(join("a"), join("t")), os.Rename(join("b"), join("a")), os.Rename(join("t"), join("b")))
	})
	removed := 0
	for try := 0; removed < 300 && try < 20000; try++ {
		fi, err := h.RemoveFile(context.Background(), vfs.MustPath("a/l"))
		if wserr.Is(err, wserr.FileNotFound) {
			continue
		}
		require.NoError(t, err)
		removed++
		mu.Lock()
		for _, d := range []string{"a", "b"} {
			if _, err := os.Lstat(join(d, "l")); err == nil {
				continue
			}
			id, err := os.ReadFile(join(d, "id"))
			require.NoError(t, err)
			assert.Equal(t, cas.Sum(id), fi.Hash, "described by the file the removed link led to")
			require.NoError(t, os.Symlink("id", join(d, "l")))
		}
		mu.Unlock()
	}
	stop()
	t.Logf("%d removals", removed)
}
