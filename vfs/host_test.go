package vfs_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/vfs/vfstest"
	"github.com/wsstore/wsstore/wserr"
)

// hostFiles is a small project tree for the host conformance run.
var hostFiles = map[string]string{
	"README.md":           "# Project\n\nA host directory.\n",
	"src/main.go":         "package main\n\nfunc main() {\n\tprintln(\"hi\")\n}\n",
	"src/util/strings.go": "package util\n",
	"docs/世界书.md":         "世界书\n第二行\n第三行",
	"docs/empty.txt":      "",
	"assets/logo.bin":     "\x00\x01\x02\xff",
}

// writeHostTree writes files below dir.
func writeHostTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
}

// openHost mounts dir and closes it when the test ends.
func openHost(t *testing.T, dir string, writable bool) *vfs.HostFS {
	t.Helper()
	h, err := vfs.OpenHost(dir, writable)
	require.NoError(t, err)
	t.Cleanup(func() { h.Close() })
	return h
}

// hostCode checks that err carries code and names path.
func hostCode(t *testing.T, err error, code wserr.Code, path string) *wserr.Error {
	t.Helper()
	var e *wserr.Error
	require.ErrorAs(t, err, &e, "error: %v", err)
	assert.Equal(t, code, e.Code, "error: %v", err)
	assert.Equal(t, path, e.Path)
	return e
}

// symlinkOrSkip makes a symlink, skipping the test where the platform or
// its permissions do not allow one.
func symlinkOrSkip(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Skipf("symlinks unavailable: %v", err)
	}
}

func TestHostConformance(t *testing.T) {
	dir := t.TempDir()
	writeHostTree(t, dir, hostFiles)
	vfstest.TestFS(t, openHost(t, dir, false), hostFiles)
}

// TestHostWriteConformance runs the write suite on a host mount. The suite
// writes below directories it has not made, which every stored kind
// creates; the store never creates a host directory, so the suite's host
// (the test, playing the user) makes them first.
func TestHostWriteConformance(t *testing.T) {
	t.Run("AtRoot", func(t *testing.T) {
		dir := t.TempDir()
		vfstest.TestWriteFS(t, hostWithParents{openHost(t, dir, true), dir}, vfs.Root())
	})
	t.Run("InMissingDir", func(t *testing.T) {
		dir := t.TempDir()
		vfstest.TestWriteFS(t, hostWithParents{openHost(t, dir, true), dir}, vfs.MustPath("work/area"))
	})
}

// hostWithParents makes the parent directories of a write on the host, as
// a user would, before the mount writes.
type hostWithParents struct {
	*vfs.HostFS
	dir string
}

func (h hostWithParents) Write(ctx context.Context, p vfs.Path, content []byte, opt vfs.WriteOptions) (vfs.FileInfo, error) {
	if d := p.Dir(); !d.IsRoot() {
		if fi, err := os.Stat(filepath.Join(h.dir, filepath.FromSlash(d.String()))); err != nil || fi.IsDir() {
			_ = os.MkdirAll(filepath.Join(h.dir, filepath.FromSlash(d.String())), 0o755)
		}
	}
	return h.HostFS.Write(ctx, p, content, opt)
}

// TestHostWriteCreatesNoDirectory: a write below a missing directory fails
// with file_not_found and leaves the host as it was (seed 004 INV-IO-07).
func TestHostWriteCreatesNoDirectory(t *testing.T) {
	dir := t.TempDir()
	h := openHost(t, dir, true)
	_, err := h.Write(t.Context(), vfs.MustPath("new/deeper/file.md"), []byte("x"), vfs.WriteOptions{})
	hostCode(t, err, wserr.FileNotFound, "new/deeper/file.md")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "no directory, no temporary file")
	require.NoError(t, os.Mkdir(filepath.Join(dir, "new"), 0o755))
	_, err = h.Write(t.Context(), vfs.MustPath("new/file.md"), []byte("x"), vfs.WriteOptions{})
	require.NoError(t, err, "a directory the host made is written into")
}

func TestOpenHost(t *testing.T) {
	t.Run("ErrMissingDirNotCreated", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "missing")
		_, err := vfs.OpenHost(dir, true)
		assert.Equal(t, wserr.InvalidOptions, wserr.CodeOf(err), "error: %v", err)
		_, statErr := os.Stat(dir)
		assert.True(t, os.IsNotExist(statErr), "OpenHost never creates the directory")
	})
	t.Run("ErrNotADirectory", func(t *testing.T) {
		f := filepath.Join(t.TempDir(), "file")
		require.NoError(t, os.WriteFile(f, nil, 0o644))
		_, err := vfs.OpenHost(f, false)
		assert.Equal(t, wserr.InvalidOptions, wserr.CodeOf(err), "error: %v", err)
	})
	t.Run("ErrAfterClose", func(t *testing.T) {
		h, err := vfs.OpenHost(t.TempDir(), false)
		require.NoError(t, err)
		require.NoError(t, h.Close())
		_, err = h.Stat(t.Context(), vfs.Root())
		assert.Error(t, err)
	})
}

