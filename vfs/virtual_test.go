package vfs_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/vfs/vfstest"
	"github.com/wsstore/wsstore/wserr"
)

// skillFiles is what the static provider under skills/ serves.
var skillFiles = map[string]string{
	"long-form/SKILL.md":        "# Long form\n\nWrite slowly.\nKeep the voice.\n",
	"long-form/notes/世界书.md":    "世界书：本轮激活的条目。\n第二行\n",
	"long-form/notes/empty.md":  "",
	"long-form/assets/logo.png": "\x89PNG\x00\x01",
	"index.md":                  "skills index",
}

const historyTail = "user: hello\nassistant: hi there\n"

// newTestVirtual mounts skillFiles at skills/ and a generated history file
// at chat/history.tail.md, and returns it with the files it holds by
// workspace path.
func newTestVirtual(t *testing.T) (*vfs.Virtual, map[string]string) {
	t.Helper()
	static := map[string][]byte{}
	want := map[string]string{"chat/history.tail.md": historyTail}
	for name, content := range skillFiles {
		static[name] = []byte(content)
		want["skills/"+name] = content
	}
	sp, err := vfs.NewStaticProvider(static)
	require.NoError(t, err)
	v := vfs.NewVirtual()
	require.NoError(t, v.Mount(vfs.MustPath("skills"), sp))
	require.NoError(t, v.Mount(vfs.MustPath("chat/history.tail.md"), vfs.FileProvider(func(ctx context.Context) ([]byte, error) {
		return []byte(historyTail), nil
	})))
	return v, want
}

// virtualCode checks that err carries code and names path.
func virtualCode(t *testing.T, err error, code wserr.Code, path string) *wserr.Error {
	t.Helper()
	var e *wserr.Error
	require.ErrorAs(t, err, &e, "error: %v", err)
	assert.Equal(t, code, e.Code, "error: %v", err)
	assert.Equal(t, path, e.Path)
	return e
}

func TestVirtualConformance(t *testing.T) {
	v, want := newTestVirtual(t)
	vfstest.TestFS(t, v, want)
}

func TestStaticProviderConformance(t *testing.T) {
	static := map[string][]byte{}
	for name, content := range skillFiles {
		static[name] = []byte(content)
	}
	sp, err := vfs.NewStaticProvider(static)
	require.NoError(t, err)
	vfstest.TestFS(t, sp, skillFiles)
}

func TestVirtualInfo(t *testing.T) {
	v, _ := newTestVirtual(t)
	ctx := t.Context()
	for _, p := range []string{"skills/index.md", "skills/long-form", "chat", "chat/history.tail.md"} {
		info, err := v.Stat(ctx, vfs.MustPath(p))
		require.NoError(t, err, p)
		assert.Equal(t, p, info.Path.String(), "paths are workspace paths")
		assert.Equal(t, vfs.ResourceVirtual, info.Resource)
		assert.False(t, info.Writable)
	}
	res, err := v.Read(ctx, vfs.MustPath("chat/history.tail.md"), vfs.ReadOptions{StartLine: 2})
	require.NoError(t, err)
	assert.Equal(t, "assistant: hi there\n", res.Text)
	assert.Equal(t, "chat/history.tail.md", res.Info.Path.String())
	assert.Equal(t, vfs.ResourceVirtual, res.Info.Resource)

	infos, err := v.List(ctx, vfs.MustPath("chat"), 5)
	require.NoError(t, err)
	require.Len(t, infos, 1, "a mounted file lists as itself, nothing below it")
	assert.Equal(t, vfs.KindFile, infos[0].Kind)
}

func TestVirtualMount(t *testing.T) {
	sp, err := vfs.NewStaticProvider(map[string][]byte{"a.md": []byte("a")})
	require.NoError(t, err)
	newV := func(t *testing.T) *vfs.Virtual {
		v := vfs.NewVirtual()
		require.NoError(t, v.Mount(vfs.MustPath("chat/history.tail.md"), sp))
		require.NoError(t, v.Mount(vfs.MustPath("skills"), sp))
		return v
	}
	tests := []struct {
		name   string
		prefix vfs.Path
		prov   vfs.Provider
	}{
		{"ErrRoot", vfs.Root(), sp},
		{"ErrNilProvider", vfs.MustPath("other"), nil},
		{"ErrSamePrefix", vfs.MustPath("skills"), sp},
		{"ErrInsideExisting", vfs.MustPath("skills/x"), sp},
		{"ErrInsideMountedFile", vfs.MustPath("chat/history.tail.md/x"), sp},
		{"ErrAboveExisting", vfs.MustPath("chat"), sp},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := newV(t)
			err := v.Mount(tt.prefix, tt.prov)
			virtualCode(t, err, wserr.InvalidArgument, tt.prefix.String())
			assert.Equal(t, []string{"chat/history.tail.md", "skills"}, prefixStrings(v.Prefixes()), "a failed mount changes nothing")
		})
	}

	t.Run("OKSiblings", func(t *testing.T) {
		v := newV(t)
		require.NoError(t, v.Mount(vfs.MustPath("chat/history.search"), sp))
		require.NoError(t, v.Mount(vfs.MustPath("skills-extra"), sp))
		assert.Equal(t, []string{"chat/history.search", "chat/history.tail.md", "skills", "skills-extra"}, prefixStrings(v.Prefixes()))
	})
}

