package vfs_test

import (
	"errors"
	"io"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

func TestTreesFS(t *testing.T) {
	// A small InlineMax makes the large file chunked, so reads stream.
	env := newTreeEnv(t, cas.Options{InlineMax: 1 << 10})
	large := strings.Repeat("0123456789abcdef", 1000)
	files := map[string]string{
		"README.md":              "# hello\n",
		"empty":                  "",
		"docs/guide/intro.md":    "intro",
		"docs/guide/deep/er/x":   "x",
		"docs/readme.md":         "docs",
		"données/🚀.md":           "unicode",
		"output/large.bin":       large,
		"output/a-x":             "sorts after output/a/ as a string",
		"output/a/b":             "b",
		"scratch/notes/todo.txt": "todo",
	}
	root := env.build(t, files)
	fsys := env.trees.FS(env.ctx, root)

	t.Run("OKTestFS", func(t *testing.T) {
		var want []string
		for p := range files {
			want = append(want, p)
		}
		require.NoError(t, fstest.TestFS(fsys, want...))
	})
	t.Run("OKTestFSEmptyTree", func(t *testing.T) {
		require.NoError(t, fstest.TestFS(env.trees.FS(env.ctx, vfs.EmptyTree)))
	})
	t.Run("OKReadFile", func(t *testing.T) {
		for p, content := range files {
			b, err := fs.ReadFile(fsys, p)
			require.NoError(t, err, p)
			assert.Equal(t, content, string(b), p)
		}
	})
	t.Run("OKStat", func(t *testing.T) {
		fi, err := fs.Stat(fsys, "docs/guide/intro.md")
		require.NoError(t, err)
		assert.Equal(t, "intro.md", fi.Name())
		assert.Equal(t, int64(5), fi.Size())
		assert.Equal(t, fs.FileMode(0o444), fi.Mode())
		assert.Equal(t, time.Time{}, fi.ModTime())
		assert.Equal(t, cas.Sum([]byte("intro")), fi.Sys().(vfs.Entry).Hash)

		fi, err = fs.Stat(fsys, "docs")
		require.NoError(t, err)
		assert.True(t, fi.IsDir())
		assert.Equal(t, fs.ModeDir|0o555, fi.Mode())
		assert.Equal(t, int64(len("intro")+len("x")+len("docs")), fi.Size())

		fi, err = fs.Stat(fsys, ".")
		require.NoError(t, err)
		assert.Equal(t, ".", fi.Name())
		assert.True(t, fi.IsDir())
	})
	t.Run("OKSub", func(t *testing.T) {
		sub, err := fs.Sub(fsys, "docs/guide")
		require.NoError(t, err)
		require.NoError(t, fstest.TestFS(sub, "intro.md", "deep/er/x"))
	})
	t.Run("OKReadInPieces", func(t *testing.T) {
		f, err := fsys.Open("output/large.bin")
		require.NoError(t, err)
		var got []byte
		buf := make([]byte, 777)
		for {
			n, err := f.Read(buf)
			got = append(got, buf[:n]...)
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err)
		}
		assert.Equal(t, large, string(got))
		require.NoError(t, f.Close())
		_, err = f.Read(buf)
		require.ErrorIs(t, err, fs.ErrClosed)
	})

	errCases := []struct {
		name string
		call func() error
		want error
	}{
		{"ErrNotExist", func() error { _, err := fsys.Open("nope"); return err }, fs.ErrNotExist},
		{"ErrNotExistThroughFile", func() error { _, err := fsys.Open("README.md/x"); return err }, fs.ErrNotExist},
		{"ErrNotExistBackslash", func() error { _, err := fsys.Open(`docs\readme.md`); return err }, fs.ErrNotExist},
		{"ErrNotExistStat", func() error { _, err := fs.Stat(fsys, "nope"); return err }, fs.ErrNotExist},
		{"ErrInvalidDotDot", func() error { _, err := fsys.Open("../x"); return err }, fs.ErrInvalid},
		{"ErrInvalidAbsolute", func() error { _, err := fsys.Open("/docs"); return err }, fs.ErrInvalid},
		{"ErrInvalidReadFile", func() error { _, err := fs.ReadFile(fsys, "docs/"); return err }, fs.ErrInvalid},
	}
	for _, tc := range errCases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			var pe *fs.PathError
			require.ErrorAs(t, err, &pe)
			assert.ErrorIs(t, err, tc.want)
		})
	}
	t.Run("ErrPathIsDirectory", func(t *testing.T) {
		_, err := fs.ReadFile(fsys, "docs")
		assert.True(t, wserr.Is(err, wserr.PathIsDirectory), "%v", err)
		f, err := fsys.Open("docs")
		require.NoError(t, err)
		_, err = f.Read(make([]byte, 1))
		assert.True(t, wserr.Is(err, wserr.PathIsDirectory), "%v", err)
	})
	t.Run("ErrNotADirectory", func(t *testing.T) {
		_, err := fs.ReadDir(fsys, "README.md")
		assert.True(t, wserr.Is(err, wserr.NotADirectory), "%v", err)
	})
	t.Run("ErrCorruptMissingRoot", func(t *testing.T) {
		_, err := fs.Stat(env.trees.FS(env.ctx, cas.Sum([]byte("no tree"))), "x")
		assert.True(t, wserr.Is(err, wserr.Corrupt), "%v", err)
	})
}

// TestTreesFSStoredBeforeRules reads a tree holding names ParsePath has
// come to refuse (a device name, NFD, a trailing dot): trees stored before
// those rules still decode, so the view opens every name it lists.
func TestTreesFSStoredBeforeRules(t *testing.T) {
	env := newTreeEnv(t, cas.Options{})
	names := namesBeforeRules
	var root cas.Hash
	env.update(t, func(tx *index.Tx) error {
		files, dir := putBeforeRules(t, env, tx)
		sz := int64(0)
		for _, f := range files {
			sz += f.Size
		}
		var err error
		root, err = env.trees.Put(env.ctx, tx, []vfs.Entry{{Name: "output", Kind: vfs.KindDir, Hash: dir, Size: sz}})
		return err
	})
	fsys := env.trees.FS(env.ctx, root)
	var want []string
	for _, n := range names {
		want = append(want, "output/"+n)
	}
	require.NoError(t, fstest.TestFS(fsys, want...))
	for _, n := range names {
		b, err := fs.ReadFile(fsys, "output/"+n)
		require.NoError(t, err, n)
		assert.Equal(t, "content of "+n, string(b))
	}
}
