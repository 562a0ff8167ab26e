package cas_test

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/wserr"
)

// TestTallyFinishCanceled: a Finish whose context has ended fails with
// store.canceled, not the bare context error.
func TestTallyFinishCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	tally := &cas.Tally{R: io.LimitReader(randomReader(6), 1<<20)}
	_, _, err := tally.Finish(ctx, "write", "output/a.bin")
	_, coded := errors.AsType[*wserr.Error](err)
	assert.True(t, coded, "store.canceled, not a bare context error: %v", err)
	assert.Equal(t, wserr.Canceled, wserr.CodeOf(err))
	assert.ErrorIs(t, err, context.Canceled)
}
