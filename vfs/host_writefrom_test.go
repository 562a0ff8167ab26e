package vfs_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// patternReader yields n bytes of a repeating pattern without holding
// them.
type patternReader struct{ n, off int64 }

func (r *patternReader) Read(p []byte) (int, error) {
	if r.off >= r.n {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), r.n-r.off)]
	for i := range p {
		p[i] = byte('a' + (r.off+int64(i))%23)
	}
	r.off += int64(len(p))
	return len(p), nil
}

// failAfter yields n bytes of r, then fails with err.
type failAfter struct {
	r   io.Reader
	n   int
	err error
}

func (f *failAfter) Read(p []byte) (int, error) {
	if f.n <= 0 {
		return 0, f.err
	}
	p = p[:min(len(p), f.n)]
	n, err := f.r.Read(p)
	f.n -= n
	return n, err
}

// tempFiles lists the write's temporary files left in dir.
func tempFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, ".wsstore-write-*"))
	require.NoError(t, err)
	return m
}

func TestHostWriteFrom(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	writeHostTree(t, dir, map[string]string{"a.txt": "old\n"})
	require.NoError(t, os.Chmod(filepath.Join(dir, "a.txt"), 0o600))
	h := openHost(t, dir, true)
	p := vfs.MustPath("a.txt")

	t.Run("OKStreamsIntoPlace", func(t *testing.T) {
		const size = 3<<20 + 17
		want, err := io.ReadAll(&patternReader{n: size})
		require.NoError(t, err)
		fi, err := h.WriteFrom(ctx, p, &patternReader{n: size}, vfs.WriteOptions{ExpectedHash: cas.Sum([]byte("old\n"))})
		require.NoError(t, err)
		assert.Equal(t, int64(size), fi.Size)
		assert.Equal(t, cas.Sum(want), fi.Hash)
		got, err := os.ReadFile(filepath.Join(dir, "a.txt"))
		require.NoError(t, err)
		assert.True(t, bytes.Equal(want, got))
		st, err := os.Stat(filepath.Join(dir, "a.txt"))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), st.Mode().Perm(), "the file keeps its mode")
		assert.Empty(t, tempFiles(t, dir))
	})

	t.Run("OKMemoryDoesNotGrowWithTheContent", func(t *testing.T) {
		alloc := func(size int64) uint64 {
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := h.WriteFrom(ctx, vfs.MustPath("big.bin"), &patternReader{n: size}, vfs.WriteOptions{})
			require.NoError(t, err)
			runtime.ReadMemStats(&after)
			return after.TotalAlloc - before.TotalAlloc
		}
		small, large := alloc(1<<20), alloc(32<<20)
		t.Logf("allocated %d B for 1 MiB, %d B for 32 MiB", small, large)
		assert.Less(t, large, small+1<<20, "32 MiB streamed with no more allocation than 1 MiB, give or take")
	})

	errRead := errors.New("upload cut")
	before, err := os.ReadFile(filepath.Join(dir, "a.txt"))
	require.NoError(t, err)
	unchanged := func(t *testing.T) {
		t.Helper()
		got, err := os.ReadFile(filepath.Join(dir, "a.txt"))
		require.NoError(t, err)
		assert.True(t, bytes.Equal(before, got), "the file is unchanged")
		assert.Empty(t, tempFiles(t, dir), "no temporary file is left")
	}
	t.Run("ErrReaderFails", func(t *testing.T) {
		_, err := h.WriteFrom(ctx, p, &failAfter{r: &patternReader{n: 1 << 20}, n: 200 << 10, err: errRead}, vfs.WriteOptions{})
		assert.ErrorIs(t, err, errRead, "the reader's own error")
		assert.Equal(t, wserr.InvalidArgument, wserr.CodeOf(err), "%v", err)
		unchanged(t)
	})
	t.Run("ErrCanceled", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		r := &failAfter{r: &patternReader{n: 1 << 20}, n: 1 << 20}
		_, err := h.WriteFrom(cctx, p, readFunc(func(b []byte) (int, error) {
			cancel() // ends while the content streams
			return r.Read(b)
		}), vfs.WriteOptions{})
		assert.ErrorIs(t, err, context.Canceled)
		unchanged(t)
	})
	t.Run("ErrStale", func(t *testing.T) {
		_, err := h.WriteFrom(ctx, p, &patternReader{n: 10}, vfs.WriteOptions{ExpectedHash: cas.Sum([]byte("old\n"))})
		hostCode(t, err, wserr.WriteStaleFile, "a.txt")
		unchanged(t)
	})
	t.Run("ErrAppend", func(t *testing.T) {
		_, err := h.WriteFrom(ctx, p, &patternReader{n: 10}, vfs.WriteOptions{Mode: vfs.Append})
		hostCode(t, err, wserr.InvalidArgument, "a.txt")
		unchanged(t)
	})
	t.Run("ErrReadOnly", func(t *testing.T) {
		ro := openHost(t, dir, false)
		_, err := ro.WriteFrom(ctx, p, &patternReader{n: 10}, vfs.WriteOptions{})
		hostCode(t, err, wserr.PathNotWritable, "a.txt")
		unchanged(t)
	})
	t.Run("ErrMissingDir", func(t *testing.T) {
		_, err := h.WriteFrom(ctx, vfs.MustPath("nope/x.txt"), &patternReader{n: 10}, vfs.WriteOptions{})
		hostCode(t, err, wserr.FileNotFound, "nope/x.txt")
		assert.NoDirExists(t, filepath.Join(dir, "nope"))
	})
}