func prefixStrings(ps []vfs.Path) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return out
}

func TestVirtualMatch(t *testing.T) {
	v, _ := newTestVirtual(t)
	tests := []struct {
		name        string
		path        string
		prefix, rel string
		ok          bool
	}{
		{"OKBelowPrefix", "skills/long-form/SKILL.md", "skills", "long-form/SKILL.md", true},
		{"OKPrefixItself", "skills", "skills", ".", true},
		{"OKMountedFile", "chat/history.tail.md", "chat/history.tail.md", ".", true},
		{"NoMatchAbovePrefix", "chat", "", "", false},
		{"NoMatchSimilarName", "skills-old/x", "", "", false},
		{"NoMatchElsewhere", "output/main.md", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prefix, rel, prov, ok := v.Match(vfs.MustPath(tt.path))
			require.Equal(t, tt.ok, ok)
			if !ok {
				assert.Nil(t, prov)
				return
			}
			assert.NotNil(t, prov)
			assert.Equal(t, tt.prefix, prefix.String())
			assert.Equal(t, tt.rel, rel.String())
		})
	}
}

func TestVirtualReadOnly(t *testing.T) {
	v, _ := newTestVirtual(t)
	ctx := t.Context()
	for _, p := range []string{"skills/index.md", "chat/history.tail.md", "skills/new.md", "output/main.md"} {
		t.Run("ErrReadOnlyResource/"+p, func(t *testing.T) {
			path := vfs.MustPath(p)
			_, err := v.Write(ctx, path, []byte("x"), vfs.WriteOptions{})
			e := virtualCode(t, err, wserr.ReadOnlyResource, p)
			assert.Contains(t, e.Msg, "materialize it into input/ or copy it into output/")
			assert.True(t, e.Code.ModelCorrectable())
			_, err = v.Patch(ctx, path, "skills", "x", vfs.PatchOptions{})
			virtualCode(t, err, wserr.ReadOnlyResource, p)
			virtualCode(t, v.Remove(ctx, path), wserr.ReadOnlyResource, p)
		})
	}
	res, err := v.Read(ctx, vfs.MustPath("skills/index.md"), vfs.ReadOptions{})
	require.NoError(t, err)
	assert.Equal(t, "skills index", res.Text, "unchanged")
}

func TestFileProvider(t *testing.T) {
	ctx := t.Context()

	t.Run("OKGeneratedOnEveryRead", func(t *testing.T) {
		n := 0
		v := vfs.NewVirtual()
		require.NoError(t, v.Mount(vfs.MustPath("chat/history.tail.md"), vfs.FileProvider(func(ctx context.Context) ([]byte, error) {
			n++
			return fmt.Appendf(nil, "version %d\n", n), nil
		})))
		p := vfs.MustPath("chat/history.tail.md")
		r1, err := v.Read(ctx, p, vfs.ReadOptions{})
		require.NoError(t, err)
		r2, err := v.Read(ctx, p, vfs.ReadOptions{})
		require.NoError(t, err)
		assert.Equal(t, "version 1\n", r1.Text)
		assert.Equal(t, "version 2\n", r2.Text, "never cached, never stale")
		assert.NotEqual(t, r1.Info.Hash, r2.Info.Hash)
	})

	t.Run("ErrCodedPassesThrough", func(t *testing.T) {
		v := vfs.NewVirtual()
		require.NoError(t, v.Mount(vfs.MustPath("chat/history.tail.md"), vfs.FileProvider(func(ctx context.Context) ([]byte, error) {
			return nil, wserr.New(wserr.FileNotFound, "history", "chats/abc.jsonl", "chat has no history yet")
		})))
		_, err := v.Read(ctx, vfs.MustPath("chat/history.tail.md"), vfs.ReadOptions{})
		e := virtualCode(t, err, wserr.FileNotFound, "chat/history.tail.md")
		assert.Contains(t, e.Msg, "no history yet")
	})

	t.Run("ErrUncodedIsInternal", func(t *testing.T) {
		boom := errors.New("database is gone")
		v := vfs.NewVirtual()
		require.NoError(t, v.Mount(vfs.MustPath("chat/history.tail.md"), vfs.FileProvider(func(ctx context.Context) ([]byte, error) {
			return nil, boom
		})))
		_, err := v.Stat(ctx, vfs.MustPath("chat/history.tail.md"))
		virtualCode(t, err, wserr.Internal, "chat/history.tail.md")
		assert.ErrorIs(t, err, boom)
		_, err = v.List(ctx, vfs.MustPath("chat"), 1)
		virtualCode(t, err, wserr.Internal, "chat/history.tail.md")
	})

	t.Run("ErrRangeNamesWorkspacePath", func(t *testing.T) {
		v, _ := newTestVirtual(t)
		_, err := v.Read(ctx, vfs.MustPath("chat/history.tail.md"), vfs.ReadOptions{StartLine: 9})
		e := virtualCode(t, err, wserr.InvalidLineRange, "chat/history.tail.md")
		assert.Contains(t, e.Msg, "2 lines")
	})
}

