package synctests_test

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/archive"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/remote"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/wserr"
)

var syncMatrix = flag.Bool("sync.matrix", false, "run every order of TestSyncDeletionAfterAConflict (384 cases, about 80 s)")

// storesByDevice opens n stores on one tier, sorted by device id: the
// order in which a device reads the others' segments.
func storesByDevice(t *testing.T, open func() *wsstore.Store, n int) []*wsstore.Store {
	t.Helper()
	ids := map[*wsstore.Store]string{}
	var sts []*wsstore.Store
	for range n {
		st := open()
		id, err := remote.Device(context.Background(), st.DB)
		require.NoError(t, err)
		ids[st] = id
		sts = append(sts, st)
	}
	sort.Slice(sts, func(i, j int) bool { return ids[sts[i]] < ids[sts[j]] })
	return sts
}

// devicesInOrder opens three stores on a new tier and returns them in the
// order p gives (indexes into storesByDevice's result: the first is the
// store whose id sorts p[0]th), with the tier's opener for more.
func devicesInOrder(t *testing.T, p [3]int) (open func() *wsstore.Store, a, b, c *wsstore.Store) {
	t.Helper()
	_, open = fakeTier(t)
	s := storesByDevice(t, open, 3)
	return open, s[p[0]], s[p[1]], s[p[2]]
}

// Orders of three devices' ids (indexes into storesByDevice's result):
// every one, or one in which each device comes first.
var (
	allOrders = [][3]int{{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}}
	rotations = [][3]int{{0, 1, 2}, {1, 2, 0}, {2, 0, 1}}
)

// syncRounds syncs each store in turn, n times over.
func syncRounds(t *testing.T, n int, sts ...*wsstore.Store) {
	t.Helper()
	for range n {
		for _, st := range sts {
			syncOK(t, st)
		}
	}
}

// TestSyncDeletionAfterAConflict: A deletes a run while B writes to it;
// both name the conflict and the run stays. Then B deletes it, or A
// deletes it again, or both, or neither; a third device C syncs at some
// of the moments in between, and a new device E syncs at the end. Every
// device ends without the run if anyone deleted it after the conflict,
// and with it otherwise, whatever the order of the devices' ids (the
// order in which each reads the others) and of C's syncs. Before, B's
// deletion after the conflict was taken for A's tombstone and never
// published, so A, C and E kept the run. By default one order of C's
// syncs per case; -sync.matrix runs all 16.
func TestSyncDeletionAfterAConflict(t *testing.T) {
	has := func(st *wsstore.Store) bool { return slices.Contains(runIDs(t, st), "r-00") }
	masks := []int{0b1011}
	if *syncMatrix {
		masks = nil
		for m := range 16 {
			masks = append(masks, m)
		}
	}
	for _, then := range []string{"B deletes", "A deletes again", "both delete", "nobody deletes"} {
		for pi, p := range allOrders {
			for _, mask := range masks {
				t.Run(fmt.Sprintf("%s/order%d/c%04b", then, pi, mask), func(t *testing.T) {
					open, a, b, c := devicesInOrder(t, p)
					ctx := context.Background()
					smallRuns(t, a, "chat-1", "r", 1)
					syncRounds(t, 1, a, b, c)
					cSyncs := func(stage int) {
						if mask&(1<<stage) != 0 {
							syncOK(t, c)
						}
					}
					_, err := a.Runs.CancelAndDeleteRun(ctx, "r-00")
					require.NoError(t, err)
					edit(t, b, "r-00", "late.md", "B\n")
					syncOK(t, a)
					cSyncs(0)
					assert.Equal(t, []string{"run r-00"}, conflictNames(syncOK(t, b).Conflicts), "B names the conflict")
					cSyncs(1)
					syncOK(t, a)
					cSyncs(2)
					require.True(t, has(a) && has(b), "both keep the run")
					del := func(st *wsstore.Store) {
						_, err := st.Runs.CancelAndDeleteRun(ctx, "r-00")
						require.NoError(t, err)
						syncOK(t, st)
					}
					switch then {
					case "B deletes":
						del(b)
					case "A deletes again":
						del(a)
					case "both delete":
						del(a)
						del(b)
					}
					cSyncs(3)
					syncRounds(t, 3, a, b, c)
					e := open()
					syncOK(t, e)
					want := then == "nobody deletes"
					for name, st := range map[string]*wsstore.Store{"A": a, "B": b, "C": c, "E": e} {
						assert.Equal(t, want, has(st), "%s holds the run", name)
					}
				})
			}
		}
	}
}

