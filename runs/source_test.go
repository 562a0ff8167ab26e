package runs_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// failingSource yields n bytes, then fails with err.
type failingSource struct {
	n   int
	err error
}

func (s *failingSource) Read(b []byte) (int, error) {
	if s.n == 0 {
		return 0, s.err
	}
	k := min(len(b), s.n)
	for i := range b[:k] {
		b[i] = 'x'
	}
	s.n -= k
	return k, nil
}

// TestStreamFromAFailingSourceIsCoded: content a caller streams in
// (Workspace.WriteFrom, Spaces.Upload) whose reader fails is the
// caller's error, workspace.invalid_argument, its own error still
// reachable, never an uncoded store.internal; nothing changes.
func TestStreamFromAFailingSourceIsCoded(t *testing.T) {
	ctx := context.Background()
	s := storetest.OpenStore(t)
	errRead := errors.New("the connection was reset")
	run, err := s.Runs.CreateRun(ctx, runs.CreateRequest{Chat: testChat})
	require.NoError(t, err)
	ws := s.Runs.Workspace(run.ID, runs.ModelScope)
	p := vfs.MustPath("output/upload.bin")

	_, err = ws.WriteFrom(ctx, p, &failingSource{n: 300 << 10, err: errRead}, vfs.WriteOptions{})
	assert.Equal(t, wserr.InvalidArgument, wserr.CodeOf(err), "%v", err)
	assert.ErrorIs(t, err, errRead)
	_, err = ws.Stat(ctx, p)
	assert.True(t, wserr.Is(err, wserr.FileNotFound), "nothing written: %v", err)

	_, err = s.Actors.Upload(ctx, "ada", "notes/a.md", strings.NewReader("kept"))
	require.NoError(t, err)
	_, err = s.Actors.Upload(ctx, "ada", "notes/a.md", &failingSource{n: 300 << 10, err: errRead})
	assert.Equal(t, wserr.InvalidArgument, wserr.CodeOf(err), "%v", err)
	assert.ErrorIs(t, err, errRead)
	rc, _, err := s.Actors.Download(ctx, "ada", "notes/a.md")
	require.NoError(t, err)
	b, err := io.ReadAll(rc)
	require.NoError(t, err)
	require.NoError(t, rc.Close())
	assert.Equal(t, "kept", string(b), "the space's file is unchanged")

	// A reader's own coded error, and a context's end, keep their codes.
	_, err = ws.WriteFrom(ctx, p, &failingSource{n: 10, err: wserr.New(wserr.SizeLimitExceeded, "read", "", "too much")}, vfs.WriteOptions{})
	assert.Equal(t, wserr.SizeLimitExceeded, wserr.CodeOf(err), "%v", err)
	_, err = ws.WriteFrom(ctx, p, &failingSource{n: 10, err: context.Canceled}, vfs.WriteOptions{})
	assert.Equal(t, wserr.Canceled, wserr.CodeOf(err), "%v", err)
}
