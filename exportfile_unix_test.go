//go:build unix

package wsstore_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/archive"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/wserr"
)

// TestExportFileThroughLinksAndPipes: an export named by a symbolic link
// replaces the file the link leads to and leaves the link a link; one
// named onto a pipe or a device writes into it, as onto standard output,
// and leaves it what it was; a link that leads nowhere, or round in a
// loop, is refused.
func TestExportFileThroughLinksAndPipes(t *testing.T) {
	ctx := context.Background()
	st := storetest.OpenStore(t)
	_, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "c"}, RunID: "r"})
	require.NoError(t, err)
	dir := t.TempDir()
	importable := func(t *testing.T, b []byte) {
		t.Helper()
		other := storetest.OpenStore(t)
		sum, err := other.Archive.Import(ctx, bytes.NewReader(b), archive.Options{})
		require.NoError(t, err)
		assert.Equal(t, 1, sum.Runs)
	}

	t.Run("Symlink", func(t *testing.T) {
		target := filepath.Join(dir, "target.wsar")
		require.NoError(t, os.WriteFile(target, []byte("old"), 0o600))
		link := filepath.Join(dir, "link.wsar")
		require.NoError(t, os.Symlink("target.wsar", link))
		_, err := st.ExportFile(ctx, link, archive.Scope{All: true}, archive.Options{})
		require.NoError(t, err)
		fi, err := os.Lstat(link)
		require.NoError(t, err)
		assert.NotZero(t, fi.Mode()&os.ModeSymlink, "the link stays a link")
		b, err := os.ReadFile(target)
		require.NoError(t, err)
		importable(t, b)
	})

	t.Run("DanglingSymlink", func(t *testing.T) {
		link := filepath.Join(dir, "dangling.wsar")
		require.NoError(t, os.Symlink("nowhere/x.wsar", link))
		_, err := st.ExportFile(ctx, link, archive.Scope{All: true}, archive.Options{})
		assert.Equal(t, wserr.InvalidArgument, wserr.CodeOf(err), "%v", err)
		fi, err := os.Lstat(link)
		require.NoError(t, err)
		assert.NotZero(t, fi.Mode()&os.ModeSymlink)
	})

	t.Run("SymlinkLoop", func(t *testing.T) {
		loop := filepath.Join(dir, "loop-a")
		require.NoError(t, os.Symlink("loop-b", loop))
		require.NoError(t, os.Symlink("loop-a", filepath.Join(dir, "loop-b")))
		_, err := st.ExportFile(ctx, loop, archive.Scope{All: true}, archive.Options{})
		assert.Equal(t, wserr.InvalidArgument, wserr.CodeOf(err), "%v", err)
		fi, err := os.Lstat(loop)
		require.NoError(t, err)
		assert.NotZero(t, fi.Mode()&os.ModeSymlink, "the link stays a link")
	})

	t.Run("NamedPipe", func(t *testing.T) {
		fifo := filepath.Join(dir, "pipe")
		require.NoError(t, syscall.Mkfifo(fifo, 0o600))
		got := make(chan []byte, 1)
		go func() {
			f, err := os.Open(fifo)
			if err != nil {
				got <- nil
				return
			}
			defer f.Close()
			b, _ := io.ReadAll(f)
			got <- b
		}()
		_, err := st.ExportFile(ctx, fifo, archive.Scope{All: true}, archive.Options{})
		require.NoError(t, err)
		select {
		case b := <-got:
			importable(t, b)
		case <-time.After(time.Minute):
			t.Fatal("the pipe's reader got nothing")
		}
		fi, err := os.Lstat(fifo)
		require.NoError(t, err)
		assert.NotZero(t, fi.Mode()&os.ModeNamedPipe, "the pipe stays a pipe")
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		for _, e := range entries {
			assert.False(t, strings.HasPrefix(e.Name(), "."), "no temporary file left: %s", e.Name())
		}
	})
}

// TestWriteFileKeepsModesAndLeavesNothingOnFailure: a file WriteFile
// replaces keeps its permission bits, a new one is its owner's alone, and
// a fill that fails leaves the file as it was and nothing beside it.
func TestWriteFileKeepsModesAndLeavesNothingOnFailure(t *testing.T) {
	st := storetest.OpenStore(t)
	dir := t.TempDir()
	old := filepath.Join(dir, "old.txt")
	require.NoError(t, os.WriteFile(old, []byte("before"), 0o644))
	require.NoError(t, os.Chmod(old, 0o644))
	write := func(text string) func(io.Writer) error {
		return func(w io.Writer) error {
			_, err := io.WriteString(w, text)
			return err
		}
	}
	require.NoError(t, st.WriteFile("test", old, write("after")))
	fi, err := os.Stat(old)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o644), fi.Mode().Perm())
	none := filepath.Join(dir, "none.txt")
	require.NoError(t, os.WriteFile(none, []byte("x"), 0o600))
	require.NoError(t, os.Chmod(none, 0))
	require.NoError(t, st.WriteFile("test", none, write("y")))
	fi, err = os.Stat(none)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0), fi.Mode().Perm(), "no permission bits stay none")
	require.NoError(t, os.Remove(none))
	fresh := filepath.Join(dir, "new.txt")
	require.NoError(t, st.WriteFile("test", fresh, write("new")))
	fi, err = os.Stat(fresh)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	boom := wserr.New(wserr.Conflict, "fill", "", "stopped")
	err = st.WriteFile("test", old, func(w io.Writer) error {
		_, _ = io.WriteString(w, "half")
		return boom
	})
	assert.ErrorIs(t, err, boom)
	b, err := os.ReadFile(old)
	require.NoError(t, err)
	assert.Equal(t, "after", string(b), "the file as it was")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 2, "nothing left beside the files")

	err = st.WriteFile("test", old, nil)
	assert.Equal(t, wserr.InvalidArgument, wserr.CodeOf(err), "no fill: %v", err)
	b, err = os.ReadFile(old)
	require.NoError(t, err)
	assert.Equal(t, "after", string(b))
}

// TestWriteFileRefusedInPlaceIsCoded: a file that cannot be put in
// path's place once written (a directory made there meanwhile; a file in
// a sticky directory that another user owns) is refused with
// workspace.invalid_argument naming path, as a directory that cannot take
// the file is, not store.internal; nothing is left beside it.
func TestWriteFileRefusedInPlaceIsCoded(t *testing.T) {
	st := storetest.OpenStore(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "out.wsar")
	require.NoError(t, os.WriteFile(path, []byte("old"), 0o644))
	err := st.WriteFile("export", path, func(w io.Writer) error {
		// Another program puts a directory in the file's place.
		require.NoError(t, os.Remove(path))
		require.NoError(t, os.MkdirAll(filepath.Join(path, "inside"), 0o755))
		_, err := w.Write([]byte("new"))
		return err
	})
	require.Error(t, err)
	assert.Equal(t, wserr.InvalidArgument, wserr.CodeOf(err), "%v", err)
	assert.Contains(t, err.Error(), path)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "nothing beside path")
	assert.True(t, entries[0].IsDir())
}