func TestHostInfo(t *testing.T) {
	dir := t.TempDir()
	writeHostTree(t, dir, hostFiles)
	ctx := t.Context()
	for _, writable := range []bool{false, true} {
		h := openHost(t, dir, writable)
		info, err := h.Stat(ctx, vfs.MustPath("src/main.go"))
		require.NoError(t, err)
		assert.Equal(t, vfs.ResourceHost, info.Resource)
		assert.Equal(t, writable, info.Writable)
		assert.Equal(t, cas.Sum([]byte(hostFiles["src/main.go"])), info.Hash)
		fi, err := os.Stat(filepath.Join(dir, "src", "main.go"))
		require.NoError(t, err)
		assert.True(t, fi.ModTime().Equal(info.ModTime), "mod time from the host")

		dirInfo, err := h.Stat(ctx, vfs.MustPath("src"))
		require.NoError(t, err)
		assert.Equal(t, vfs.KindDir, dirInfo.Kind)
		assert.True(t, dirInfo.Hash.IsZero())
		assert.False(t, dirInfo.Writable, "a directory is not written, patched or removed")
	}
}

func TestHostReadOnly(t *testing.T) {
	dir := t.TempDir()
	writeHostTree(t, dir, hostFiles)
	h := openHost(t, dir, false)
	ctx := t.Context()
	p := vfs.MustPath("README.md")
	_, err := h.Write(ctx, p, []byte("x"), vfs.WriteOptions{})
	hostCode(t, err, wserr.PathNotWritable, "README.md")
	_, err = h.Write(ctx, vfs.MustPath("new.md"), []byte("x"), vfs.WriteOptions{Mode: vfs.Append})
	hostCode(t, err, wserr.PathNotWritable, "new.md")
	_, err = h.Patch(ctx, p, "Project", "x", vfs.PatchOptions{})
	hostCode(t, err, wserr.PathNotWritable, "README.md")
	hostCode(t, h.Remove(ctx, p), wserr.PathNotWritable, "README.md")

	b, err := os.ReadFile(filepath.Join(dir, "README.md"))
	require.NoError(t, err)
	assert.Equal(t, hostFiles["README.md"], string(b))
	_, err = os.Stat(filepath.Join(dir, "new.md"))
	assert.True(t, os.IsNotExist(err))
}

func TestHostWriteErrors(t *testing.T) {
	dir := t.TempDir()
	writeHostTree(t, dir, hostFiles)
	h := openHost(t, dir, true)
	ctx := t.Context()

	t.Run("ErrRoot", func(t *testing.T) {
		_, err := h.Write(ctx, vfs.Root(), []byte("x"), vfs.WriteOptions{})
		hostCode(t, err, wserr.InvalidPath, ".")
		hostCode(t, h.Remove(ctx, vfs.Root()), wserr.InvalidPath, ".")
	})
	t.Run("ErrNotADirectory", func(t *testing.T) {
		_, err := h.Write(ctx, vfs.MustPath("README.md/x/y.md"), []byte("x"), vfs.WriteOptions{})
		hostCode(t, err, wserr.NotADirectory, "README.md/x/y.md")
	})
	t.Run("OKKeepsMode", func(t *testing.T) {
		if runtime.GOOS == "windows" {
			t.Skip("no Unix permission bits")
		}
		p := filepath.Join(dir, "private.txt")
		require.NoError(t, os.WriteFile(p, []byte("old"), 0o600))
		require.NoError(t, os.Chmod(p, 0o640))
		_, err := h.Write(ctx, vfs.MustPath("private.txt"), []byte("new"), vfs.WriteOptions{})
		require.NoError(t, err)
		fi, err := os.Stat(p)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o640), fi.Mode().Perm(), "a rewrite keeps the file's mode")
	})
}

