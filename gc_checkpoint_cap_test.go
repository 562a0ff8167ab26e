package wsstore_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/runs"
)

// TestGCFreesWhatOnlyPrunedCheckpointsReached: a checkpoint deleted by the
// run's MaxCheckpoints is no longer a root, so gc frees the content only it
// reached, and keeps what the kept checkpoints and the live workspace
// reach.
func TestGCFreesWhatOnlyPrunedCheckpointsReached(t *testing.T) {
	cases := []struct {
		name      string
		limit     int
		freed     int // blobs
		keptFirst bool
	}{
		{"OKNoCapKeepsEveryVersion", 0, 0, true},
		{"OKCapFreesPrunedVersion", 2, 1, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			prof := runs.DefaultProfile()
			prof.MaxCheckpoints = tc.limit
			_, err := e.s.Runs.CreateRun(e.ctx, runs.CreateRequest{
				Chat: runs.ChatKey{Kind: "character", StableChatID: "chat-1"}, RunID: "run_a", Profile: &prof})
			require.NoError(t, err)
			// Incompressible and unrelated, so no version is stored as a
			// delta of another: each is one blob of its own.
			v1, v2, v3 := random(11, 4000), random(12, 4000), random(13, 4000)
			e.write("run_a", "scratch/data.bin", v1) // cp_000002
			e.write("run_a", "scratch/data.bin", v2) // cp_000003
			e.write("run_a", "scratch/data.bin", v3) // cp_000004, live
			rep := e.gc(wsstore.GCOptions{Grace: -1, Now: e.later})
			assert.Equal(t, tc.freed, rep.Freed.Blobs)

			cps, err := e.s.Checkpoints.List(e.ctx, "run_a")
			require.NoError(t, err)
			if tc.limit > 0 {
				require.Len(t, cps, tc.limit)
				assert.Equal(t, []string{"cp_000003", "cp_000004"}, []string{cps[0].ID, cps[1].ID})
			}
			assert.Equal(t, tc.keptFirst, e.has(cas.Sum(v1)), "v1 was reached only by cp_000002")
			assert.True(t, e.has(cas.Sum(v2)), "cp_000003 holds v2")
			assert.True(t, e.has(cas.Sum(v3)), "the live workspace holds v3")
			e.requireReadable("run_a", map[string][]byte{"scratch/data.bin": v3})

			// What the first collection freed is gone for good; a second
			// finds nothing, and every row left is reachable.
			again := e.gc(wsstore.GCOptions{Grace: -1, Now: e.later})
			assert.Zero(t, again.Freed)
			assert.Equal(t, e.counts(), again.Reachable)
		})
	}
}
