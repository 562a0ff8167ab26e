package vfstest

import (
	"bytes"
	"cmp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// deep is a List depth beyond any tree the suite builds.
const deep = 1 << 10

// entry is what the suite expects at a path.
type entry struct {
	kind    vfs.Kind
	content []byte
}

// expected turns files into every file and directory they imply (a name
// ending in "/" is an empty directory); the root is left out, as List
// never returns it.
func expected(t *testing.T, files map[string]string) map[vfs.Path]entry {
	t.Helper()
	want := make(map[vfs.Path]entry)
	for name, content := range files {
		dir, isDir := strings.CutSuffix(name, "/")
		p, err := vfs.ParsePath(dir)
		require.NoError(t, err, "expected file name %q", name)
		want[p] = entry{kind: vfs.KindFile, content: []byte(content)}
		if isDir {
			want[p] = entry{kind: vfs.KindDir}
		}
		for d := p.Dir(); !d.IsRoot(); d = d.Dir() {
			want[d] = entry{kind: vfs.KindDir}
		}
	}
	return want
}

// comparePaths orders paths segment by segment, the order List promises.
func comparePaths(a, b vfs.Path) int {
	as, bs := a.Segments(), b.Segments()
	for i := 0; i < len(as) && i < len(bs); i++ {
		if c := strings.Compare(as[i], bs[i]); c != 0 {
			return c
		}
	}
	return cmp.Compare(len(as), len(bs))
}

// lines splits content as ReadRange does: on '\n', keeping line endings,
// with no extra line after a trailing newline.
func lines(content []byte) []string {
	if len(content) == 0 {
		return nil
	}
	ls := strings.SplitAfter(string(content), "\n")
	if ls[len(ls)-1] == "" {
		ls = ls[:len(ls)-1]
	}
	return ls
}

// requireCode fails unless err carries code and names path p.
func requireCode(t *testing.T, err error, code wserr.Code, p vfs.Path) {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, code, wserr.CodeOf(err), "error: %v", err)
	var e *wserr.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, p.String(), e.Path, "error names the wrong path: %v", err)
}

// checkInfo checks the parts of a FileInfo that every resource kind agrees
// on. Hash may be zero (a kind that cannot know it cheaply), but if it is
// set it must be the content's address.
func checkInfo(t *testing.T, info vfs.FileInfo, p vfs.Path, e entry) {
	t.Helper()
	assert.Equal(t, p, info.Path)
	assert.Equal(t, e.kind, info.Kind, "%s", p)
	assert.NotEmpty(t, info.Resource, "%s has no resource kind", p)
	if e.kind == vfs.KindFile {
		assert.Equal(t, int64(len(e.content)), info.Size, "%s", p)
		if !info.Hash.IsZero() {
			assert.Equal(t, cas.Sum(e.content), info.Hash, "%s", p)
		}
	}
}