// escapeTree makes a host directory root/ next to a secret it must not
// reach, with symlinks that try to.
func escapeTree(t *testing.T) (root, secret string) {
	t.Helper()
	base := t.TempDir()
	root = filepath.Join(base, "root")
	secret = filepath.Join(base, "secret.txt")
	require.NoError(t, os.MkdirAll(filepath.Join(root, "sub"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(base, "outside"), 0o755))
	require.NoError(t, os.WriteFile(secret, []byte("secret"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(base, "outside", "x.txt"), []byte("outside"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "inside.txt"), []byte("inside\n"), 0o644))
	symlinkOrSkip(t, "../secret.txt", filepath.Join(root, "rel"))
	symlinkOrSkip(t, secret, filepath.Join(root, "abs"))
	symlinkOrSkip(t, "../../secret.txt", filepath.Join(root, "sub", "up"))
	symlinkOrSkip(t, "../outside", filepath.Join(root, "outdir"))
	symlinkOrSkip(t, "rel", filepath.Join(root, "chain"))
	symlinkOrSkip(t, "inside.txt", filepath.Join(root, "ok-link"))
	symlinkOrSkip(t, "loop-b", filepath.Join(root, "loop-a"))
	symlinkOrSkip(t, "loop-a", filepath.Join(root, "loop-b"))
	symlinkOrSkip(t, "missing", filepath.Join(root, "dangling"))
	symlinkOrSkip(t, "../created-outside.txt", filepath.Join(root, "dangling-out"))
	return root, secret
}

func TestHostSymlinkEscape(t *testing.T) {
	root, secret := escapeTree(t)
	h := openHost(t, root, true)
	ctx := t.Context()

	for _, p := range []string{"rel", "abs", "sub/up", "outdir/x.txt", "outdir/new.txt", "outdir/deeper/new.txt", "chain", "loop-a", "dangling-out"} {
		t.Run("ErrInvalidPath/"+p, func(t *testing.T) {
			path := vfs.MustPath(p)
			_, err := h.Stat(ctx, path)
			hostCode(t, err, wserr.InvalidPath, p)
			_, err = h.Read(ctx, path, vfs.ReadOptions{})
			hostCode(t, err, wserr.InvalidPath, p)
			_, err = h.List(ctx, path, 1)
			hostCode(t, err, wserr.InvalidPath, p)
			_, err = h.Write(ctx, path, []byte("pwned"), vfs.WriteOptions{})
			hostCode(t, err, wserr.InvalidPath, p)
			_, err = h.Write(ctx, path, []byte("pwned"), vfs.WriteOptions{Mode: vfs.Append})
			hostCode(t, err, wserr.InvalidPath, p)
			_, err = h.Patch(ctx, path, "secret", "pwned", vfs.PatchOptions{})
			hostCode(t, err, wserr.InvalidPath, p)
			if strings.HasPrefix(p, "outdir/") {
				// The link is a directory of the path, not the file
				// removed: nothing out there may be removed.
				hostCode(t, h.Remove(ctx, path), wserr.InvalidPath, p)
			}
		})
	}

	b, err := os.ReadFile(secret)
	require.NoError(t, err)
	assert.Equal(t, "secret", string(b), "nothing outside the mount changed")
	b, err = os.ReadFile(filepath.Join(filepath.Dir(root), "outside", "x.txt"))
	require.NoError(t, err)
	assert.Equal(t, "outside", string(b))
	for _, name := range []string{"outside/new.txt", "outside/deeper", "created-outside.txt"} {
		_, err = os.Stat(filepath.Join(filepath.Dir(root), filepath.FromSlash(name)))
		assert.True(t, os.IsNotExist(err), "nothing created outside the mount: %s", name)
	}

	t.Run("ListLeavesOutUnreachableLinks", func(t *testing.T) {
		infos, err := h.List(ctx, vfs.Root(), 5)
		require.NoError(t, err)
		var got []string
		for _, info := range infos {
			got = append(got, info.Path.String()+" "+info.Kind.String())
		}
		assert.Equal(t, []string{"inside.txt file", "ok-link file", "sub dir"}, got)
	})

	t.Run("OKLinkInside", func(t *testing.T) {
		res, err := h.Read(ctx, vfs.MustPath("ok-link"), vfs.ReadOptions{})
		require.NoError(t, err)
		assert.Equal(t, "inside\n", res.Text)
		_, err = h.Write(ctx, vfs.MustPath("ok-link"), []byte("through the link\n"), vfs.WriteOptions{Mode: vfs.Append})
		require.NoError(t, err)
		b, err := os.ReadFile(filepath.Join(root, "inside.txt"))
		require.NoError(t, err)
		assert.Equal(t, "inside\nthrough the link\n", string(b), "a write through a link changes its target")
		fi, err := os.Lstat(filepath.Join(root, "ok-link"))
		require.NoError(t, err)
		assert.NotZero(t, fi.Mode()&os.ModeSymlink, "and the link stays a link")
	})

	t.Run("OKRemoveLinkNotTarget", func(t *testing.T) {
		fi, err := h.RemoveFile(ctx, vfs.MustPath("ok-link"))
		require.NoError(t, err)
		want := []byte("inside\nthrough the link\n")
		assert.Equal(t, "ok-link", fi.Path.String())
		assert.Equal(t, cas.Sum(want), fi.Hash, "described as Stat describes it: the file it leads to")
		assert.Equal(t, int64(len(want)), fi.Size)
		_, err = os.Lstat(filepath.Join(root, "ok-link"))
		assert.True(t, os.IsNotExist(err))
		_, err = os.Stat(filepath.Join(root, "inside.txt"))
		assert.NoError(t, err)
	})

	t.Run("ErrDanglingIsNotFound", func(t *testing.T) {
		_, err := h.Read(ctx, vfs.MustPath("dangling"), vfs.ReadOptions{})
		hostCode(t, err, wserr.FileNotFound, "dangling")
	})

	t.Run("OKWriteThroughDanglingLinkInside", func(t *testing.T) {
		_, err := h.Write(ctx, vfs.MustPath("dangling"), []byte("now here"), vfs.WriteOptions{})
		require.NoError(t, err)
		b, err := os.ReadFile(filepath.Join(root, "missing"))
		require.NoError(t, err)
		assert.Equal(t, "now here", string(b))
	})
}

// TestHostRemoveLinkLeadingNowhere: a link that is dangling, loops or
// leads out of the mount is removed itself, described with no content,
// and what it names (outside the mount or not) stays as it was.
func TestHostRemoveLinkLeadingNowhere(t *testing.T) {
	root, secret := escapeTree(t)
	h := openHost(t, root, true)
	ctx := t.Context()
	for _, p := range []string{"dangling", "loop-a", "rel", "abs", "sub/up", "chain", "dangling-out", "outdir"} {
		t.Run("OK/"+p, func(t *testing.T) {
			fi, err := h.RemoveFile(ctx, vfs.MustPath(p))
			require.NoError(t, err)
			assert.Equal(t, p, fi.Path.String())
			assert.Equal(t, vfs.KindFile, fi.Kind)
			assert.Zero(t, fi.Size)
			assert.True(t, fi.Hash.IsZero(), "no content was read")
			_, err = os.Lstat(filepath.Join(root, filepath.FromSlash(p)))
			assert.True(t, os.IsNotExist(err), "the link is gone")
		})
	}
	t.Run("OKLoopsOtherHalf", func(t *testing.T) {
		require.NoError(t, h.Remove(ctx, vfs.MustPath("loop-b")))
	})

	b, err := os.ReadFile(secret)
	require.NoError(t, err)
	assert.Equal(t, "secret", string(b), "the target outside the mount stays")
	b, err = os.ReadFile(filepath.Join(filepath.Dir(root), "outside", "x.txt"))
	require.NoError(t, err)
	assert.Equal(t, "outside", string(b), "the directory a removed link led to stays whole")
	for _, name := range []string{"missing", "../created-outside.txt"} {
		_, err = os.Lstat(filepath.Join(root, filepath.FromSlash(name)))
		assert.True(t, os.IsNotExist(err), "nothing created where a link pointed: %s", name)
	}
	entries, err := os.ReadDir(root)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.Equal(t, []string{"inside.txt", "ok-link", "sub"}, names)

	t.Run("ErrReadOnly", func(t *testing.T) {
		ro := openHost(t, root, false)
		symlinkOrSkip(t, "missing", filepath.Join(root, "dangling"))
		hostCode(t, ro.Remove(ctx, vfs.MustPath("dangling")), wserr.PathNotWritable, "dangling")
		_, err := os.Lstat(filepath.Join(root, "dangling"))
		assert.NoError(t, err, "the link stays")
	})
}

func TestHostListSkips(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("Windows file names cannot hold a backslash")
	}
	dir := t.TempDir()
	writeHostTree(t, dir, map[string]string{"ok.md": "ok", `back\slash.md`: "unreachable",
		".wsstore-write-KILLED": "a write's temporary file, left by a killed process"})
	symlinkOrSkip(t, ".", filepath.Join(dir, "self"))
	h := openHost(t, dir, false)
	infos, err := h.List(t.Context(), vfs.Root(), 50)
	require.NoError(t, err)
	var got []string
	for _, info := range infos {
		got = append(got, info.Path.String()+" "+info.Kind.String())
	}
	assert.Equal(t, []string{"ok.md file", "self dir"}, got,
		"a name no workspace path can hold and a write's leftover temporary file are left out; a symlinked directory is listed but not entered")
}

func TestHostSearch(t *testing.T) {
	dir := t.TempDir()
	writeHostTree(t, dir, map[string]string{
		"notes/dragon.md":     "The dragon guards the sword.\n",
		"notes/other.md":      "a dragon\n",
		"notes/世界书.md":        "本轮激活的世界书。\n",
		".git/objects/ab":     "dragon sword dragon sword\n",
		"data/blob.bin":       "dragon\x00sword",
		"unrelated/readme.md": "nothing here\n",
	})
	big := bytes.Repeat([]byte("dragon sword\n"), (5<<20)/13)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "big.txt"), big, 0o644))
	h := openHost(t, dir, false)
	ctx := t.Context()

	t.Run("OKRanked", func(t *testing.T) {
		hits, err := hitsOf(h.Search(ctx, "dragon sword", vfs.SearchOptions{}))
		require.NoError(t, err)
		var paths []string
		for _, hit := range hits {
			paths = append(paths, hit.Path.String())
		}
		assert.Equal(t, []string{"notes/dragon.md", "notes/other.md"}, paths,
			"best first; no version-control metadata, binary or oversized files")
		assert.Equal(t, "The dragon guards the sword.", hits[0].Snippet)
	})

	t.Run("OKChinese", func(t *testing.T) {
		hits, err := hitsOf(h.Search(ctx, "世界书", vfs.SearchOptions{Path: vfs.MustPath("notes")}))
		require.NoError(t, err)
		require.Len(t, hits, 1)
		assert.Equal(t, "notes/世界书.md", hits[0].Path.String())
	})

	t.Run("OKSymlinkLoopEndsWalk", func(t *testing.T) {
		symlinkOrSkip(t, "..", filepath.Join(dir, "notes", "parent"))
		hits, err := hitsOf(h.Search(ctx, "dragon", vfs.SearchOptions{Path: vfs.MustPath("notes")}))
		require.NoError(t, err)
		assert.Len(t, hits, 2)
	})

	t.Run("OKPathIsFile", func(t *testing.T) {
		hits, err := hitsOf(h.Search(ctx, "dragon", vfs.SearchOptions{Path: vfs.MustPath("notes/other.md")}))
		require.NoError(t, err)
		require.Len(t, hits, 1)
	})

	t.Run("ErrFileNotFound", func(t *testing.T) {
		_, err := hitsOf(h.Search(ctx, "dragon", vfs.SearchOptions{Path: vfs.MustPath("nowhere")}))
		hostCode(t, err, wserr.FileNotFound, "nowhere")
	})

	t.Run("ErrInvalidArgument", func(t *testing.T) {
		_, err := hitsOf(h.Search(ctx, "dragon", vfs.SearchOptions{MaxHits: 1000}))
		assert.Equal(t, wserr.InvalidArgument, wserr.CodeOf(err))
	})
}

