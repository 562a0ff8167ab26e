package heappeak_test

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/wsstore/wsstore/internal/heappeak"
)

// TestPeakSeesAHeldBuffer: a buffer of 32 MiB held when the sampling
// stops is in the peak, which a run that holds nothing stays well under.
func TestPeakSeesAHeldBuffer(t *testing.T) {
	runtime.GC()
	stop := heappeak.Start()
	quiet := stop()
	assert.Positive(t, quiet)

	stop = heappeak.Start()
	b := make([]byte, 32<<20)
	for i := range b {
		b[i] = byte(i)
	}
	held := stop()
	runtime.KeepAlive(b)
	assert.GreaterOrEqual(t, held, uint64(32<<20))
	assert.Less(t, quiet, uint64(32<<20))
}