// TestSyncDeletionAfterOtherConflicts: a deletion made after a conflict
// where the journals part at the deleted state's length, and a chat
// deleted with its runs after a chat conflict, are published too and
// delete what they name on every device.
func TestSyncDeletionAfterOtherConflicts(t *testing.T) {
	for pi, p := range rotations {
		t.Run(fmt.Sprintf("JournalsPart/order%d", pi), func(t *testing.T) {
			open, a, b, c := devicesInOrder(t, p)
			ctx := context.Background()
			smallRuns(t, a, "chat-1", "r", 1)
			syncRounds(t, 1, a, b, c)
			edit(t, a, "r-00", "a.md", "A\n")
			syncOK(t, a)
			edit(t, b, "r-00", "b.md", "B\n") // the same length, another event
			_, err := a.Runs.CancelAndDeleteRun(ctx, "r-00")
			require.NoError(t, err)
			syncOK(t, a)
			rb := syncOK(t, b)
			require.NotEmpty(t, rb.Conflicts)
			assert.True(t, slices.ContainsFunc(rb.Conflicts, func(c archive.Conflict) bool {
				return c.ID == "r-00" && strings.Contains(c.Reason, "journals part")
			}), "B names the parting: %v", rb.Conflicts)
			syncRounds(t, 1, a, c)
			_, err = b.Runs.CancelAndDeleteRun(ctx, "r-00")
			require.NoError(t, err)
			assert.Equal(t, []string{"run r-00"}, syncOK(t, b).Tombstones, "B publishes its deletion")
			syncRounds(t, 2, a, b, c)
			e := open()
			syncOK(t, e)
			for name, st := range map[string]*wsstore.Store{"A": a, "B": b, "C": c, "E": e} {
				assert.NotContains(t, runIDs(t, st), "r-00", name)
			}
		})
		t.Run(fmt.Sprintf("Chat/order%d", pi), func(t *testing.T) {
			open, a, b, c := devicesInOrder(t, p)
			ctx := context.Background()
			smallRuns(t, a, "chat-3", "s", 1)
			syncRounds(t, 1, a, b, c)
			chat3 := runs.ChatKey{Kind: "character", StableChatID: "chat-3"}
			chatName := "chat " + runs.ChatWorkspaceID(chat3)
			_, err := a.Runs.DeleteChats(ctx, []runs.ChatKey{chat3}, true)
			require.NoError(t, err)
			smallRuns(t, b, "chat-3", "late", 1)
			syncOK(t, a)
			require.Equal(t, []string{chatName}, conflictNames(syncOK(t, b).Conflicts))
			syncRounds(t, 1, a, c)
			_, err = b.Runs.DeleteChats(ctx, []runs.ChatKey{chat3}, true)
			require.NoError(t, err)
			assert.ElementsMatch(t, []string{chatName, "run late-00"}, syncOK(t, b).Tombstones, "B publishes the chat's deletion and its run's")
			syncRounds(t, 2, a, b, c)
			e := open()
			syncOK(t, e)
			for name, st := range map[string]*wsstore.Store{"A": a, "B": b, "C": c, "E": e} {
				assert.Empty(t, runIDs(t, st), name)
				assert.NoError(t, st.DB.View(ctx, func(tx *index.Tx) error {
					_, err := st.Runs.ExportChat(ctx, tx, runs.ChatWorkspaceID(chat3))
					assert.True(t, wserr.Is(err, wserr.NotFound), "%s: the chat is gone: %v", name, err)
					return nil
				}), name)
			}
		})
	}
}