func TestHostNoTempFilesLeft(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, "a"), 0o755))
	h := openHost(t, dir, true)
	ctx := t.Context()
	for i := range 5 {
		_, err := h.Write(ctx, vfs.MustPath("a/b.md"), []byte(strings.Repeat("x", i)), vfs.WriteOptions{})
		require.NoError(t, err)
	}
	_, err := h.Patch(ctx, vfs.MustPath("a/b.md"), "x", "y", vfs.PatchOptions{ReplaceAll: true})
	require.NoError(t, err)
	entries, err := os.ReadDir(filepath.Join(dir, "a"))
	require.NoError(t, err)
	require.Len(t, entries, 1)
	assert.Equal(t, "b.md", entries[0].Name())
}

// TestHostLargeFileIsBounded: a host file over MaxReadBytes is never held
// whole. A read of all of it, an append and a patch are refused
// (workspace.size_limit_exceeded) and change nothing; a line range of it
// reads, with the whole file's hash; stat hashes it as it streams; a
// replace guarded by that hash goes through. The heap grows by a small
// part of the file's size throughout.
func TestHostLargeFileIsBounded(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	line := strings.Repeat("x", 99) + "\n"
	big := []byte(strings.Repeat(line, (vfs.MaxReadBytes+(8<<20))/len(line)))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "big.txt"), big, 0o644))
	h := openHost(t, dir, true)
	p := vfs.MustPath("big.txt")
	want := cas.Sum(big)

	var info vfs.FileInfo
	var res vfs.ReadResult
	grew := storetest.HeapGrowth(func() {
		var err error
		info, err = h.Stat(ctx, p)
		require.NoError(t, err)
		res, err = h.Read(ctx, p, vfs.ReadOptions{StartLine: 2, EndLine: 3})
		require.NoError(t, err)
		_, err = h.Read(ctx, p, vfs.ReadOptions{})
		hostCode(t, err, wserr.SizeLimitExceeded, "big.txt")
		_, err = h.Write(ctx, p, []byte("more\n"), vfs.WriteOptions{Mode: vfs.Append})
		hostCode(t, err, wserr.SizeLimitExceeded, "big.txt")
		_, err = h.Patch(ctx, p, "xx", "yy", vfs.PatchOptions{})
		hostCode(t, err, wserr.SizeLimitExceeded, "big.txt")
	})
	t.Logf("heap grew by at most %.1f MiB over a %.1f MiB host file", float64(grew)/(1<<20), float64(len(big))/(1<<20))
	assert.Less(t, grew, uint64(len(big)/4), "the file is not held")
	assert.Equal(t, want, info.Hash)
	assert.EqualValues(t, len(big), info.Size)
	assert.Equal(t, line+line, string(res.Content))
	assert.Equal(t, want, res.Info.Hash)
	assert.EqualValues(t, len(big), res.Info.Size)
	got, err := os.ReadFile(filepath.Join(dir, "big.txt"))
	require.NoError(t, err)
	assert.True(t, bytes.Equal(big, got), "refused changes left the file as it was")

	_, err = h.Write(ctx, p, []byte("small now\n"), vfs.WriteOptions{ExpectedHash: info.Hash})
	require.NoError(t, err)
	_, err = h.Write(ctx, p, []byte("stale\n"), vfs.WriteOptions{ExpectedHash: info.Hash})
	hostCode(t, err, wserr.WriteStaleFile, "big.txt")
}