// TestFS checks the read contract of fsys, which must hold exactly the
// files given (path => content; a name ending in "/" is an empty
// directory) and the directories above them: Stat,
// Read whole and by line and char range with every range error, List at
// depth 1 and deep from the root and each directory, List of a file (the
// file alone), wserr.FileNotFound for missing paths (also below a file),
// and wserr.PathIsDirectory when reading a directory. Errors must name the
// path they were asked about. Include a multi-line file, a CJK file and an
// empty or binary file in files to exercise every branch. The missing
// paths probed are no-such-file.txt and no/such/dir/file.md, or missing
// if given: a view in which every top-level name exists or is refused
// for another reason (a run's model view) names missing paths below one.
func TestFS(t *testing.T, fsys vfs.FS, files map[string]string, missing ...string) {
	t.Helper()
	want := expected(t, files)
	paths := slices.SortedFunc(func(yield func(vfs.Path) bool) {
		for p := range want {
			if !yield(p) {
				return
			}
		}
	}, comparePaths)
	ctx := t.Context()

	t.Run("StatRootIsDir", func(t *testing.T) {
		info, err := fsys.Stat(ctx, vfs.Root())
		require.NoError(t, err)
		assert.Equal(t, vfs.KindDir, info.Kind)
		assert.True(t, info.Path.IsRoot())
	})

	t.Run("Stat", func(t *testing.T) {
		for _, p := range paths {
			info, err := fsys.Stat(ctx, p)
			require.NoError(t, err, "%s", p)
			checkInfo(t, info, p, want[p])
		}
	})

	t.Run("ReadWhole", func(t *testing.T) {
		for _, p := range paths {
			e := want[p]
			if e.kind != vfs.KindFile {
				continue
			}
			res, err := fsys.Read(ctx, p, vfs.ReadOptions{})
			require.NoError(t, err, "%s", p)
			checkInfo(t, res.Info, p, e)
			assert.Equal(t, e.content, nonNil(res.Content), "%s", p)
			assert.False(t, res.Truncated, "%s", p)
			if vfs.IsText(e.content) {
				assert.Equal(t, string(e.content), res.Text, "%s", p)
				assert.Equal(t, len(lines(e.content)), res.TotalLines, "%s", p)
			} else {
				assert.Empty(t, res.Text, "%s is not text", p)
			}
		}
	})

	t.Run("ReadLines", func(t *testing.T) {
		for _, p := range textFiles(paths, want) {
			ls := lines(want[p].content)
			n := len(ls)
			if n == 0 {
				res, err := fsys.Read(ctx, p, vfs.ReadOptions{StartLine: 1})
				require.NoError(t, err, "an empty file reads from line 1: %s", p)
				assert.Empty(t, res.Text)
				assert.Zero(t, res.TotalLines)
				continue
			}
			for _, r := range [][2]int{{1, 1}, {n, n}, {1, 0}, {0, 1}, {(n + 1) / 2, 0}, {1, n + 5}, {2, n - 1}} {
				start, end := r[0], r[1]
				if start > n || (start > 1 && end != 0 && end < start) {
					continue // not a valid range for this file
				}
				res, err := fsys.Read(ctx, p, vfs.ReadOptions{StartLine: start, EndLine: end})
				require.NoError(t, err, "%s lines %d-%d", p, start, end)
				from, to := max(start, 1), end
				if to == 0 || to > n {
					to = n
				}
				text := strings.Join(ls[from-1:to], "")
				assert.Equal(t, text, res.Text, "%s lines %d-%d", p, start, end)
				assert.Equal(t, []byte(text), nonNil(res.Content), "%s lines %d-%d", p, start, end)
				assert.Equal(t, from, res.StartLine, "%s lines %d-%d", p, start, end)
				assert.Equal(t, to, res.EndLine, "%s lines %d-%d", p, start, end)
				assert.Equal(t, n, res.TotalLines, "%s lines %d-%d", p, start, end)
				assert.Equal(t, len(text) < len(want[p].content), res.Truncated, "%s lines %d-%d", p, start, end)
			}
		}
	})

	t.Run("ReadChars", func(t *testing.T) {
		for _, p := range textFiles(paths, want) {
			runes := []rune(string(want[p].content))
			n := len(runes)
			for _, r := range [][2]int{{0, 1}, {1, 0}, {n / 2, n/2 + 1}, {0, n + 5}, {n, 0}} {
				start, end := r[0], r[1]
				if start > n || (end != 0 && end < start) {
					continue
				}
				res, err := fsys.Read(ctx, p, vfs.ReadOptions{StartChar: start, EndChar: end})
				require.NoError(t, err, "%s chars %d-%d", p, start, end)
				to := end
				if to == 0 || to > n {
					to = n
				}
				text := string(runes[start:to])
				assert.Equal(t, text, res.Text, "%s chars %d-%d", p, start, end)
				assert.Equal(t, []byte(text), nonNil(res.Content), "%s chars %d-%d", p, start, end)
				assert.Equal(t, len(text) < len(want[p].content), res.Truncated, "%s chars %d-%d", p, start, end)
			}
		}
	})

	t.Run("ErrInvalidLineRange", func(t *testing.T) {
		for _, p := range textFiles(paths, want) {
			n := len(lines(want[p].content))
			for _, opt := range []vfs.ReadOptions{
				{StartLine: n + 1 + boolInt(n == 0)},
				{StartLine: -1},
				{StartLine: 1, EndLine: -1},
				{StartLine: 3, EndLine: 2},
			} {
				_, err := fsys.Read(ctx, p, opt)
				requireCode(t, err, wserr.InvalidLineRange, p)
				assert.Contains(t, wserr.MessageOf(err), strconv.Itoa(n)+" line", "the message gives the line count")
			}
		}
	})

	t.Run("ErrInvalidCharRange", func(t *testing.T) {
		for _, p := range textFiles(paths, want) {
			n := utf8.RuneCount(want[p].content)
			for _, opt := range []vfs.ReadOptions{
				{StartChar: n + 1},
				{StartChar: -1},
				{StartChar: 0, EndChar: -1},
				{StartChar: 3, EndChar: 2},
			} {
				_, err := fsys.Read(ctx, p, opt)
				requireCode(t, err, wserr.InvalidCharRange, p)
			}
		}
	})

	t.Run("ErrBothRanges", func(t *testing.T) {
		for _, p := range textFiles(paths, want) {
			_, err := fsys.Read(ctx, p, vfs.ReadOptions{StartLine: 1, StartChar: 1})
			requireCode(t, err, wserr.InvalidArgument, p)
		}
	})

	t.Run("ErrNotText", func(t *testing.T) {
		for _, p := range paths {
			e := want[p]
			if e.kind != vfs.KindFile || vfs.IsText(e.content) {
				continue
			}
			for _, opt := range []vfs.ReadOptions{{StartLine: 1}, {StartChar: 1}} {
				_, err := fsys.Read(ctx, p, opt)
				requireCode(t, err, wserr.NotText, p)
			}
		}
	})

	t.Run("ListRoot", func(t *testing.T) {
		checkList(t, fsys, vfs.Root(), 1, want)
		checkList(t, fsys, vfs.Root(), 0, want)
	})

	t.Run("ListDeep", func(t *testing.T) {
		checkList(t, fsys, vfs.Root(), deep, want)
	})

	t.Run("ListDirs", func(t *testing.T) {
		for _, p := range paths {
			if want[p].kind == vfs.KindDir {
				checkList(t, fsys, p, 1, want)
				checkList(t, fsys, p, 2, want)
				checkList(t, fsys, p, deep, want)
			}
		}
	})

	t.Run("ListFileIsItself", func(t *testing.T) {
		for _, p := range paths {
			if want[p].kind == vfs.KindFile {
				infos, err := fsys.List(ctx, p, 1)
				require.NoError(t, err, "%s", p)
				require.Len(t, infos, 1, "%s", p)
				checkInfo(t, infos[0], p, want[p])
			}
		}
	})

	t.Run("ErrFileNotFound", func(t *testing.T) {
		names := missing
		if len(names) == 0 {
			names = []string{"no-such-file.txt", "no/such/dir/file.md"}
		}
		var probes []vfs.Path
		for _, name := range names {
			probes = append(probes, vfs.MustPath(name))
		}
		for _, p := range paths {
			q, err := p.Join("no-such-child")
			require.NoError(t, err)
			probes = append(probes, q) // below a directory, and below a file
		}
		for _, p := range probes {
			_, err := fsys.Stat(ctx, p)
			requireCode(t, err, wserr.FileNotFound, p)
			_, err = fsys.Read(ctx, p, vfs.ReadOptions{})
			requireCode(t, err, wserr.FileNotFound, p)
			_, err = fsys.List(ctx, p, 1)
			requireCode(t, err, wserr.FileNotFound, p)
		}
	})

	t.Run("ErrPathIsDirectory", func(t *testing.T) {
		_, err := fsys.Read(ctx, vfs.Root(), vfs.ReadOptions{})
		requireCode(t, err, wserr.PathIsDirectory, vfs.Root())
		for _, p := range paths {
			if want[p].kind == vfs.KindDir {
				_, err := fsys.Read(ctx, p, vfs.ReadOptions{})
				requireCode(t, err, wserr.PathIsDirectory, p)
			}
		}
	})
}

