package wsstore_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
)

// TestSyncRunRefusedThenFreed: A and C each create a run under the same
// id, two different runs; B holds the one it read first and deletes it.
// A device that holds that run, or a new one reading the others in an
// order that brings it first, would refuse the other run (a conflict: it
// holds one under the id) and then take in B's deletion, holding nothing
// under the id while the other run's device, which sent it before, does
// not send it again. Seeing B's deletion of exactly the state it holds in
// a segment it reads later in the sync, it applies that deletion first and
// takes the other run in: whatever the order of the devices' ids, every
// device ends with the run B did not delete, a new device included.
func TestSyncRunRefusedThenFreed(t *testing.T) {
	for pi, p := range [][4]int{{0, 1, 2, 3}, {0, 2, 1, 3}, {1, 0, 2, 3}, {1, 2, 0, 3}, {2, 0, 1, 3}, {2, 1, 0, 3},
		{3, 2, 1, 0}, {3, 1, 0, 2}, {0, 3, 2, 1}, {2, 3, 0, 1}, {1, 0, 3, 2}, {0, 1, 3, 2}} {
		t.Run(fmt.Sprint("order", pi), func(t *testing.T) {
			_, open := fakeTier(t)
			s := storesByDevice(t, open, 4)
			a, b, c, e := s[p[0]], s[p[1]], s[p[2]], s[p[3]]
			createRun(t, a, "r")
			edit(t, a, "r", "life.md", "A")
			syncOK(t, a)
			createRun(t, c, "r")
			edit(t, c, "r", "life.md", "C")
			syncOK(t, c)
			syncOK(t, b)
			held := secondLife(t, b, "r")
			require.NotEmpty(t, held, "B holds one of the two runs")
			deleteRun(t, b, "r")
			syncOK(t, b)
			survivor := map[string]string{"A": "C", "C": "A"}[held]
			syncRounds(t, 3, a, b, c)
			syncRounds(t, 2, a, b, c, e)
			for name, st := range map[string]*wsstore.Store{"A": a, "B": b, "C": c, "E (new)": e} {
				assert.Equal(t, survivor, secondLife(t, st, "r"), "%s ends with the run B did not delete", name)
			}
		})
	}
}
