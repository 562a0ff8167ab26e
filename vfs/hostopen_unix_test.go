//go:build unix

package vfs

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/wserr"
)

// TestOpenRegularRefusesAFIFOAtOnce: a FIFO where a stat found a regular
// file a moment before (a program swapping files) is refused when opened,
// never waited on; so is a file the mount's Forbidden names.
func TestOpenRegularRefusesAFIFOAtOnce(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "plain"), []byte("x"), 0o644))
	plain, err := os.Stat(filepath.Join(dir, "plain"))
	require.NoError(t, err)
	h, err := OpenHostWith(dir, HostOptions{Forbidden: func(fi fs.FileInfo) bool { return os.SameFile(fi, plain) }})
	require.NoError(t, err)
	defer h.Close()

	open, err := OpenHost(dir, false)
	require.NoError(t, err)
	defer open.Close()
	done := make(chan error, 1)
	go func() {
		f, _, err := open.openRegular(open.root, "pipe", "read", MustPath("pipe"), false, plain)
		if f != nil {
			f.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		assert.Equal(t, wserr.InvalidPath, wserr.CodeOf(err), "%v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the open of a FIFO waited for a writer")
	}
	_, _, err = h.openRegular(h.root, "plain", "read", MustPath("plain"), false, plain)
	assert.Equal(t, wserr.PathNotAllowed, wserr.CodeOf(err), "%v", err)
}

// TestWalkPassesOverADirectoryGoneBelow: a directory below the one a
// listing or search asked for that is gone, or is no longer a directory,
// by the time the walk reaches it is passed over as its files would be;
// the one asked for still fails.
func TestWalkPassesOverADirectoryGoneBelow(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "file"), []byte("x"), 0o644))
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644))
	h, err := OpenHost(dir, false)
	require.NoError(t, err)
	defer h.Close()
	visit := func(FileInfo, bool) error { return nil }
	for _, name := range []string{"gone", "file", "pipe"} {
		assert.NoError(t, h.walkDir(t.Context(), "list", MustPath(name), -1, false, Path{}, visit), "%s below", name)
		assert.Error(t, h.walkDir(t.Context(), "list", MustPath(name), -1, true, Path{}, visit), "%s asked for", name)
	}
}

// TestReadRangeFromAGrowingSource: a source that holds more than the size
// it was opened at, past the read limit (a host file another program
// appends to), is store.conflict, never an answer past the limit.
func TestReadRangeFromAGrowingSource(t *testing.T) {
	const limit = 64
	src := strings.NewReader(strings.Repeat("x", limit+10))
	_, err := ReadRangeFrom(MustPath("f"), src, limit-4, ReadOptions{}, limit)
	assert.Equal(t, wserr.Conflict, wserr.CodeOf(err), "%v", err)
	res, err := ReadRangeFrom(MustPath("f"), strings.NewReader("short"), 5, ReadOptions{}, limit)
	require.NoError(t, err)
	assert.Equal(t, "short", string(res.Content))
}

// fakeInfo is a file's description with the owner and mode a test says.
type fakeInfo struct {
	fs.FileInfo
	mode fs.FileMode
	st   syscall.Stat_t
}

func (f fakeInfo) Mode() fs.FileMode { return f.mode }
func (f fakeInfo) Sys() any          { return &f.st }

// TestMayWrite: a change replaces a host file only if this process could
// write it as it is, by owner and permission bits; root may write any.
func TestMayWrite(t *testing.T) {
	root := os.Geteuid() == 0
	me, other := uint32(os.Geteuid()), uint32(os.Geteuid()+1)
	noGroup := uint32(1<<31 - 7)
	for _, c := range []struct {
		name string
		uid  uint32
		mode fs.FileMode
		want bool
	}{
		{"MineReadOnly", me, 0o444, root},
		{"MineWritable", me, 0o644, true},
		{"OthersNoWriteBit", other, 0o644, root},
		{"OthersWorldWritable", other, 0o646, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			info := fakeInfo{mode: c.mode}
			info.st.Uid, info.st.Gid = c.uid, noGroup
			assert.Equal(t, c.want, mayWrite(info))
		})
	}
}

// TestStatNoRead: StatNoRead describes a file without its hash, and
// refuses what Stat refuses: a FIFO, a missing file, a file the mount's
// Forbidden names (before anything opens it).
func TestStatNoRead(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "plain"), []byte("plain"), 0o644))
	h := openWithForbiddenDB(t, dir)
	ctx := t.Context()

	fi, err := h.StatNoRead(ctx, MustPath("plain"))
	require.NoError(t, err)
	assert.Equal(t, KindFile, fi.Kind)
	assert.Equal(t, int64(5), fi.Size)
	assert.True(t, fi.Hash.IsZero(), "not read, not hashed")
	assert.Equal(t, ResourceHost, fi.Resource)
	fi, err = h.StatNoRead(ctx, Root())
	require.NoError(t, err)
	assert.Equal(t, KindDir, fi.Kind)
	for name, code := range map[string]wserr.Code{"pipe": wserr.InvalidPath, "gone": wserr.FileNotFound, "db": wserr.PathNotAllowed} {
		_, err := h.StatNoRead(ctx, MustPath(name))
		assert.Equal(t, code, wserr.CodeOf(err), "%s: %v", name, err)
	}
}

// TestStatIsStatNoReadAndTheHash: Stat describes every path as StatNoRead
// does, with a file's hash and the length read, and refuses what
// StatNoRead refuses with the same error: a FIFO, a missing file, a link
// out of the mount, a file the mount's Forbidden names.
func TestStatIsStatNoReadAndTheHash(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "plain"), []byte("plain"), 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "sub"), 0o755))
	require.NoError(t, os.Symlink("..", filepath.Join(dir, "out")))
	h := openWithForbiddenDB(t, dir)
	ctx := t.Context()

	for _, name := range []string{".", "sub", "plain", "pipe", "gone", "db", "out/x"} {
		t.Run(name, func(t *testing.T) {
			p := Root()
			if name != "." {
				p = MustPath(name)
			}
			got, err := h.Stat(ctx, p)
			want, werr := h.StatNoRead(ctx, p)
			if werr != nil {
				require.Error(t, err)
				assert.Equal(t, wserr.CodeOf(werr), wserr.CodeOf(err))
				assert.Equal(t, werr.Error(), err.Error())
				return
			}
			require.NoError(t, err)
			if want.Kind == KindFile {
				want.Hash = cas.Sum([]byte(name))
			}
			assert.Equal(t, want, got)
		})
	}
}

// openWithForbiddenDB writes a file "db" in dir and mounts dir with that
// file Forbidden (as a store's own database is), closed when t ends.
func openWithForbiddenDB(t *testing.T, dir string) *HostFS {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "db"), []byte("db"), 0o644))
	db, err := os.Stat(filepath.Join(dir, "db"))
	require.NoError(t, err)
	h, err := OpenHostWith(dir, HostOptions{Forbidden: func(fi fs.FileInfo) bool { return os.SameFile(fi, db) }})
	require.NoError(t, err)
	t.Cleanup(func() { h.Close() })
	return h
}
