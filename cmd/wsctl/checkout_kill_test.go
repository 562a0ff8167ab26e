package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stageMark is in the name of the hidden directory a checkout writes
// into, as the README gives it.
const stageMark = ".wsstore-checkout-"

// TestCheckoutClearsStagesKilledCheckoutsLeft: the hidden directory a
// killed checkout left is removed by the next checkout to the same DIR
// once nothing has changed in it for an hour; a younger one (a checkout
// maybe still writing) is left, and inside DIR it keeps DIR from being
// taken as empty.
func TestCheckoutClearsStagesKilledCheckoutsLeft(t *testing.T) {
	c := newCLI(t)
	c.seedRun(c.open(), "run_a")
	old := time.Now().Add(-2 * time.Hour)
	stage := func(parent, name string, stale bool) string {
		p := filepath.Join(parent, name)
		require.NoError(t, os.MkdirAll(filepath.Join(p, "output"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(p, "output", "half.md"), []byte("x"), 0o644))
		if stale {
			require.NoError(t, os.Chtimes(p, old, old))
		}
		return p
	}

	t.Run("BesideANewDir", func(t *testing.T) {
		parent := t.TempDir()
		staleStage := stage(parent, ".co"+stageMark+"0123456789ab", true)
		youngStage := stage(parent, ".co"+stageMark+"a1b2c3d4e5f6", false)
		other := stage(parent, ".co"+stageMark+"notours", true)
		c.ok("checkout", "run_a", filepath.Join(parent, "co"))
		assert.NoDirExists(t, staleStage)
		assert.DirExists(t, youngStage)
		assert.DirExists(t, other)
		assert.FileExists(t, filepath.Join(parent, "co", "output", "a.md"))
	})
	t.Run("InsideAnEmptyDir", func(t *testing.T) {
		dir := t.TempDir()
		staleStage := stage(dir, stageMark+"0123456789ab", true)
		c.ok("checkout", "run_a", dir)
		assert.NoDirExists(t, staleStage)
		assert.FileExists(t, filepath.Join(dir, "output", "a.md"))
		assert.NoFileExists(t, filepath.Join(dir, "output", "half.md"))
	})
	t.Run("ErrYoungStageInside", func(t *testing.T) {
		dir := t.TempDir()
		youngStage := stage(dir, stageMark+"0123456789ab", false)
		errOut := c.fails(5, "checkout", "run_a", dir)
		assert.Contains(t, errOut, "not empty")
		assert.DirExists(t, youngStage)
		assert.NoDirExists(t, filepath.Join(dir, "output"))
	})
}