// TestHostConcurrentWritesAreSerialised: writers through separate mounts
// of one directory and of one inside it (as separate processes and runs
// have: each mount opens its directory anew) lose nothing. Every
// acknowledged append lands, whether by the file's name or a link to it
// from another directory, through either mount, and a
// write guarded by the hash its writer read succeeds only if nothing
// changed the file since, so a counter bumped through guarded writes ends
// at the number of writes that succeeded.
func TestHostConcurrentWritesAreSerialised(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, "d"), 0o755))
	ctx := t.Context()
	const writers, each = 4, 40
	// Even writers mount dir, odd ones dir/d: allowed paths that nest.
	run := func(fn func(h *vfs.HostFS, w, i int)) {
		var wg sync.WaitGroup
		for w := range writers {
			h := openHost(t, dir, true)
			if w%2 == 1 {
				h = openHost(t, filepath.Join(dir, "d"), true)
			}
			wg.Go(func() {
				for i := range each {
					fn(h, w, i)
				}
			})
		}
		wg.Wait()
	}

	// The writers reach the file by its name and through a link in
	// another directory, which a write follows to the file it replaces,
	// from a mount of dir and from one of dir/d.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "d", "log.txt"), nil, 0o644))
	symlinkOrSkip(t, "d/log.txt", filepath.Join(dir, "alias.txt"))
	symlinkOrSkip(t, "log.txt", filepath.Join(dir, "d", "alias.txt"))
	names := [][]vfs.Path{{vfs.MustPath("d/log.txt"), vfs.MustPath("alias.txt")}, {vfs.MustPath("log.txt"), vfs.MustPath("alias.txt")}}
	run(func(h *vfs.HostFS, w, i int) {
		_, err := h.Write(ctx, names[w%2][(w/2+i)%2], fmt.Appendf(nil, "w%d line %d\n", w, i), vfs.WriteOptions{Mode: vfs.Append})
		assert.NoError(t, err)
	})
	b, err := os.ReadFile(filepath.Join(dir, "d", "log.txt"))
	require.NoError(t, err)
	assert.Equal(t, writers*each, strings.Count(string(b), "\n"), "every acknowledged append is in the file")

	counters := []vfs.Path{vfs.MustPath("d/counter"), vfs.MustPath("counter")}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "d", "counter"), []byte("0"), 0o644))
	var ok atomic.Int64
	run(func(h *vfs.HostFS, w, _ int) {
		counter := counters[w%2]
		r, err := h.Read(ctx, counter, vfs.ReadOptions{})
		if !assert.NoError(t, err) {
			return
		}
		n, err := strconv.Atoi(r.Text)
		require.NoError(t, err)
		_, err = h.Write(ctx, counter, []byte(strconv.Itoa(n+1)), vfs.WriteOptions{ExpectedHash: r.Info.Hash})
		if err == nil {
			ok.Add(1)
		} else {
			assert.Equal(t, wserr.WriteStaleFile, wserr.CodeOf(err), "error: %v", err)
		}
	})
	b, err = os.ReadFile(filepath.Join(dir, "d", "counter"))
	require.NoError(t, err)
	assert.Equal(t, strconv.Itoa(int(ok.Load())), string(b), "no guarded write overwrote a change it had not seen")
	assert.Positive(t, ok.Load())
}

