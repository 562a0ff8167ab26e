package wserr_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/wsstore/wsstore/wserr"
)

// TestCodeOf: the first code in the chain wins; a context's end without a
// code of its own is Canceled, any other error Internal.
func TestCodeOf(t *testing.T) {
	assert.Equal(t, wserr.Code(""), wserr.CodeOf(nil))
	assert.Equal(t, wserr.Internal, wserr.CodeOf(errors.New("boom")))
	assert.Equal(t, wserr.Canceled, wserr.CodeOf(fmt.Errorf("begin: %w", context.Canceled)))
	assert.Equal(t, wserr.Canceled, wserr.CodeOf(fmt.Errorf("gc: %w", context.DeadlineExceeded)))
	assert.Equal(t, wserr.Busy, wserr.CodeOf(fmt.Errorf("x: %w", wserr.Wrap(wserr.Busy, "op", "", context.Canceled))))
}

// TestIsAgreesWithCodeOf: Is says of a context's end without a code what
// CodeOf says, Canceled; a coded error keeps its own code.
func TestIsAgreesWithCodeOf(t *testing.T) {
	for _, err := range []error{fmt.Errorf("begin: %w", context.Canceled), context.DeadlineExceeded} {
		assert.True(t, wserr.Is(err, wserr.Canceled), "%v", err)
		assert.False(t, wserr.Is(err, wserr.Internal), "%v", err)
	}
	busy := fmt.Errorf("x: %w", wserr.Wrap(wserr.Busy, "op", "", context.Canceled))
	assert.True(t, wserr.Is(busy, wserr.Busy))
	assert.False(t, wserr.Is(busy, wserr.Canceled))
	assert.False(t, wserr.Is(errors.New("boom"), wserr.Canceled))
}

// TestFromFS: a full disk or quota and a read-only file system under a
// file beside the store keep the codes the store's own writes give them;
// any other failure is internal; the cause stays in the chain.
func TestFromFS(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code wserr.Code
	}{
		{syscall.ENOSPC, wserr.DiskFull},
		{syscall.EDQUOT, wserr.DiskFull},
		{syscall.EROFS, wserr.ReadOnly},
		{syscall.ENOENT, wserr.Internal},
	} {
		err := wserr.FromFS("export", "/tmp", fmt.Errorf("temporary file: %w", &os.PathError{Op: "write", Path: "/tmp/x", Err: tc.err}))
		assert.Equal(t, tc.code, wserr.CodeOf(err), "%v", tc.err)
		assert.ErrorIs(t, err, tc.err)
	}
}
