package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestIntegerFlagsAreDecimal: an integer flag is read in base 10, as the
// same number in "policy --set" or a batch field: 010 is ten, not eight,
// and 0x10 or 1_000 is refused as a usage error.
func TestIntegerFlagsAreDecimal(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.seedRun(c.open(), "run_a")
	all := strings.Count(c.ok("log", "run_a"), "\n")
	require.Equal(t, 9, all, "the seeded run's events")
	assert.Equal(t, 9, strings.Count(c.ok("log", "run_a", "--limit", "010"), "\n"), "--limit 010 is ten")
	assert.Equal(t, 8, strings.Count(c.ok("log", "run_a", "--limit", "8"), "\n"))
	for _, bad := range []string{"0x10", "1_000", "0b11", "ten", "99999999999999999999"} {
		msg := c.fails(2, "log", "run_a", "--limit", bad)
		assert.Contains(t, msg, "wsctl.invalid_argument", bad)
		assert.Contains(t, msg, `"--limit"`, bad)
	}
	msg := c.fails(2, "runs", "--max-store-bytes", "0x10")
	assert.Contains(t, msg, "not a whole number in decimal digits")
}