// TestHostWriteThroughLinkReplacesTarget: a write through a symlink
// replaces the file the link leads to as a write by its name does, through
// a synced temporary file renamed over it, so a process killed mid-write
// leaves the old content whole. A reader that opened the file before sees
// the old content to the end (the new one is a new file), the link stays
// a link, and the target keeps its mode. A link inside a directory reached
// through another link is followed as the system follows it: its ".."
// is the real directory's parent.
func TestHostWriteThroughLinkReplacesTarget(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("a file open for reading cannot be replaced on Windows")
	}
	dir := t.TempDir()
	writeHostTree(t, dir, map[string]string{"notes/plan.md": "old plan\n", "d1/d2/file.txt": "deep\n", "d1/other.txt": "other\n"})
	require.NoError(t, os.Chmod(filepath.Join(dir, "notes", "plan.md"), 0o600))
	symlinkOrSkip(t, "notes/plan.md", filepath.Join(dir, "plan"))
	symlinkOrSkip(t, "plan", filepath.Join(dir, "chain"))
	symlinkOrSkip(t, "d1/d2", filepath.Join(dir, "dl"))
	symlinkOrSkip(t, "../other.txt", filepath.Join(dir, "d1", "d2", "up"))
	h := openHost(t, dir, true)
	ctx := t.Context()

	for i, name := range []string{"plan", "chain"} {
		t.Run(name, func(t *testing.T) {
			before, err := os.Open(filepath.Join(dir, "notes", "plan.md"))
			require.NoError(t, err)
			defer before.Close()
			old, err := os.ReadFile(filepath.Join(dir, "notes", "plan.md"))
			require.NoError(t, err)

			next := fmt.Sprintf("plan %d, rewritten through %s\n", i, name)
			_, err = h.Write(ctx, vfs.MustPath(name), []byte(next), vfs.WriteOptions{})
			require.NoError(t, err)

			seen, err := io.ReadAll(before)
			require.NoError(t, err)
			assert.Equal(t, string(old), string(seen), "the file open before the write is the old one, whole")
			b, err := os.ReadFile(filepath.Join(dir, "notes", "plan.md"))
			require.NoError(t, err)
			assert.Equal(t, next, string(b))
			fi, err := os.Stat(filepath.Join(dir, "notes", "plan.md"))
			require.NoError(t, err)
			assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "the target keeps its mode")
			for _, link := range []string{"plan", "chain"} {
				lfi, err := os.Lstat(filepath.Join(dir, link))
				require.NoError(t, err)
				assert.NotZero(t, lfi.Mode()&os.ModeSymlink, "%s stays a link", link)
			}
		})
	}

	t.Run("LinkInALinkedDirectory", func(t *testing.T) {
		_, err := h.Write(ctx, vfs.MustPath("dl/up"), []byte("through two links\n"), vfs.WriteOptions{Mode: vfs.Append})
		require.NoError(t, err)
		b, err := os.ReadFile(filepath.Join(dir, "d1", "other.txt"))
		require.NoError(t, err)
		assert.Equal(t, "other\nthrough two links\n", string(b))
		_, err = os.Stat(filepath.Join(dir, "other.txt"))
		assert.True(t, os.IsNotExist(err), "nothing written where the link's text alone points")
	})

	entries, err := os.ReadDir(filepath.Join(dir, "notes"))
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file left")
}