func TestNewStaticProvider(t *testing.T) {
	tests := []struct {
		name  string
		files map[string][]byte
		code  wserr.Code
	}{
		{"ErrInvalidPath", map[string][]byte{"../secret": nil}, wserr.InvalidPath},
		{"ErrAbsolutePath", map[string][]byte{"/etc/passwd": nil}, wserr.InvalidPath},
		{"ErrSamePathTwice", map[string][]byte{"a/b": nil, "a//b": nil}, wserr.InvalidArgument},
		{"ErrFileAndDirectory", map[string][]byte{"a": nil, "a/b": nil}, wserr.InvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := vfs.NewStaticProvider(tt.files)
			assert.Equal(t, tt.code, wserr.CodeOf(err), "error: %v", err)
		})
	}

	t.Run("OKCopiesContent", func(t *testing.T) {
		b := []byte("original")
		sp, err := vfs.NewStaticProvider(map[string][]byte{"a.md": b})
		require.NoError(t, err)
		copy(b, "CHANGED!")
		res, err := sp.Read(t.Context(), vfs.MustPath("a.md"), vfs.ReadOptions{})
		require.NoError(t, err)
		assert.Equal(t, "original", res.Text)
		res.Content[0] = 'X'
		res, err = sp.Read(t.Context(), vfs.MustPath("a.md"), vfs.ReadOptions{})
		require.NoError(t, err)
		assert.Equal(t, "original", res.Text, "a caller cannot change the provider through Read")
	})
}

func TestVirtualSearch(t *testing.T) {
	v, _ := newTestVirtual(t)
	ctx := t.Context()

	t.Run("OKAcrossProviders", func(t *testing.T) {
		hits, err := hitsOf(v.Search(ctx, "hello there", vfs.SearchOptions{}))
		require.NoError(t, err)
		require.NotEmpty(t, hits)
		assert.Equal(t, "chat/history.tail.md", hits[0].Path.String())
	})

	t.Run("OKChinese", func(t *testing.T) {
		hits, err := hitsOf(v.Search(ctx, "世界书", vfs.SearchOptions{}))
		require.NoError(t, err)
		require.Len(t, hits, 1)
		assert.Equal(t, "skills/long-form/notes/世界书.md", hits[0].Path.String())
		assert.Equal(t, 1, hits[0].StartLine)
	})

	t.Run("OKBelowPath", func(t *testing.T) {
		hits, err := hitsOf(v.Search(ctx, "skills index voice", vfs.SearchOptions{Path: vfs.MustPath("skills/long-form")}))
		require.NoError(t, err)
		require.Len(t, hits, 1)
		assert.Equal(t, "skills/long-form/SKILL.md", hits[0].Path.String())
	})

	t.Run("OKPathIsFile", func(t *testing.T) {
		hits, err := hitsOf(v.Search(ctx, "hello", vfs.SearchOptions{Path: vfs.MustPath("chat/history.tail.md")}))
		require.NoError(t, err)
		require.Len(t, hits, 1)
	})

	t.Run("ErrFileNotFound", func(t *testing.T) {
		_, err := hitsOf(v.Search(ctx, "hello", vfs.SearchOptions{Path: vfs.MustPath("nowhere")}))
		virtualCode(t, err, wserr.FileNotFound, "nowhere")
	})

	t.Run("ErrInvalidArgument", func(t *testing.T) {
		_, err := hitsOf(v.Search(ctx, "  ", vfs.SearchOptions{}))
		assert.Equal(t, wserr.InvalidArgument, wserr.CodeOf(err))
	})
}

// failingProvider is a directory provider whose every call fails, as a
// provider whose backend is down does.
type failingProvider struct{}

var errBackendDown = errors.New("backend down")

func (failingProvider) Stat(context.Context, vfs.Path) (vfs.FileInfo, error) {
	return vfs.FileInfo{}, errBackendDown
}

