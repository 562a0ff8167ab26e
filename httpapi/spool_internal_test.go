package httpapi

import (
	"bytes"
	"io"
	"math/rand/v2"
	"os"
	"syscall"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/wserr"
)

// TestSpoolReplays: each reader of a spool reads the whole body from its
// first byte, whether the first stopped inside the bytes kept in memory,
// past them in the file, or read to the end; the body itself is read
// once, and only as far as a reader asked.
func TestSpoolReplays(t *testing.T) {
	body := make([]byte, 10_000)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range body {
		body[i] = byte(r.Uint32())
	}
	src := bytes.NewReader(body)
	read := func() int64 { return int64(len(body) - src.Len()) }
	sp := newSpool(t.TempDir(), iotest.HalfReader(src), 1_000)
	defer sp.Close()
	for _, stop := range []int64{500, 4_000, 20_000} {
		got, err := io.ReadAll(io.LimitReader(iotest.OneByteReader(sp.reader()), stop))
		require.NoError(t, err)
		assert.Equal(t, body[:min(stop, int64(len(body)))], got, "a reader stopping at %d", stop)
		assert.LessOrEqual(t, read(), stop, "the body is read as far as asked")
	}
	got, err := io.ReadAll(sp.reader())
	require.NoError(t, err)
	assert.Equal(t, body, got)
	assert.Equal(t, int64(len(body)), read(), "the body is read once")
	assert.NotNil(t, sp.f, "past the memory, a file")

	small := newSpool(t.TempDir(), bytes.NewReader(body[:800]), 1_000)
	_, err = io.ReadAll(small.reader())
	require.NoError(t, err)
	assert.Nil(t, small.f, "a body within the memory makes no file")
}

// TestSpoolErrorCodes: a full disk and a read-only file system are coded
// as the store's own writes code them.
func TestSpoolErrorCodes(t *testing.T) {
	for errno, code := range map[syscall.Errno]wserr.Code{
		syscall.ENOSPC: wserr.DiskFull,
		syscall.EROFS:  wserr.ReadOnly,
		syscall.EACCES: wserr.Internal,
	} {
		err := spoolError(&os.PathError{Op: "open", Path: "/tmp/x", Err: errno})
		assert.Equal(t, code, wserr.CodeOf(err), "%v", errno)
	}
}

// TestSpoolFullDisk: a write of the copy that fails (a full disk: the file
// is /dev/full) fails the read with store.disk_full, and leaves the copy
// as it was: a reader from the first byte reads what was kept before,
// then the same error, never the bytes after the ones lost.
func TestSpoolFullDisk(t *testing.T) {
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skip("no /dev/full here")
	}
	body := bytes.Repeat([]byte("0123456789"), 300)
	sp := newSpool(t.TempDir(), bytes.NewReader(body), 1_000)
	sp.f = full
	defer sp.Close()
	r := sp.reader()
	head := make([]byte, 500)
	_, err = io.ReadFull(r, head)
	require.NoError(t, err, "within the memory")
	_, err = io.ReadAll(r)
	assert.Equal(t, wserr.DiskFull, wserr.CodeOf(err), "%v", err)
	again, err := io.ReadAll(sp.reader())
	assert.Equal(t, wserr.DiskFull, wserr.CodeOf(err), "%v", err)
	assert.Equal(t, body[:500], again, "what was kept reads back as it was")
}