// TestHostFSAfterClose: every call on a closed mount fails with
// store.closed, as calls on a closed store do, and changes nothing.
func TestHostFSAfterClose(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.txt"), []byte("a"), 0o644))
	h, err := vfs.OpenHost(dir, true)
	require.NoError(t, err)
	require.NoError(t, h.Close())
	ctx := context.Background()
	a := vfs.MustPath("a.txt")
	calls := map[string]func() error{
		"stat": func() error { _, err := h.Stat(ctx, a); return err },
		"read": func() error { _, err := h.Read(ctx, a, vfs.ReadOptions{}); return err },
		"list": func() error { _, err := h.List(ctx, vfs.Root(), 1); return err },
		"write": func() error {
			_, err := h.Write(ctx, vfs.MustPath("b.txt"), []byte("b"), vfs.WriteOptions{})
			return err
		},
		"patch":  func() error { _, err := h.Patch(ctx, a, "a", "c", vfs.PatchOptions{}); return err },
		"remove": func() error { _, err := h.RemoveFile(ctx, a); return err },
		"search": func() error { _, err := hitsOf(h.Search(ctx, "a", vfs.SearchOptions{})); return err },
	}
	for name, call := range calls {
		assert.Equal(t, wserr.Closed, wserr.CodeOf(call()), name)
	}
	b, err := os.ReadFile(filepath.Join(dir, "a.txt"))
	require.NoError(t, err)
	assert.Equal(t, "a", string(b))
	_, err = os.Stat(filepath.Join(dir, "b.txt"))
	assert.True(t, os.IsNotExist(err))
}

// cancelOnRead cancels its context on its first Read, then yields r.
type cancelOnRead struct {
	r      io.Reader
	cancel context.CancelFunc
}

func (c *cancelOnRead) Read(p []byte) (int, error) {
	c.cancel()
	return c.r.Read(p)
}

// TestHostFSCanceled: a call whose context has ended, or ends while it
// streams, fails with store.canceled naming its path, not the bare
// context error, and changes nothing.
func TestHostFSCanceled(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.txt"), []byte("a"), 0o644))
	h := openHost(t, dir, true)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	a, b := vfs.MustPath("a.txt"), vfs.MustPath("b.txt")
	calls := map[string]struct {
		path string
		call func() error
	}{
		"stat": {"a.txt", func() error { _, err := h.Stat(ctx, a); return err }},
		"read": {"a.txt", func() error { _, err := h.Read(ctx, a, vfs.ReadOptions{}); return err }},
		"open": {"a.txt", func() error { _, _, err := h.Open(ctx, a); return err }},
		"list": {".", func() error { _, err := h.List(ctx, vfs.Root(), 1); return err }},
		"write": {"b.txt", func() error {
			_, err := h.Write(ctx, b, []byte("b"), vfs.WriteOptions{})
			return err
		}},
		"write from": {"b.txt", func() error {
			_, err := h.WriteFrom(ctx, b, strings.NewReader("b"), vfs.WriteOptions{})
			return err
		}},
		"write from, ended as it streams": {"b.txt", func() error {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			_, err := h.WriteFrom(ctx, b, &cancelOnRead{r: strings.NewReader("b"), cancel: cancel}, vfs.WriteOptions{})
			return err
		}},
		"patch":  {"a.txt", func() error { _, err := h.Patch(ctx, a, "a", "c", vfs.PatchOptions{}); return err }},
		"remove": {"a.txt", func() error { _, err := h.RemoveFile(ctx, a); return err }},
	}
	for name, c := range calls {
		t.Run(name, func(t *testing.T) {
			hostCode(t, c.call(), wserr.Canceled, c.path)
		})
	}
	got, err := os.ReadFile(filepath.Join(dir, "a.txt"))
	require.NoError(t, err)
	assert.Equal(t, "a", string(got))
	_, err = os.Stat(filepath.Join(dir, "b.txt"))
	assert.True(t, os.IsNotExist(err))
}

