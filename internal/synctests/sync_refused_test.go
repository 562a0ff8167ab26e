package synctests_test

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

// TestSyncRunRefusedKeepsASuccessor: B deletes C's run and creates a new
// one under its id (its deletion names the new run as successor); A
// created another run under the id on its own. C and D, which hold C's
// run, read A's segment before B's: they refuse A's run, and B's deletion
// is not applied ahead of its turn, where it puts B's new run in the
// deleted one's place, as it does for every device that held the deleted
// run.
func TestSyncRunRefusedKeepsASuccessor(t *testing.T) {
	_, open := fakeTier(t)
	s := storesByDevice(t, open, 4)
	a, c, b, d := s[0], s[1], s[2], s[3]
	createRun(t, c, "r")
	edit(t, c, "r", "life.md", "C")
	syncOK(t, c)
	syncOK(t, b)
	syncOK(t, d)
	createRun(t, a, "r")
	edit(t, a, "r", "life.md", "A")
	syncOK(t, a)
	deleteRun(t, b, "r")
	createRun(t, b, "r")
	edit(t, b, "r", "life.md", "B")
	syncOK(t, b)
	syncRounds(t, 3, c, d, a, b)
	for name, st := range map[string]*wsstore.Store{"B": b, "C": c, "D": d} {
		assert.Equal(t, "B", secondLife(t, st, "r"), "%s holds B's run in the deleted one's place", name)
	}
	assert.Equal(t, "A", secondLife(t, a, "r"), "A keeps its own run")
}