func (failingProvider) Read(context.Context, vfs.Path, vfs.ReadOptions) (vfs.ReadResult, error) {
	return vfs.ReadResult{}, errBackendDown
}

func (failingProvider) List(context.Context, vfs.Path, int) ([]vfs.FileInfo, error) {
	return nil, errBackendDown
}

// TestVirtualSearchSkipsFailingMount: a search from above the prefixes
// goes on past a mount whose provider fails, a directory's or a file's,
// and names it in Skipped with its error; a search at or inside that
// mount fails with the provider's error.
func TestVirtualSearchSkipsFailingMount(t *testing.T) {
	v, _ := newTestVirtual(t)
	ctx := t.Context()
	require.NoError(t, v.Mount(vfs.MustPath("docs"), failingProvider{}))
	require.NoError(t, v.Mount(vfs.MustPath("chat/broken.md"), vfs.FileProvider(func(context.Context) ([]byte, error) {
		return nil, wserr.New(wserr.Busy, "", "", "the history service does not answer")
	})))

	for _, root := range []string{"", "chat"} {
		opt := vfs.SearchOptions{}
		if root != "" {
			opt.Path = vfs.MustPath(root)
		}
		res, err := v.Search(ctx, "hello there", opt)
		require.NoError(t, err, "from %q", root)
		require.NotEmpty(t, res.Hits)
		assert.Equal(t, "chat/history.tail.md", res.Hits[0].Path.String())
		want := []vfs.SkippedMount{{Path: vfs.MustPath("chat/broken.md"), Code: wserr.Busy, Message: "chat/broken.md: the history service does not answer"}}
		if root == "" {
			want = append(want, vfs.SkippedMount{Path: vfs.MustPath("docs"), Code: wserr.Internal, Message: "docs: backend down"})
		}
		assert.Equal(t, want, res.Skipped, "from %q", root)
	}

	t.Run("OKWithinMaxFiles", func(t *testing.T) {
		res, err := v.Search(ctx, "hello skills", vfs.SearchOptions{MaxFiles: 1})
		require.NoError(t, err)
		require.Len(t, res.Hits, 1, "one file scanned, a skipped mount counting none")
		assert.Equal(t, "chat/history.tail.md", res.Hits[0].Path.String())
	})

	t.Run("ErrAtTheMount", func(t *testing.T) {
		_, err := v.Search(ctx, "hello", vfs.SearchOptions{Path: vfs.MustPath("docs")})
		virtualCode(t, err, wserr.Internal, "docs")
		_, err = v.Search(ctx, "hello", vfs.SearchOptions{Path: vfs.MustPath("docs/inside")})
		assert.Equal(t, wserr.Internal, wserr.CodeOf(err), "%v", err)
		_, err = v.Search(ctx, "hello", vfs.SearchOptions{Path: vfs.MustPath("chat/broken.md")})
		virtualCode(t, err, wserr.Busy, "chat/broken.md")
	})

	t.Run("ErrCanceled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(ctx)
		cancel()
		_, err := v.Search(ctx, "hello", vfs.SearchOptions{})
		assert.Equal(t, wserr.Canceled, wserr.CodeOf(err), "%v", err)
	})
}

func TestVirtualConcurrentMount(t *testing.T) {
	v, _ := newTestVirtual(t)
	ctx := t.Context()
	sp, err := vfs.NewStaticProvider(map[string][]byte{"a.md": []byte("a")})
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 50 {
			assert.NoError(t, v.Mount(vfs.MustPath(fmt.Sprintf("extra/m%02d", i)), sp))
		}
	}()
	for range 50 {
		_, err := v.List(ctx, vfs.Root(), 3)
		require.NoError(t, err)
		_, err = v.Read(ctx, vfs.MustPath("skills/index.md"), vfs.ReadOptions{})
		require.NoError(t, err)
	}
	<-done
	infos, err := v.List(ctx, vfs.MustPath("extra"), 1)
	require.NoError(t, err)
	assert.Len(t, infos, 50)
}

// TestVirtualCanceled: a call whose context has ended fails with
// store.canceled naming its path, not the bare context error.
func TestVirtualCanceled(t *testing.T) {
	v, _ := newTestVirtual(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := v.Stat(ctx, vfs.MustPath("skills/index.md"))
	virtualCode(t, err, wserr.Canceled, "skills/index.md")
	_, err = v.Read(ctx, vfs.MustPath("chat/history.tail.md"), vfs.ReadOptions{})
	virtualCode(t, err, wserr.Canceled, "chat/history.tail.md")
	_, err = v.List(ctx, vfs.MustPath("skills"), 2)
	virtualCode(t, err, wserr.Canceled, "skills")
}

// hitsOf is a search's hits, for tests that look at nothing else.
func hitsOf(res vfs.SearchResult, err error) ([]vfs.Hit, error) { return res.Hits, err }