type readFunc func([]byte) (int, error)

func (f readFunc) Read(b []byte) (int, error) { return f(b) }

// TestHostWriteFromHoldsNoLockWhileStreaming: a stream that stalls does
// not hold up the directory's other writers, and a stream whose context
// ends while it waits changes nothing, even if the reader then ends well.
func TestHostWriteFromHoldsNoLockWhileStreaming(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	writeHostTree(t, dir, map[string]string{"a.txt": "old\n"})
	h := openHost(t, dir, true)

	release := make(chan struct{})
	stalled := make(chan struct{})
	streamCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		first := true
		_, err := h.WriteFrom(streamCtx, vfs.MustPath("a.txt"), readFunc(func(b []byte) (int, error) {
			if first {
				first = false
				return copy(b, "new\n"), nil
			}
			close(stalled)
			<-release // the sender stalls
			return 0, io.EOF
		}), vfs.WriteOptions{})
		done <- err
	}()
	<-stalled

	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	_, err := h.Write(wctx, vfs.MustPath("b.txt"), []byte("beside\n"), vfs.WriteOptions{})
	require.NoError(t, err, "a write in the same directory does not wait for the stalled stream")

	cancel()
	close(release)
	assert.ErrorIs(t, <-done, context.Canceled)
	b, err := os.ReadFile(filepath.Join(dir, "a.txt"))
	require.NoError(t, err)
	assert.Equal(t, "old\n", string(b), "the cancelled stream is not put in place")
	assert.Empty(t, tempFiles(t, dir))
}

// TestHostWriteFromReaderPanics: a reader that panics leaves no
// temporary file, and the panic goes on to the caller.
func TestHostWriteFromReaderPanics(t *testing.T) {
	dir := t.TempDir()
	writeHostTree(t, dir, map[string]string{"a.txt": "old\n"})
	h := openHost(t, dir, true)
	assert.PanicsWithValue(t, "reader broke", func() {
		h.WriteFrom(context.Background(), vfs.MustPath("a.txt"), readFunc(func(b []byte) (int, error) {
			panic("reader broke")
		}), vfs.WriteOptions{})
	})
	assert.Empty(t, tempFiles(t, dir))
	b, err := os.ReadFile(filepath.Join(dir, "a.txt"))
	require.NoError(t, err)
	assert.Equal(t, "old\n", string(b))
}

// TestHostPathsThroughFiles: a path through a file, or a link to a file
// written as a directory ("f.txt/"), names no file: a removal finds
// nothing, and a write is refused, as the system refuses them.
func TestHostPathsThroughFiles(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	writeHostTree(t, dir, map[string]string{"f.txt": "f\n"})
	require.NoError(t, os.Symlink("f.txt/", filepath.Join(dir, "trail")))
	h := openHost(t, dir, true)

	_, err := h.RemoveFile(ctx, vfs.MustPath("f.txt/x"))
	hostCode(t, err, wserr.FileNotFound, "f.txt/x")
	_, err = h.Write(ctx, vfs.MustPath("f.txt/x"), []byte("x"), vfs.WriteOptions{})
	hostCode(t, err, wserr.NotADirectory, "f.txt/x")
	for _, mode := range []vfs.WriteMode{vfs.Replace, vfs.Append} {
		_, err = h.Write(ctx, vfs.MustPath("trail"), []byte("x"), vfs.WriteOptions{Mode: mode})
		hostCode(t, err, wserr.NotADirectory, "trail")
	}
	_, err = h.Patch(ctx, vfs.MustPath("trail"), "f", "g", vfs.PatchOptions{})
	hostCode(t, err, wserr.NotADirectory, "trail")
	b, err := os.ReadFile(filepath.Join(dir, "f.txt"))
	require.NoError(t, err)
	assert.Equal(t, "f\n", string(b))
}

// TestHostTemporaryNamesAreRefused: a write may not make a file named as
// the store's temporary files, which no listing shows.
func TestHostTemporaryNamesAreRefused(t *testing.T) {
	dir := t.TempDir()
	h := openHost(t, dir, true)
	_, err := h.Write(context.Background(), vfs.MustPath("sub/.wsstore-write-abc"), []byte("x"), vfs.WriteOptions{})
	hostCode(t, err, wserr.InvalidPath, "sub/.wsstore-write-abc")
	_, err = h.WriteFrom(context.Background(), vfs.MustPath(".wsstore-write-abc"), &patternReader{n: 1}, vfs.WriteOptions{})
	hostCode(t, err, wserr.InvalidPath, ".wsstore-write-abc")
	assert.Empty(t, tempFiles(t, dir))
}