// checkList checks List(dir, depth) against want.
func checkList(t *testing.T, fsys vfs.FS, dir vfs.Path, depth int, want map[vfs.Path]entry) {
	t.Helper()
	infos, err := fsys.List(t.Context(), dir, depth)
	require.NoError(t, err, "list %s depth %d", dir, depth)
	levels := max(depth, 1)
	base := len(dir.Segments())
	var wantPaths []vfs.Path
	for p := range want {
		if p != dir && p.HasPrefix(dir) && len(p.Segments())-base <= levels {
			wantPaths = append(wantPaths, p)
		}
	}
	slices.SortFunc(wantPaths, comparePaths)
	got := make([]vfs.Path, len(infos))
	for i, info := range infos {
		got[i] = info.Path
	}
	require.Equal(t, pathStrings(wantPaths), pathStrings(got), "list %s depth %d: paths, in segment order", dir, depth)
	for _, info := range infos {
		checkInfo(t, info, info.Path, want[info.Path])
	}
}

func pathStrings(ps []vfs.Path) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return out
}

// textFiles returns the paths of the text files in want.
func textFiles(paths []vfs.Path, want map[vfs.Path]entry) []vfs.Path {
	var out []vfs.Path
	for _, p := range paths {
		if e := want[p]; e.kind == vfs.KindFile && vfs.IsText(e.content) {
			out = append(out, p)
		}
	}
	return out
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// nonNil makes an empty result comparable with an empty expectation.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// writeSuite carries the state of TestWriteFS: the files it has written,
// so that the end can check nothing else appeared.
type writeSuite struct {
	t     *testing.T
	fsys  vfs.WriteFS
	dir   vfs.Path
	files map[vfs.Path][]byte
}

// path returns rel below the suite's directory.
func (s *writeSuite) path(rel string) vfs.Path {
	s.t.Helper()
	if !s.dir.IsRoot() {
		rel = s.dir.String() + "/" + rel
	}
	p, err := vfs.ParsePath(rel)
	require.NoError(s.t, err)
	return p
}

// state is what a path holds, for comparing before and after a failed op.
type state struct {
	exists  bool
	kind    vfs.Kind
	content []byte
	hash    cas.Hash
}

func (s *writeSuite) state(t *testing.T, p vfs.Path) state {
	t.Helper()
	ctx := t.Context()
	info, err := s.fsys.Stat(ctx, p)
	if wserr.Is(err, wserr.FileNotFound) {
		return state{}
	}
	require.NoError(t, err, "stat %s", p)
	st := state{exists: true, kind: info.Kind, hash: info.Hash}
	if info.Kind == vfs.KindFile {
		res, err := s.fsys.Read(ctx, p, vfs.ReadOptions{})
		require.NoError(t, err, "read %s", p)
		st.content = nonNil(res.Content)
	}
	return st
}

// written checks a successful write's result and that p now holds content.
func (s *writeSuite) written(t *testing.T, p vfs.Path, info vfs.FileInfo, err error, content string) {
	t.Helper()
	require.NoError(t, err, "write %s", p)
	assert.Equal(t, p, info.Path)
	assert.Equal(t, vfs.KindFile, info.Kind)
	assert.Equal(t, int64(len(content)), info.Size)
	assert.True(t, info.Writable)
	assert.Equal(t, cas.Sum([]byte(content)), info.Hash, "a write returns the new content's hash, for the next ExpectedHash")
	st := s.state(t, p)
	require.True(t, st.exists, "%s exists after the write", p)
	assert.Equal(t, content, string(st.content))
	if !st.hash.IsZero() {
		assert.Equal(t, info.Hash, st.hash)
	}
	s.files[p] = []byte(content)
}

// failed checks that err carries code and that p is as it was before.
func (s *writeSuite) failed(t *testing.T, err error, code wserr.Code, p vfs.Path, before state) {
	t.Helper()
	requireCode(t, err, code, p)
	assert.Equal(t, before, s.state(t, p), "a failed %s leaves %s unchanged", code, p)
}

// TestWriteFS checks the write contract of fsys in its writable directory
// dir, which must start empty (or not exist): Write in replace, append and
// default mode, creating parent directories; the ExpectedHash guard
// (wserr.WriteStaleFile); Patch, with every patch error code; Remove; and
// that every failed operation changes nothing (content and hash as
// before). It ends by checking that the files below dir are exactly those
// written, so an implementation that leaves temporary files fails.
func TestWriteFS(t *testing.T, fsys vfs.WriteFS, dir vfs.Path) {
	t.Helper()
	s := &writeSuite{t: t, fsys: fsys, dir: dir, files: make(map[vfs.Path][]byte)}
	ctx := t.Context()

	infos, err := fsys.List(ctx, dir, deep)
	if !wserr.Is(err, wserr.FileNotFound) {
		require.NoError(t, err)
		require.Empty(t, infos, "TestWriteFS needs an empty directory")
	}

	t.Run("WriteReplace", func(t *testing.T) {
		p := s.path("replace.md")
		info, err := fsys.Write(ctx, p, []byte("first version\nline 2\n"), vfs.WriteOptions{Mode: vfs.Replace})
		s.written(t, p, info, err, "first version\nline 2\n")
		info, err = fsys.Write(ctx, p, []byte("second"), vfs.WriteOptions{Mode: vfs.Replace})
		s.written(t, p, info, err, "second")
	})

	t.Run("WriteDefaultModeReplaces", func(t *testing.T) {
		p := s.path("default.md")
		info, err := fsys.Write(ctx, p, []byte("one"), vfs.WriteOptions{})
		s.written(t, p, info, err, "one")
		info, err = fsys.Write(ctx, p, []byte("two"), vfs.WriteOptions{})
		s.written(t, p, info, err, "two")
	})

	t.Run("WriteAppend", func(t *testing.T) {
		p := s.path("append.log")
		info, err := fsys.Write(ctx, p, []byte("a\n"), vfs.WriteOptions{Mode: vfs.Append})
		s.written(t, p, info, err, "a\n")
		info, err = fsys.Write(ctx, p, []byte("b\n"), vfs.WriteOptions{Mode: vfs.Append})
		s.written(t, p, info, err, "a\nb\n")
	})

	t.Run("WriteCreatesParents", func(t *testing.T) {
		p := s.path("nested/deeper/file.txt")
		info, err := fsys.Write(ctx, p, []byte("deep"), vfs.WriteOptions{})
		s.written(t, p, info, err, "deep")
		dirInfo, err := fsys.Stat(ctx, p.Dir())
		require.NoError(t, err)
		assert.Equal(t, vfs.KindDir, dirInfo.Kind)
	})

	t.Run("WriteEmptyAndBinary", func(t *testing.T) {
		p := s.path("empty.txt")
		info, err := fsys.Write(ctx, p, nil, vfs.WriteOptions{})
		s.written(t, p, info, err, "")
		res, err := fsys.Read(ctx, p, vfs.ReadOptions{StartLine: 1})
		require.NoError(t, err)
		assert.Zero(t, res.TotalLines)

		b := s.path("blob.bin")
		info, err = fsys.Write(ctx, b, []byte{0, 1, 2, 0xff}, vfs.WriteOptions{})
		s.written(t, b, info, err, "\x00\x01\x02\xff")
		res, err = fsys.Read(ctx, b, vfs.ReadOptions{})
		require.NoError(t, err)
		assert.Empty(t, res.Text, "binary content has no text")
	})

	t.Run("ExpectedHashMatches", func(t *testing.T) {
		p := s.path("guarded.md")
		info, err := fsys.Write(ctx, p, []byte("v1"), vfs.WriteOptions{})
		s.written(t, p, info, err, "v1")
		info, err = fsys.Write(ctx, p, []byte("v2"), vfs.WriteOptions{ExpectedHash: info.Hash})
		s.written(t, p, info, err, "v2")
		info, err = fsys.Write(ctx, p, []byte("+"), vfs.WriteOptions{Mode: vfs.Append, ExpectedHash: info.Hash})
		s.written(t, p, info, err, "v2+")
		info, err = fsys.Patch(ctx, p, "v2", "v3", vfs.PatchOptions{ExpectedHash: info.Hash})
		s.written(t, p, info, err, "v3+")
	})

	t.Run("ErrWriteStaleFile", func(t *testing.T) {
		p := s.path("stale.md")
		info, err := fsys.Write(ctx, p, []byte("current"), vfs.WriteOptions{})
		s.written(t, p, info, err, "current")
		stale := cas.Sum([]byte("an older version"))
		before := s.state(t, p)

		_, err = fsys.Write(ctx, p, []byte("lost update"), vfs.WriteOptions{ExpectedHash: stale})
		s.failed(t, err, wserr.WriteStaleFile, p, before)
		_, err = fsys.Write(ctx, p, []byte("lost update"), vfs.WriteOptions{Mode: vfs.Append, ExpectedHash: stale})
		s.failed(t, err, wserr.WriteStaleFile, p, before)
		_, err = fsys.Patch(ctx, p, "current", "lost", vfs.PatchOptions{ExpectedHash: stale})
		s.failed(t, err, wserr.WriteStaleFile, p, before)

		missing := s.path("stale-missing.md")
		_, err = fsys.Write(ctx, missing, []byte("x"), vfs.WriteOptions{ExpectedHash: stale})
		s.failed(t, err, wserr.WriteStaleFile, missing, state{})
	})

	t.Run("ErrWriteOnDirectory", func(t *testing.T) {
		p := s.path("adir/inner.txt")
		info, err := fsys.Write(ctx, p, []byte("inner"), vfs.WriteOptions{})
		s.written(t, p, info, err, "inner")
		d := p.Dir()
		before := s.state(t, d)
		_, err = fsys.Write(ctx, d, []byte("x"), vfs.WriteOptions{})
		s.failed(t, err, wserr.PathIsDirectory, d, before)
		_, err = fsys.Write(ctx, d, []byte("x"), vfs.WriteOptions{Mode: vfs.Append})
		s.failed(t, err, wserr.PathIsDirectory, d, before)
		assert.Equal(t, "inner", string(s.state(t, p).content))
	})

	t.Run("ErrWriteBelowFile", func(t *testing.T) {
		f := s.path("plain.txt")
		info, err := fsys.Write(ctx, f, []byte("plain"), vfs.WriteOptions{})
		s.written(t, f, info, err, "plain")
		before := s.state(t, f)
		p, err := f.Join("child.txt")
		require.NoError(t, err)
		_, err = fsys.Write(ctx, p, []byte("x"), vfs.WriteOptions{})
		require.Equal(t, wserr.NotADirectory, wserr.CodeOf(err), "error: %v", err)
		assert.Equal(t, before, s.state(t, f), "the file in the way is unchanged")
	})

	t.Run("ErrInvalidWriteMode", func(t *testing.T) {
		p := s.path("mode.txt")
		_, err := fsys.Write(ctx, p, []byte("x"), vfs.WriteOptions{Mode: "bogus"})
		s.failed(t, err, wserr.InvalidArgument, p, state{})
	})

	t.Run("Patch", func(t *testing.T) {
		p := s.path("patch.md")
		info, err := fsys.Write(ctx, p, []byte("alpha beta\ngamma beta\n"), vfs.WriteOptions{})
		s.written(t, p, info, err, "alpha beta\ngamma beta\n")
		info, err = fsys.Patch(ctx, p, "alpha", "ALPHA", vfs.PatchOptions{})
		s.written(t, p, info, err, "ALPHA beta\ngamma beta\n")
		info, err = fsys.Patch(ctx, p, "beta", "b", vfs.PatchOptions{ReplaceAll: true})
		s.written(t, p, info, err, "ALPHA b\ngamma b\n")
		info, err = fsys.Patch(ctx, p, "gamma b\n", "", vfs.PatchOptions{})
		s.written(t, p, info, err, "ALPHA b\n")
	})

	t.Run("ErrPatch", func(t *testing.T) {
		p := s.path("patch-errors.md")
		info, err := fsys.Write(ctx, p, []byte("dup dup once\n"), vfs.WriteOptions{})
		s.written(t, p, info, err, "dup dup once\n")
		bin := s.path("patch-errors.bin")
		info, err = fsys.Write(ctx, bin, []byte("a\x00b"), vfs.WriteOptions{})
		s.written(t, bin, info, err, "a\x00b")
		dirFile := s.path("patch-dir/f.txt")
		info, err = fsys.Write(ctx, dirFile, []byte("f"), vfs.WriteOptions{})
		s.written(t, dirFile, info, err, "f")

		tests := []struct {
			name     string
			path     vfs.Path
			old, new string
			code     wserr.Code
		}{
			{"ErrPatchEmptyOldString", p, "", "x", wserr.PatchEmptyOldString},
			{"ErrPatchOldStringNotFound", p, "absent", "x", wserr.PatchOldStringNotFound},
			{"ErrPatchOldStringNotUnique", p, "dup", "x", wserr.PatchOldStringNotUnique},
			{"ErrPatchNoChange", p, "once", "once", wserr.PatchNoChange},
			{"ErrNotText", bin, "a", "c", wserr.NotText},
			{"ErrFileNotFound", s.path("patch-missing.md"), "a", "b", wserr.FileNotFound},
			{"ErrPathIsDirectory", dirFile.Dir(), "a", "b", wserr.PathIsDirectory},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				before := s.state(t, tt.path)
				_, err := fsys.Patch(ctx, tt.path, tt.old, tt.new, vfs.PatchOptions{})
				s.failed(t, err, tt.code, tt.path, before)
				if tt.code == wserr.PatchOldStringNotUnique {
					assert.Contains(t, wserr.MessageOf(err), "2", "the message says how often")
				}
			})
		}
	})

	t.Run("Remove", func(t *testing.T) {
		p := s.path("doomed.txt")
		info, err := fsys.Write(ctx, p, []byte("bye"), vfs.WriteOptions{})
		s.written(t, p, info, err, "bye")
		require.NoError(t, fsys.Remove(ctx, p))
		delete(s.files, p)
		_, err = fsys.Stat(ctx, p)
		requireCode(t, err, wserr.FileNotFound, p)
		_, err = fsys.Read(ctx, p, vfs.ReadOptions{})
		requireCode(t, err, wserr.FileNotFound, p)
	})

	t.Run("ErrRemove", func(t *testing.T) {
		missing := s.path("never-there.txt")
		s.failed(t, fsys.Remove(ctx, missing), wserr.FileNotFound, missing, state{})

		f := s.path("rmdir/keep.txt")
		info, err := fsys.Write(ctx, f, []byte("keep"), vfs.WriteOptions{})
		s.written(t, f, info, err, "keep")
		before := s.state(t, f.Dir())
		s.failed(t, fsys.Remove(ctx, f.Dir()), wserr.PathIsDirectory, f.Dir(), before)
		assert.Equal(t, "keep", string(s.state(t, f).content))
	})

	t.Run("NothingElseWritten", func(t *testing.T) {
		infos, err := fsys.List(ctx, dir, deep)
		require.NoError(t, err)
		var got []string
		for _, info := range infos {
			if info.Kind == vfs.KindFile {
				got = append(got, info.Path.String())
			}
		}
		var want []string
		for p := range s.files {
			want = append(want, p.String())
		}
		slices.Sort(got)
		slices.Sort(want)
		assert.Equal(t, want, got, "the files below %s are those written, no more", dir)
		for p, content := range s.files {
			st := s.state(t, p)
			assert.True(t, bytes.Equal(content, st.content), "%s holds its last write", p)
		}
	})
}
