package rss

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestChildPeakLeavesTheParentsMark: exec hands the child the parent's
// high-water mark as read from per-CPU counters, which may lie a little
// above the exact mark /proc gave the parent. That is still the parent's.
func TestChildPeakLeavesTheParentsMark(t *testing.T) {
	const mib = 1 << 20
	parent := int64(136 * mib)
	assert.Equal(t, int64(40*mib), childPeak(40*mib, parent, parent), "the parent's mark")
	assert.Equal(t, int64(40*mib), childPeak(40*mib, parent+3*mib, parent), "the parent's mark, read a little high")
	assert.Equal(t, int64(400*mib), childPeak(40*mib, 400*mib, parent), "a child's own growth past the poll")
	assert.Equal(t, int64(90*mib), childPeak(90*mib, 50*mib, 0), "the poll saw more")
}
