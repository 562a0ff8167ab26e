package wserr_test

import (
	"context"
	"errors"
	"fmt"
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