// endsOnSecondLook is a context that ends once it has been looked at:
// its first Err is nil, every later one context.Canceled, so a call that
// checks it only before it starts runs to its end.
type endsOnSecondLook struct {
	context.Context
	looks atomic.Int32
}

func (c *endsOnSecondLook) Err() error {
	if c.looks.Add(1) > 1 {
		return context.Canceled
	}
	return nil
}

// TestHostFSCanceledWhileItReads: a call that reads a host file whole
// (to answer it, or for its hash) stops when its context ends part way,
// with store.canceled naming its path, rather than read a file of any
// size to its end for a caller that has gone; and changes nothing.
func TestHostFSCanceledWhileItReads(t *testing.T) {
	dir := t.TempDir()
	big := bytes.Repeat([]byte("a line of the log\n"), 1<<20) // 18 MiB
	h := openHost(t, dir, true)
	sum := cas.Sum(big)
	calls := map[string]func(ctx context.Context, p vfs.Path) error{
		"stat": func(ctx context.Context, p vfs.Path) error { _, err := h.Stat(ctx, p); return err },
		"read a range": func(ctx context.Context, p vfs.Path) error {
			_, err := h.Read(ctx, p, vfs.ReadOptions{StartLine: 1, EndLine: 1})
			return err
		},
		"open": func(ctx context.Context, p vfs.Path) error { _, _, err := h.Open(ctx, p); return err },
		"guarded write": func(ctx context.Context, p vfs.Path) error {
			_, err := h.Write(ctx, p, []byte("b"), vfs.WriteOptions{ExpectedHash: sum})
			return err
		},
		"remove": func(ctx context.Context, p vfs.Path) error { _, err := h.RemoveFile(ctx, p); return err },
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			file := strings.ReplaceAll(name, " ", "-") + ".log"
			require.NoError(t, os.WriteFile(filepath.Join(dir, file), big, 0o644))
			hostCode(t, call(&endsOnSecondLook{Context: context.Background()}, vfs.MustPath(file)), wserr.Canceled, file)
			got, err := os.ReadFile(filepath.Join(dir, file))
			require.NoError(t, err)
			assert.True(t, bytes.Equal(big, got), "unchanged")
		})
	}
}

// TestHostOpenNeverYieldsAnotherVersionWhole: a host file changed after
// Open hashed it fails its stream with store.conflict, and the read that
// would complete the size Open gave is held back, so a reader that stops
// at that size (a download's Content-Length) never gets another
// version's bytes whole. Unchanged, the stream yields the file and ends.
func TestHostOpenNeverYieldsAnotherVersionWhole(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "a.bin")
	content := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
	require.NoError(t, os.WriteFile(name, content, 0o644))
	h := openHost(t, dir, false)
	ctx := context.Background()
	a := vfs.MustPath("a.bin")

	rc, fi, err := h.Open(ctx, a)
	require.NoError(t, err)
	got, err := io.ReadAll(io.LimitReader(rc, fi.Size))
	require.NoError(t, err)
	assert.True(t, bytes.Equal(content, got))
	n, err := rc.Read(make([]byte, 1))
	assert.Equal(t, 0, n)
	assert.Equal(t, io.EOF, err)
	require.NoError(t, rc.Close())

	for shape, change := range map[string]func() error{
		"SameSize": func() error {
			changed := bytes.Clone(content)
			changed[len(changed)/2] = 'X'
			return os.WriteFile(name, changed, 0o644)
		},
		"CutShort": func() error { return os.Truncate(name, int64(len(content)/2)) },
	} {
		t.Run(shape, func(t *testing.T) {
			require.NoError(t, os.WriteFile(name, content, 0o644))
			rc, fi, err := h.Open(ctx, a)
			require.NoError(t, err)
			defer rc.Close()
			require.NoError(t, change())
			got, err := io.ReadAll(io.LimitReader(rc, fi.Size))
			assert.Equal(t, wserr.Conflict, wserr.CodeOf(err), "%v", err)
			assert.Less(t, int64(len(got)), fi.Size, "the stream stops short of the size")
		})
	}
}
