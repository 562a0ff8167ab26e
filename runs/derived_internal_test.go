package runs

import (
	"context"
	"io"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// TestDerivedReadStartsNoStreamItRefuses: a whole read of a derived file
// larger than MaxReadBytes is refused from its size, without the stream
// that would write it starting; a range read starts it once.
func TestDerivedReadStartsNoStreamItRefuses(t *testing.T) {
	var starts atomic.Int32
	line := strings.Repeat("x", 1023) + "\n"
	d := &derived{size: int64(MaxReadBytes) + 1024, write: func(ctx context.Context, w io.Writer) error {
		starts.Add(1)
		for n := 0; n < MaxReadBytes+1024; n += len(line) {
			if _, err := io.WriteString(w, line); err != nil {
				return err
			}
		}
		return nil
	}}
	p := vfs.MustPath("checkpoints/cp_000001/checkpoint.json")
	_, err := d.read(context.Background(), p, vfs.ReadOptions{})
	assert.True(t, wserr.Is(err, wserr.SizeLimitExceeded), "%v", err)
	assert.Zero(t, starts.Load(), "refused from its size")

	res, err := d.read(context.Background(), p, vfs.ReadOptions{StartLine: 2, EndLine: 3})
	require.NoError(t, err)
	assert.Equal(t, line+line, string(res.Content))
	assert.Equal(t, int32(1), starts.Load())
}
