package wsstore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/actors"
	"github.com/wsstore/wsstore/archive"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/maint"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

func ptr[T any](v T) *T { return &v }

// letters returns n random lowercase letters from the PCG (seed, stream):
// content that compresses little, so stored bytes are close to plain.
func letters(seed, stream uint64, n int) string {
	rng := rand.New(rand.NewPCG(seed, stream))
	b := make([]byte, n)
	for j := range b {
		b[j] = byte('a' + rng.IntN(26))
	}
	return string(b)
}

type retEnv struct {
	t     *testing.T
	ctx   context.Context
	s     *wsstore.Store
	clock *storetest.Clock
}

func newRetEnv(t *testing.T, opts wsstore.Options) *retEnv {
	clock := storetest.NewClock()
	opts.Now = clock.Now
	if opts.ReclaimGrace == 0 {
		opts.ReclaimGrace = -1
	}
	return &retEnv{t: t, ctx: context.Background(), s: storetest.OpenStoreWith(t, opts), clock: clock}
}

func (e *retEnv) run(chat, id string, prof *runs.Profile) runs.Run {
	r, err := e.s.Runs.CreateRun(e.ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: chat}, RunID: id, Profile: prof})
	require.NoError(e.t, err)
	return r
}

func (e *retEnv) write(runID, path, content string) error {
	_, err := e.s.Runs.Workspace(runID, runs.ModelScope).Write(e.ctx, vfs.MustPath(path), []byte(content), vfs.WriteOptions{})
	return err
}

func (e *retEnv) finish(runID string) {
	_, err := e.s.Runs.Finish(e.ctx, runID)
	require.NoError(e.t, err)
}

func (e *retEnv) runIDs() []string {
	rs, err := e.s.Runs.Runs(e.ctx, runs.ListQuery{})
	require.NoError(e.t, err)
	var ids []string
	for _, r := range rs {
		ids = append(ids, r.ID)
	}
	return ids
}

func (e *retEnv) deletions() []runs.Deletion {
	ds, _, err := e.s.Runs.Deletions(e.ctx, 0, 0)
	require.NoError(e.t, err)
	return ds
}

// TestRunCapIgnoresInheritedPersist: a chat whose persist/ layer is larger
// than a run's cap still starts runs that can write.
func TestRunCapIgnoresInheritedPersist(t *testing.T) {
	e := newRetEnv(t, wsstore.Options{})
	e.run("c", "run_1", nil)
	require.NoError(t, e.write("run_1", "persist/mem.md", strings.Repeat("m", 400)))
	e.finish("run_1")
	e.run("c", "run_2", &runs.Profile{MaxRunBytes: 500})
	require.NoError(t, e.write("run_2", "output/a.md", "hello"), "the first 5-byte write of the run fits its cap")
	err := e.write("run_2", "output/b.md", strings.Repeat("x", 500))
	assert.True(t, wserr.Is(err, wserr.SizeLimitExceeded), "%v", err)
}

// TestDeleteChatWithActiveRunIsRefused: refused with chat.active_run,
// changing nothing; forced, it cancels, deletes and records.
func TestDeleteChatWithActiveRunIsRefused(t *testing.T) {
	e := newRetEnv(t, wsstore.Options{})
	e.run("c", "run_done", nil)
	require.NoError(t, e.write("run_done", "persist/p.md", "keep"))
	e.finish("run_done")
	e.run("c", "run_live", nil)
	e.run("other", "run_other", nil)
	tables := []string{"chats", "runs", "events", "checkpoints", "commits", "deletions", "trees", "blobs"}
	counts := func() map[string]int {
		m := map[string]int{}
		for _, tb := range tables {
			m[tb] = storetest.CountRows(t, e.s.DB, tb)
		}
		return m
	}
	before := counts()
	key := runs.ChatKey{Kind: "character", StableChatID: "c"}
	_, err := e.s.Runs.DeleteChats(e.ctx, []runs.ChatKey{key}, false)
	require.True(t, wserr.Is(err, wserr.ChatActiveRun), "%v", err)
	assert.Equal(t, before, counts(), "a refused deletion changes nothing")

	res, err := e.s.Runs.DeleteChats(e.ctx, []runs.ChatKey{key, {Kind: "character", StableChatID: "never"}}, true)
	require.NoError(t, err)
	require.Len(t, res.Chats, 2)
	assert.ElementsMatch(t, []string{"run_done", "run_live"}, res.Chats[0].Runs)
	assert.Equal(t, []string{"run_live"}, res.Chats[0].Cancelled)
	assert.False(t, res.Chats[1].Found)
	assert.Equal(t, []string{"run_other"}, e.runIDs(), "only the named chat's runs go")
	_, err = e.s.Runs.Chat(e.ctx, runs.ChatWorkspaceID(key))
	assert.True(t, wserr.Is(err, wserr.NotFound))
	ds := e.deletions()
	require.Len(t, ds, 2)
	assert.Equal(t, runs.DeletedChat, ds[0].Kind)
	assert.Equal(t, "forced", ds[0].Reason)
	assert.Contains(t, string(ds[0].Detail), "run_live")
	assert.Equal(t, runs.Reclaimed, ds[1].Kind)
	assert.Positive(t, ds[1].BytesFreed, "the chat's persist layer and runs were swept")
	storetest.RequireSound(t, e.s)
}

// TestRetentionSettingsDeleteWhatTheyName: each setting deletes exactly
// the runs it names, never an active one, and logs the setting.
func TestRetentionSettingsDeleteWhatTheyName(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy runs.Policy
		want   map[string]string // deleted run -> reason
	}{
		{"KeepCompletedRuns", runs.Policy{KeepCompletedRuns: ptr(1)}, map[string]string{"r1": "keepCompletedRuns", "r2": "keepCompletedRuns"}},
		{"KeepFailedRuns", runs.Policy{KeepFailedRuns: ptr(1)}, map[string]string{"f1": "keepFailedRuns"}},
		{"MaxRunWorkspacesPerChat", runs.Policy{MaxRunWorkspacesPerChat: ptr(3)}, map[string]string{"r1": "maxRunWorkspacesPerChat", "f1": "maxRunWorkspacesPerChat", "r2": "maxRunWorkspacesPerChat"}},
		{"AutoPruneAfterDays", runs.Policy{AutoPruneAfterDays: ptr(2)}, map[string]string{"r1": "autoPruneAfterDays", "f1": "autoPruneAfterDays"}},
		// The runs keepCompletedRuns deletes leave the chat within
		// maxRunWorkspacesPerChat: it deletes nothing more.
		{"KeepCompletedRunsThenMaxRunWorkspaces", runs.Policy{KeepCompletedRuns: ptr(1), MaxRunWorkspacesPerChat: ptr(4)}, map[string]string{"r1": "keepCompletedRuns", "r2": "keepCompletedRuns"}},
		{"KeepFailedRunsThenMaxRunWorkspaces", runs.Policy{KeepFailedRuns: ptr(1), MaxRunWorkspacesPerChat: ptr(4)}, map[string]string{"f1": "keepFailedRuns", "r1": "maxRunWorkspacesPerChat"}},
		// Longer ago than any run can have finished (and than a
		// time.Duration reaches: 106,751 days): none is that old.
		{"AutoPruneAfterDaysBeforeTheEpoch", runs.Policy{AutoPruneAfterDays: ptr(1_000_000)}, map[string]string{}},
		{"AutoPruneAfterDaysLargest", runs.Policy{AutoPruneAfterDays: ptr(math.MaxInt)}, map[string]string{}},
		{"Unset", runs.Policy{}, map[string]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newRetEnv(t, wsstore.Options{})
			// Oldest first: r1 (completed), f1 (failed), r2, f2 (cancelled),
			// r3 (completed), live (running); r1 and f1 are 3 days old.
			for _, id := range []string{"r1", "f1", "r2", "f2", "r3", "live"} {
				e.run("c", id, nil)
				require.NoError(t, e.write(id, "output/a.md", "content of "+id))
				switch id[0] {
				case 'r':
					e.finish(id)
				case 'f':
					status := runs.Failed
					if id == "f2" {
						status = runs.Cancelled
					}
					require.NoError(t, e.s.Runs.SetStatus(e.ctx, id, status, "test"))
				}
				if id == "f1" {
					e.clock.Advance(3 * 24 * time.Hour)
				}
			}
			require.NoError(t, e.s.Runs.SetPolicy(e.ctx, runs.StoreScope, tc.policy))
			dry, err := e.s.Runs.Prune(e.ctx, runs.PruneOptions{DryRun: true})
			require.NoError(t, err)
			assert.Len(t, dry.Runs, len(tc.want))
			assert.Len(t, e.runIDs(), 6, "a dry run deletes nothing")
			rep, err := e.s.Runs.Prune(e.ctx, runs.PruneOptions{})
			require.NoError(t, err)
			got := map[string]string{}
			for _, r := range rep.Runs {
				got[r.RunID] = r.Reason
			}
			assert.Equal(t, tc.want, got)
			assert.Contains(t, e.runIDs(), "live", "an active run is never pruned")
			logged := map[string]string{}
			for _, d := range e.deletions() {
				if d.Kind == runs.DeletedRun {
					logged[d.RunID] = d.Reason
				}
			}
			assert.Equal(t, tc.want, logged, "every deletion is in the log with its setting")
			storetest.RequireSound(t, e.s)
		})
	}
}

// TestChatPolicyOverridesStore: a chat's own setting wins over the
// store's for that chat only.
func TestChatPolicyOverridesStore(t *testing.T) {
	e := newRetEnv(t, wsstore.Options{})
	for _, chat := range []string{"a", "b"} {
		for i := range 3 {
			id := fmt.Sprintf("%s%d", chat, i)
			e.run(chat, id, nil)
			e.finish(id)
		}
	}
	require.NoError(t, e.s.Runs.SetPolicy(e.ctx, runs.StoreScope, runs.Policy{KeepCompletedRuns: ptr(1)}))
	chatA := runs.ChatWorkspaceID(runs.ChatKey{Kind: "character", StableChatID: "a"})
	require.NoError(t, e.s.Runs.SetPolicy(e.ctx, chatA, runs.Policy{KeepCompletedRuns: ptr(2)}))
	_, err := e.s.Runs.Prune(e.ctx, runs.PruneOptions{})
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"a2", "a1", "b2"}, e.runIDs())
}

// TestCheckpointByteCap: a run's checkpoints keep at most
// maxCheckpointBytesPerRun beyond its live tree; the oldest go, recorded
// in the journal and the deletion log, and the reads stay bounded.
func TestCheckpointByteCap(t *testing.T) {
	e := newRetEnv(t, wsstore.Options{})
	require.NoError(t, e.s.Runs.SetPolicy(e.ctx, runs.StoreScope, runs.Policy{MaxCheckpointBytesPerRun: ptr(int64(3000))}))
	r := e.run("c", "run_1", nil)
	for i := range 40 {
		require.NoError(t, e.write(r.ID, "output/a.md", letters(uint64(i), 1, 600)))
	}
	ret, err := e.s.Checkpoints.Retained(e.ctx, nil, r.ID)
	require.NoError(t, err)
	assert.LessOrEqual(t, ret, int64(3000), "the run's checkpoints stay within the cap")
	cps, err := e.s.Checkpoints.List(e.ctx, r.ID)
	require.NoError(t, err)
	assert.Less(t, len(cps), 41, "old checkpoints were pruned")
	assert.Equal(t, int64(41), cps[len(cps)-1].Seq, "the newest is kept")
	var pruned int
	for _, d := range e.deletions() {
		if d.Kind == runs.DeletedCheckpoints {
			assert.Equal(t, "maxCheckpointBytesPerRun", d.Reason)
			assert.Positive(t, d.BytesFreed)
			pruned++
		}
	}
	assert.Positive(t, pruned)
	storetest.RequireSound(t, e.s)
}

// TestStoreStaysUnderCapAndShrinks: 200 runs over 20 chats with a store
// cap and a retention policy stay under the cap, and the file shrinks after
// pruning with no manual gc or vacuum.
func TestStoreStaysUnderCapAndShrinks(t *testing.T) {
	const limit = 6 << 20
	e := newRetEnv(t, wsstore.Options{Runs: runs.Options{MaxStoreBytes: limit}})
	ok, err := e.s.DB.AutoVacuum(e.ctx)
	require.NoError(t, err)
	require.True(t, ok, "a new store gives free pages back")
	// The empty schema's pages are no part of what pruning can give back.
	empty, err := e.s.DB.FileBytes()
	require.NoError(t, err)
	require.NoError(t, e.s.Runs.SetPolicy(e.ctx, runs.StoreScope, runs.Policy{KeepCompletedRuns: ptr(2), KeepFailedRuns: ptr(1)}))
	var peak int64
	for i := range 200 {
		id := fmt.Sprintf("run_%03d", i)
		e.run(fmt.Sprintf("chat%02d", i%20), id, nil)
		body := fmt.Sprintf("%d-%s", i, strings.Repeat(fmt.Sprintf("%08x", uint32(i)*2654435761), 2000))
		require.NoError(t, e.write(id, "output/main.md", body))
		require.NoError(t, e.write(id, "output/main.md", body+"\nmore"))
		if i%7 == 0 {
			require.NoError(t, e.s.Runs.SetStatus(e.ctx, id, runs.Failed, "test"))
		} else {
			e.finish(id)
		}
		used, err := e.s.DB.UsedBytes(e.ctx)
		require.NoError(t, err)
		assert.LessOrEqual(t, used, int64(limit), "after run %d", i)
		peak = max(peak, used)
	}
	assert.LessOrEqual(t, len(e.runIDs()), 20*3, "retention keeps at most 2 completed and 1 failed run per chat")
	file, err := e.s.DB.FileBytes()
	require.NoError(t, err)

	// Tighten the policy: the file gives the space back by itself.
	require.NoError(t, e.s.Runs.SetPolicy(e.ctx, runs.StoreScope, runs.Policy{KeepCompletedRuns: ptr(0), KeepFailedRuns: ptr(0)}))
	rep, err := e.s.Runs.Prune(e.ctx, runs.PruneOptions{})
	require.NoError(t, err)
	assert.NotEmpty(t, rep.Runs)
	assert.Positive(t, rep.BytesFreed)
	after, err := e.s.DB.FileBytes()
	require.NoError(t, err)
	assert.Less(t, after-empty, (file-empty)/2, "the file shrinks after pruning (%d -> %d bytes, %d empty)", file, after, empty)
	t.Logf("peak stored %d bytes; file %d -> %d bytes", peak, file, after)
	storetest.RequireSound(t, e.s)
}

// TestCheckpointByteCapAfterRollback: a run that writes, rolls back and
// writes again keeps what each abandoned branch wrote in its checkpoints;
// the byte cap counts it, so such a run stays within its cap too, and the
// checkpoints it prunes hand their parents to their children.
func TestCheckpointByteCapAfterRollback(t *testing.T) {
	e := newRetEnv(t, wsstore.Options{})
	const limit = 3000
	require.NoError(t, e.s.Runs.SetPolicy(e.ctx, runs.StoreScope, runs.Policy{MaxCheckpointBytesPerRun: ptr(int64(limit))}))
	r := e.run("c", "run_1", nil)
	random := func(seed uint64) string { return letters(seed, 2, 600) }
	require.NoError(t, e.write(r.ID, "output/base.md", "base"))
	cps, err := e.s.Checkpoints.List(e.ctx, r.ID)
	require.NoError(t, err)
	target := cps[len(cps)-1].Seq
	const branches = 30
	for i := range branches {
		// Each branch writes a new file, then goes back and checkpoints
		// there: the file lives on only in the branch's checkpoint.
		require.NoError(t, e.write(r.ID, fmt.Sprintf("output/branch%02d.md", i), random(uint64(i))))
		_, err = e.s.Runs.Rollback(e.ctx, r.ID, target, runs.RollbackOptions{})
		require.NoError(t, err)
		cp, err := e.s.Runs.Checkpoint(e.ctx, r.ID, "back")
		require.NoError(t, err)
		target = cp.Seq
	}
	ret, err := e.s.Checkpoints.Retained(e.ctx, nil, r.ID)
	require.NoError(t, err)
	assert.LessOrEqual(t, ret, int64(limit))

	// What the remaining checkpoints really hold beyond the live tree:
	// the branch files, at their stored size. Retained never counts less.
	head, err := e.s.Runs.Run(e.ctx, r.ID)
	require.NoError(t, err)
	files := func(root cas.Hash) []vfs.Listed {
		ls, err := e.s.Trees.List(e.ctx, nil, root, vfs.MustPath("output"), 0)
		require.NoError(t, err)
		return ls
	}
	live := map[cas.Hash]bool{}
	for _, f := range files(head.Root) {
		live[f.Hash] = true
	}
	cps, err = e.s.Checkpoints.List(e.ctx, r.ID)
	require.NoError(t, err)
	held := map[cas.Hash]bool{}
	ids := map[string]bool{}
	for _, c := range cps {
		ids[c.ID] = true
		for _, f := range files(c.Root) {
			if !live[f.Hash] {
				held[f.Hash] = true
			}
		}
	}
	var heldBytes int64
	for h := range held {
		info, err := e.s.Blobs.Stat(e.ctx, h)
		require.NoError(t, err)
		heldBytes += info.Stored
	}
	assert.LessOrEqual(t, heldBytes, ret, "Retained is an upper bound of what the checkpoints hold")
	assert.Less(t, len(held), branches, "abandoned branches count against the cap: not every branch is kept")
	assert.NotEmpty(t, held, "the newest branches are still there")
	for _, c := range cps {
		if c.Parent != "" {
			assert.True(t, ids[c.Parent], "%s names parent %s, which was pruned", c.ID, c.Parent)
		}
	}
	storetest.RequireSound(t, e.s)
}

// TestPolicySetElsewhereAppliesAtOnce: a store opened before another
// process changed the store-wide policy writes under the policy as it is
// now, not as it was when it opened: a cap set elsewhere refuses its next
// write, and a checkpoint byte cap unset elsewhere deletes nothing more.
func TestPolicySetElsewhereAppliesAtOnce(t *testing.T) {
	e := newRetEnv(t, wsstore.Options{})
	other, err := wsstore.Open(e.ctx, e.s.Dir, wsstore.Options{Now: e.clock.Now})
	require.NoError(t, err)
	defer other.Close()
	random := func(seed uint64, n int) string { return letters(seed, 3, n) }

	// The byte cap is set elsewhere, then unset there again: this store
	// read it before, and deletes nothing once it is gone.
	require.NoError(t, other.Runs.SetPolicy(e.ctx, runs.StoreScope, runs.Policy{MaxCheckpointBytesPerRun: ptr(int64(3000))}))
	r := e.run("c", "run_1", nil)
	require.NoError(t, e.write(r.ID, "output/a.md", random(0, 2000)))
	require.NoError(t, other.Runs.SetPolicy(e.ctx, runs.StoreScope, runs.Policy{}))
	for i := range 6 {
		require.NoError(t, e.write(r.ID, "output/a.md", random(uint64(i+1), 2000)))
	}
	cps, err := e.s.Checkpoints.List(e.ctx, r.ID)
	require.NoError(t, err)
	assert.Len(t, cps, 8, "every checkpoint kept: the run's, the first write's, six more")
	assert.Empty(t, e.deletions())

	// A store cap set elsewhere refuses this store's next write.
	used, err := e.s.DB.UsedBytes(e.ctx)
	require.NoError(t, err)
	require.NoError(t, other.Runs.SetPolicy(e.ctx, runs.StoreScope, runs.Policy{MaxStoreBytes: ptr(used + 1000)}))
	err = e.write(r.ID, "output/big.md", random(9, 20000))
	assert.True(t, wserr.Is(err, wserr.SizeLimitExceeded), "%v", err)
	_, err = e.s.Runs.Workspace(r.ID, runs.ModelScope).Apply(e.ctx, []runs.Edit{{Path: vfs.MustPath("output/big.md"), Content: []byte(random(10, 20000))}})
	assert.True(t, wserr.Is(err, wserr.SizeLimitExceeded), "%v", err)
}

// TestPruneDryRunNamesCheckpoints: a dry run names the checkpoints the
// byte cap would delete, exactly those a real prune then deletes, and
// deletes none.
func TestPruneDryRunNamesCheckpoints(t *testing.T) {
	e := newRetEnv(t, wsstore.Options{})
	r := e.run("c", "run_1", nil)
	for i := range 5 {
		require.NoError(t, e.write(r.ID, "output/a.md", letters(uint64(i), 4, 2000)))
	}
	require.NoError(t, e.s.Runs.SetPolicy(e.ctx, runs.StoreScope, runs.Policy{MaxCheckpointBytesPerRun: ptr(int64(3000))}))
	before, err := e.s.Checkpoints.List(e.ctx, r.ID)
	require.NoError(t, err)
	dry, err := e.s.Runs.Prune(e.ctx, runs.PruneOptions{DryRun: true})
	require.NoError(t, err)
	require.Len(t, dry.Checkpoints, 1, "the run over its cap")
	assert.NotEmpty(t, dry.Checkpoints[0].CheckpointIDs)
	after, err := e.s.Checkpoints.List(e.ctx, r.ID)
	require.NoError(t, err)
	assert.Equal(t, before, after, "a dry run deletes nothing")
	assert.Empty(t, e.deletions())

	real, err := e.s.Runs.Prune(e.ctx, runs.PruneOptions{})
	require.NoError(t, err)
	require.Len(t, real.Checkpoints, 1)
	assert.Equal(t, dry.Checkpoints[0].CheckpointIDs, real.Checkpoints[0].CheckpointIDs)
	assert.Equal(t, dry.Checkpoints[0].Bytes, real.Checkpoints[0].Bytes)
}

// TestCheckpointByteCapPassesOverPins: a run that commits early keeps the
// checkpoint its commit was assembled from, and the byte cap goes on
// holding the checkpoints after it: the pin stays, the oldest unpinned
// ones go.
func TestCheckpointByteCapPassesOverPins(t *testing.T) {
	e := newRetEnv(t, wsstore.Options{})
	require.NoError(t, e.s.Runs.SetPolicy(e.ctx, runs.StoreScope, runs.Policy{MaxCheckpointBytesPerRun: ptr(int64(3000))}))
	r := e.run("c", "run_1", nil)
	require.NoError(t, e.write(r.ID, "output/main.md", "short"))
	c, err := e.s.Runs.Commit(e.ctx, r.ID, runs.SinkFunc(func(context.Context, runs.CommitRequest) (json.RawMessage, error) {
		return json.RawMessage(`{}`), nil
	}), runs.CommitOptions{})
	require.NoError(t, err)
	for i := range 20 {
		require.NoError(t, e.write(r.ID, "output/data.md", letters(uint64(i), 5, 600)))
	}
	cps, err := e.s.Checkpoints.List(e.ctx, r.ID)
	require.NoError(t, err)
	var seqs []string
	pinned := false
	for _, cp := range cps {
		seqs = append(seqs, cp.ID)
		pinned = pinned || cp.ID == c.CheckpointID
	}
	assert.True(t, pinned, "the commit's checkpoint %s is kept: %v", c.CheckpointID, seqs)
	assert.Less(t, len(cps), 12, "the checkpoints after the pin are held to the cap: %v", seqs)
	run, err := e.s.Runs.Run(e.ctx, r.ID)
	require.NoError(t, err)
	assert.Equal(t, run.HeadCheckpoint, cps[len(cps)-1].Seq, "the newest is kept")
	_, err = e.s.Checkpoints.View(e.ctx, r.ID, cps[0].Seq)
	require.NoError(t, err)
}

// TestActorUploadsKeepToTheStoreCap: an actor upload that would take the
// store past its cap (store.Options or the policy's maxStoreBytes) fails
// with workspace.size_limit_exceeded and changes no space; one that fits
// goes through.
func TestActorUploadsKeepToTheStoreCap(t *testing.T) {
	e := newRetEnv(t, wsstore.Options{})
	require.NoError(t, e.s.Runs.SetPolicy(e.ctx, runs.StoreScope, runs.Policy{MaxStoreBytes: ptr(int64(2 << 20))}))
	_, err := e.s.Actors.Upload(e.ctx, "alice", "small.md", strings.NewReader("fits"))
	require.NoError(t, err)
	before, err := e.s.Actors.Stats(e.ctx, "alice")
	require.NoError(t, err)

	big := make([]byte, 3<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range big {
		big[i] = byte(rng.Uint32())
	}
	_, err = e.s.Actors.Upload(e.ctx, "alice", "big.bin", bytes.NewReader(big))
	assert.Equal(t, wserr.SizeLimitExceeded, wserr.CodeOf(err), "error: %v", err)
	_, err = e.s.Actors.Upload(e.ctx, "bob", "big.bin", bytes.NewReader(big))
	assert.Equal(t, wserr.SizeLimitExceeded, wserr.CodeOf(err), "error: %v", err)

	after, err := e.s.Actors.Stats(e.ctx, "alice")
	require.NoError(t, err)
	assert.Equal(t, before, after, "a refused upload changes nothing")
	spaces, err := e.s.Actors.Actors(e.ctx)
	require.NoError(t, err)
	assert.Len(t, spaces, 1, "a refused upload creates no space")
	used, err := e.s.DB.UsedBytes(e.ctx)
	require.NoError(t, err)
	assert.LessOrEqual(t, used, int64(2<<20))
}

// TestLargeChangesPastTheCapStoreLittle: an append to, or a patch of, a
// file stored in chunks that would take the store past its cap is
// refused before it stores the new version: the store stays within the
// cap, and an append whose size alone does not fit stores nothing.
func TestLargeChangesPastTheCapStoreLittle(t *testing.T) {
	const limit = 24 << 20
	e := newRetEnv(t, wsstore.Options{Runs: runs.Options{MaxStoreBytes: limit}})
	used := func() int64 {
		n, err := e.s.DB.UsedBytes(e.ctx)
		require.NoError(t, err)
		return n
	}
	r := e.run("c", "run_1", nil)
	ws := e.s.Runs.Workspace(r.ID, runs.ModelScope)
	p := vfs.MustPath("output/log.txt")
	body := letters(1, 2, 9<<20)
	_, err := ws.WriteFrom(e.ctx, p, strings.NewReader(body), vfs.WriteOptions{})
	require.NoError(t, err)
	before := used()

	_, err = ws.Write(e.ctx, p, []byte(letters(3, 4, 40<<20)), vfs.WriteOptions{Mode: vfs.Append})
	assert.Equal(t, wserr.SizeLimitExceeded, wserr.CodeOf(err), "%v", err)
	assert.Equal(t, before, used(), "the refused append stored nothing")

	// A patch that would grow the file by 40 MiB of content that
	// compresses little stops storing it at the room left.
	_, err = ws.Patch(e.ctx, p, body[:16], letters(5, 6, 40<<20), vfs.PatchOptions{})
	assert.Equal(t, wserr.SizeLimitExceeded, wserr.CodeOf(err), "%v", err)
	assert.LessOrEqual(t, used(), int64(limit), "the refused patch left the store within its cap")

	// One that rewrites every chunk but keeps the size stores a whole
	// new version: its change is refused, the file stays as it was. The
	// refused patch freed what it stored, so another file fills the
	// store to within 2 MiB of its cap first.
	_, err = ws.WriteFrom(e.ctx, vfs.MustPath("output/fill.txt"), strings.NewReader(letters(7, 8, int(limit-used()-2<<20))), vfs.WriteOptions{})
	require.NoError(t, err)
	was, err := ws.Stat(e.ctx, p)
	require.NoError(t, err)
	_, err = ws.Patch(e.ctx, p, "q", "z", vfs.PatchOptions{ReplaceAll: true})
	assert.Equal(t, wserr.SizeLimitExceeded, wserr.CodeOf(err), "%v", err)
	after, err := ws.Stat(e.ctx, p)
	require.NoError(t, err)
	assert.Equal(t, was.Hash, after.Hash, "the file as it was")
	assert.Equal(t, int64(9<<20), after.Size)
}

// TestStreamsInParallelKeepToTheCap: content streamed into a capped store by
// several writers at once (workspace writes from readers, actor uploads),
// each of which would fit alone, never takes the store past its cap
// together: the streams share the room left, and each change's
// transaction holds the store to the cap though its content was stored
// before it.
func TestStreamsInParallelKeepToTheCap(t *testing.T) {
	const limit = 8 << 20
	for _, kind := range []string{"write", "upload"} {
		t.Run(kind, func(t *testing.T) {
			e := newRetEnv(t, wsstore.Options{Runs: runs.Options{MaxStoreBytes: limit}})
			const n = 4
			for i := range n {
				e.run("c", fmt.Sprintf("run_%d", i), nil)
			}
			// Readers that hand their content over slowly, so the four
			// streams overlap.
			start := make(chan struct{})
			errs := make(chan error, n)
			for i := range n {
				go func() {
					<-start
					r := &slowReader{r: strings.NewReader(letters(uint64(i), 9, 6<<20))}
					var err error
					if kind == "write" {
						_, err = e.s.Runs.Workspace(fmt.Sprintf("run_%d", i), runs.ModelScope).WriteFrom(e.ctx, vfs.MustPath("output/big.md"), r, vfs.WriteOptions{})
					} else {
						_, err = e.s.Actors.Upload(e.ctx, fmt.Sprintf("actor%d", i), "big.md", r)
					}
					errs <- err
				}()
			}
			close(start)
			ok := 0
			for range n {
				err := <-errs
				if err == nil {
					ok++
					continue
				}
				assert.Equal(t, wserr.SizeLimitExceeded, wserr.CodeOf(err), "%v", err)
			}
			assert.LessOrEqual(t, ok, 1, "two 6 MiB files do not fit in 8 MiB")
			used, err := e.s.DB.UsedBytes(e.ctx)
			require.NoError(t, err)
			assert.LessOrEqual(t, used, int64(limit), "the streams together stayed within the cap")
			storetest.RequireSound(t, e.s)
		})
	}
}

// slowReader hands its content over 64 KiB at a time, yielding between
// reads.
type slowReader struct{ r io.Reader }

func (s *slowReader) Read(p []byte) (int, error) {
	runtime.Gosched()
	return s.r.Read(p[:min(len(p), 64<<10)])
}

// noise returns n bytes that do not compress.
func noise(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, 77))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// gatedReader blocks its first read until gate closes, having closed
// started: a stream that measured the room left and then waits.
type gatedReader struct {
	r             io.Reader
	started, gate chan struct{}
	once          sync.Once
}

func (g *gatedReader) Read(p []byte) (int, error) {
	g.once.Do(func() { close(g.started); <-g.gate })
	return g.r.Read(p)
}

// TestStreamBegunBeforeAnotherStoredKeepsToTheCap: a stream that measured
// the room left, then waited while another stream stored 6 MiB and its
// change committed, does not store its own 6 MiB past the cap: in one
// store the streams share the room from the moment each began, and a
// second store on the same directory (another process) stores what it
// measured but its change, a new version of a file as large as the one
// it replaces, is refused in its transaction.
func TestStreamBegunBeforeAnotherStoredKeepsToTheCap(t *testing.T) {
	for _, other := range []bool{false, true} {
		t.Run(fmt.Sprintf("otherStore=%v", other), func(t *testing.T) {
			limit := 8 << 20
			if other {
				limit = 16 << 20 // room for B's file, then for either new one
			}
			dir := t.TempDir()
			ctx := context.Background()
			a, err := wsstore.Open(ctx, dir, wsstore.Options{ReclaimGrace: -1})
			require.NoError(t, err)
			defer a.Close()
			require.NoError(t, a.Runs.SetPolicy(ctx, runs.StoreScope, runs.Policy{MaxStoreBytes: ptr(int64(limit))}))

			b := a
			if other {
				b, err = wsstore.Open(ctx, dir, wsstore.Options{ReclaimGrace: -1})
				require.NoError(t, err)
				defer b.Close()
			}
			for _, id := range []string{"run_a", "run_b"} {
				_, err := a.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "c"}, RunID: id})
				require.NoError(t, err)
			}
			p := vfs.MustPath("output/big.bin")
			if other {
				// B replaces a file of its own as large: its change does
				// not grow it.
				_, err := b.Runs.Workspace("run_b", runs.ModelScope).WriteFrom(ctx, p, bytes.NewReader(noise(1, 6<<20)), vfs.WriteOptions{})
				require.NoError(t, err)
			}
			g := &gatedReader{r: bytes.NewReader(noise(2, 6<<20)), started: make(chan struct{}), gate: make(chan struct{})}
			done := make(chan error, 1)
			go func() {
				_, err := b.Runs.Workspace("run_b", runs.ModelScope).WriteFrom(ctx, p, g, vfs.WriteOptions{})
				done <- err
			}()
			<-g.started
			_, err = a.Runs.Workspace("run_a", runs.ModelScope).WriteFrom(ctx, p, bytes.NewReader(noise(3, 6<<20)), vfs.WriteOptions{})
			require.NoError(t, err, "the first to store fits")
			close(g.gate)
			err = <-done
			assert.Equal(t, wserr.SizeLimitExceeded, wserr.CodeOf(err), "%v", err)
			used, err := a.DB.UsedBytes(ctx)
			require.NoError(t, err)
			if !other {
				assert.LessOrEqual(t, used, int64(limit), "the stream stopped at the room left")
			}
			live, err := b.Runs.Workspace("run_b", runs.HostScope).Stat(ctx, p)
			if other {
				require.NoError(t, err)
				assert.Equal(t, int64(6<<20), live.Size, "B's file as it was")
				assert.Equal(t, cas.Sum(noise(1, 6<<20)), live.Hash, "B's file as it was")
			} else {
				assert.Equal(t, wserr.FileNotFound, wserr.CodeOf(err), "%v", err)
			}
			// What the refused stream stored is garbage, collected.
			_, err = a.GC(ctx, maint.GCOptions{Grace: -1})
			require.NoError(t, err)
			used, err = a.DB.UsedBytes(ctx)
			require.NoError(t, err)
			assert.LessOrEqual(t, used, int64(limit))
			storetest.RequireSound(t, a)
		})
	}
}

// TestImportRowsKeepToTheCap: an archive whose files fit under the cap
// but whose rows (3,000 steps of one small file) would take the store past
// it is refused: nothing of it is visible, and gc takes what it had
// written back under the cap.
func TestImportRowsKeepToTheCap(t *testing.T) {
	src := newRetEnv(t, wsstore.Options{})
	r := src.run("c", "run_1", nil)
	for i := range 3000 {
		require.NoError(t, src.write(r.ID, "output/main.md", fmt.Sprint("v", i%2)))
	}
	src.finish(r.ID)
	var arc bytes.Buffer
	_, err := src.s.Archive.Export(src.ctx, &arc, archive.Scope{Runs: []string{r.ID}}, archive.Options{})
	require.NoError(t, err)

	dst := newRetEnv(t, wsstore.Options{})
	used := func() int64 {
		n, err := dst.s.DB.UsedBytes(dst.ctx)
		require.NoError(t, err)
		return n
	}
	limit := used() + 256<<10
	require.NoError(t, dst.s.Runs.SetPolicy(dst.ctx, runs.StoreScope, runs.Policy{MaxStoreBytes: &limit}))
	_, err = dst.s.Archive.Import(dst.ctx, bytes.NewReader(arc.Bytes()), archive.Options{})
	assert.Equal(t, wserr.SizeLimitExceeded, wserr.CodeOf(err), "%v", err)
	_, err = dst.s.Runs.Run(dst.ctx, r.ID)
	assert.Equal(t, wserr.RunNotFound, wserr.CodeOf(err), "nothing of the archive is visible: %v", err)
	_, err = dst.s.GC(dst.ctx, maint.GCOptions{Grace: -1})
	require.NoError(t, err)
	assert.LessOrEqual(t, used(), limit)

	// With room for it, the same archive comes in.
	limit *= 16
	require.NoError(t, dst.s.Runs.SetPolicy(dst.ctx, runs.StoreScope, runs.Policy{MaxStoreBytes: &limit}))
	_, err = dst.s.Archive.Import(dst.ctx, bytes.NewReader(arc.Bytes()), archive.Options{})
	require.NoError(t, err)
}

// TestImportOfManySmallFilesStopsAtTheCap: an archive of many small files
// passes the check of its files' bytes, but their rows and trees take far
// more of the store than those bytes: the import stops once the store
// reaches its cap, rather than writing the whole archive first, so what it
// leaves for gc is not the archive but about what fits.
func TestImportOfManySmallFilesStopsAtTheCap(t *testing.T) {
	src := newRetEnv(t, wsstore.Options{})
	inputs := map[string][]byte{}
	for i := range 20000 {
		inputs[fmt.Sprintf("d%03d/f%05d.txt", i/50, i)] = fmt.Appendf(nil, "small file %d\n", i)
	}
	_, err := src.s.Runs.CreateRun(src.ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "c"}, RunID: "run_1", Inputs: inputs})
	require.NoError(t, err)
	var arc bytes.Buffer
	_, err = src.s.Archive.Export(src.ctx, &arc, archive.Scope{All: true}, archive.Options{})
	require.NoError(t, err)

	dst := newRetEnv(t, wsstore.Options{})
	before, err := dst.s.DB.UsedBytes(dst.ctx)
	require.NoError(t, err)
	limit := before + 1<<20 // room for the files' 300 KB, not for their rows
	require.NoError(t, dst.s.Runs.SetPolicy(dst.ctx, runs.StoreScope, runs.Policy{MaxStoreBytes: &limit}))
	_, err = dst.s.Archive.Import(dst.ctx, bytes.NewReader(arc.Bytes()), archive.Options{})
	assert.Equal(t, wserr.SizeLimitExceeded, wserr.CodeOf(err), "%v", err)
	_, err = dst.s.Runs.Run(dst.ctx, "run_1")
	assert.Equal(t, wserr.RunNotFound, wserr.CodeOf(err), "nothing of the archive is visible: %v", err)
	used, err := dst.s.DB.UsedBytes(dst.ctx)
	require.NoError(t, err)
	assert.LessOrEqual(t, used, limit+1<<20, "the import stopped near the cap")
}

// TestWriteRefusedForTheCapCollectsWhatTheGraceKept: the reclaim after a
// deletion leaves content younger than the grace; a write the cap refuses
// later, once that content is older, collects it and goes through,
// without a gc or another deletion.
func TestWriteRefusedForTheCapCollectsWhatTheGraceKept(t *testing.T) {
	const limit = 8 << 20
	e := newRetEnv(t, wsstore.Options{ReclaimGrace: 15 * time.Minute, Runs: runs.Options{MaxStoreBytes: limit}})
	old := e.run("c", "run_old", nil)
	_, err := e.s.Runs.Workspace(old.ID, runs.ModelScope).WriteFrom(e.ctx, vfs.MustPath("output/big.bin"), bytes.NewReader(noise(4, 6<<20)), vfs.WriteOptions{})
	require.NoError(t, err)
	e.clock.Advance(time.Minute)
	_, err = e.s.Runs.CancelAndDeleteRun(e.ctx, old.ID)
	require.NoError(t, err)

	r := e.run("c", "run_new", nil)
	write := func() error {
		_, err := e.s.Runs.Workspace(r.ID, runs.ModelScope).Write(e.ctx, vfs.MustPath("output/next.bin"), noise(5, 4<<20), vfs.WriteOptions{})
		return err
	}
	assert.Equal(t, wserr.SizeLimitExceeded, wserr.CodeOf(write()), "the deleted content is younger than the grace")
	e.clock.Advance(20 * time.Minute)
	require.NoError(t, write(), "the refused write collected the deleted content, then fitted")
	used, err := e.s.DB.UsedBytes(e.ctx)
	require.NoError(t, err)
	assert.LessOrEqual(t, used, int64(limit))
}

// TestChangesRefusedForTheCapCollectWhatTheGraceKept: every change the
// store's cap refuses in its transaction, not only a workspace write,
// collects the content a deletion left once the grace has passed, and
// goes through: a new run (its input/ files), a record, a batch of
// writes, an actor upload.
func TestChangesRefusedForTheCapCollectWhatTheGraceKept(t *testing.T) {
	shared := noise(6, 64<<10) // stored already: an upload of it adds no content
	for _, tc := range []struct {
		name   string
		change func(e *retEnv) error
	}{
		{"CreateRun", func(e *retEnv) error {
			_, err := e.s.Runs.CreateRun(e.ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "c"}, RunID: "run_next",
				Inputs: map[string][]byte{"prompt.md": noise(7, 64<<10)}})
			return err
		}},
		{"RecordToolCall", func(e *retEnv) error {
			_, err := e.s.Runs.RecordToolCall(e.ctx, "run_keep", runs.ToolCallRecord{ID: "call_1", Name: "workspace.write",
				Args: json.RawMessage(fmt.Sprintf(`{"pad":%q}`, strings.Repeat("x", 64<<10)))})
			return err
		}},
		{"Apply", func(e *retEnv) error {
			_, err := e.s.Runs.Workspace("run_keep", runs.ModelScope).Apply(e.ctx, []runs.Edit{{Path: vfs.MustPath("output/a.bin"), Content: noise(8, 64<<10)}})
			return err
		}},
		{"ActorUpload", func(e *retEnv) error {
			_, err := e.s.Actors.Upload(e.ctx, "bob", "copy.bin", bytes.NewReader(shared))
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newRetEnv(t, wsstore.Options{ReclaimGrace: 15 * time.Minute})
			e.run("c", "run_keep", nil)
			_, err := e.s.Actors.Upload(e.ctx, "alice", "shared.bin", bytes.NewReader(shared))
			require.NoError(t, err)
			old := e.run("c", "run_old", nil)
			_, err = e.s.Runs.Workspace(old.ID, runs.ModelScope).WriteFrom(e.ctx, vfs.MustPath("output/big.bin"), bytes.NewReader(noise(4, 2<<20)), vfs.WriteOptions{})
			require.NoError(t, err)
			e.clock.Advance(time.Minute)
			_, err = e.s.Runs.CancelAndDeleteRun(e.ctx, old.ID)
			require.NoError(t, err)
			// The deleted content, younger than the grace, is still
			// stored: the store is at its cap.
			used, err := e.s.DB.UsedBytes(e.ctx)
			require.NoError(t, err)
			limit := used - 1
			require.NoError(t, e.s.Runs.SetPolicy(e.ctx, runs.StoreScope, runs.Policy{MaxStoreBytes: &limit}))

			assert.Equal(t, wserr.SizeLimitExceeded, wserr.CodeOf(tc.change(e)), "the deleted content is younger than the grace")
			e.clock.Advance(20 * time.Minute)
			require.NoError(t, tc.change(e), "the refused change collected the deleted content, then fitted")
			used, err = e.s.DB.UsedBytes(e.ctx)
			require.NoError(t, err)
			assert.LessOrEqual(t, used, limit)
		})
	}
}

// TestRunCapRefusalCollectsNothing: a change a run's own cap
// (maxRunBytes) refuses is not tried again after collecting the store's
// gc candidates, which cannot make room under that cap: the queue stays
// as it was and no statement reads it; the store's cap refusing the same
// change collects the queue.
func TestRunCapRefusalCollectsNothing(t *testing.T) {
	const queued = 40
	e, tr := openTraced(t, wsstore.Options{})
	e.run("c", "run_1", &runs.Profile{MaxRunBytes: 1 << 10})
	// Trees no row holds: a collection takes each and drops it.
	cs := make([]vfs.Candidate, queued)
	for i := range cs {
		cs[i] = vfs.Candidate{Kind: vfs.CandidateTree, Hash: cas.Sum(fmt.Appendf(nil, "gone %d", i))}
	}
	require.NoError(t, e.s.DB.Update(e.ctx, func(tx *index.Tx) error {
		return e.s.Trees.AddCandidates(e.ctx, tx, cs, e.clock.Now().UnixNano())
	}))
	queue := func(stmts []string) (n int) {
		for _, q := range stmts {
			if strings.Contains(q, "gc_candidates") {
				n++
			}
		}
		return n
	}
	for name, change := range map[string]func() error{
		"Write": func() error { return e.write("run_1", "output/big.md", strings.Repeat("x", 4<<10)) },
		"Apply": func() error {
			_, err := e.s.Runs.Workspace("run_1", runs.ModelScope).Apply(e.ctx, []runs.Edit{{Path: vfs.MustPath("output/big.md"), Content: []byte(strings.Repeat("y", 4<<10))}})
			return err
		},
	} {
		tr.start()
		err := change()
		stmts := tr.end()
		require.Equal(t, wserr.SizeLimitExceeded, wserr.CodeOf(err), "%s: %v", name, err)
		assert.False(t, wserr.IsStoreFull(err), "%s: the run's cap refused it, not the store's", name)
		assert.Zero(t, queue(stmts), "%s: the refusal read no gc candidate", name)
		assert.Equal(t, queued, e.rows("gc_candidates"), "%s: the queue is as it was", name)
	}

	// The store's cap refusing a change collects the queue.
	used, err := e.s.DB.UsedBytes(e.ctx)
	require.NoError(t, err)
	limit := used - 1
	require.NoError(t, e.s.Runs.SetPolicy(e.ctx, runs.StoreScope, runs.Policy{MaxStoreBytes: &limit}))
	err = e.write("run_1", "output/small.md", "small")
	require.True(t, wserr.IsStoreFull(err), "%v", err)
	assert.Zero(t, e.rows("gc_candidates"), "the store's cap refusal collected the queue")
}

// TestStreamRefusedForTheStoreCapIsStoreFull: content the store's cap
// refuses while it streams in (a streamed write, an actor upload of
// unknown or known size, an import) is the store cap's refusal, as the same change
// made in one transaction is: wserr.IsStoreFull tells it from a run's
// cap, so a host knows that freeing space in the store makes room.
func TestStreamRefusedForTheStoreCapIsStoreFull(t *testing.T) {
	e, _ := openTraced(t, wsstore.Options{})
	e.run("c", "run_1", nil)
	used, err := e.s.DB.UsedBytes(e.ctx)
	require.NoError(t, err)
	limit := used + 1<<10
	require.NoError(t, e.s.Runs.SetPolicy(e.ctx, runs.StoreScope, runs.Policy{MaxStoreBytes: &limit}))
	content := make([]byte, 64<<10)
	for i := range content {
		content[i] = byte(rand.N(256))
	}
	big := func() io.Reader { return io.MultiReader(bytes.NewReader(content)) }
	for name, change := range map[string]func() error{
		"WriteFrom": func() error {
			_, err := e.s.Runs.Workspace("run_1", runs.ModelScope).WriteFrom(e.ctx, vfs.MustPath("output/big.bin"), big(), vfs.WriteOptions{})
			return err
		},
		"Upload": func() error {
			_, err := e.s.Actors.Upload(e.ctx, "actor", "big.bin", big())
			return err
		},
		"UploadSized": func() error {
			_, err := e.s.Actors.UploadWith(e.ctx, "actor", "big.bin", big(), actors.ChangeOptions{Size: 64 << 10})
			return err
		},
		"Import": func() error {
			src := newRetEnv(t, wsstore.Options{})
			src.run("other", "run_other", nil)
			_, err := src.s.Runs.Workspace("run_other", runs.ModelScope).Write(e.ctx, vfs.MustPath("output/big.bin"), content, vfs.WriteOptions{})
			require.NoError(t, err)
			file := t.TempDir() + "/other.wsa"
			_, err = src.s.ExportFile(e.ctx, file, archive.Scope{All: true}, archive.Options{})
			require.NoError(t, err)
			_, err = e.s.ImportFile(e.ctx, file, archive.Options{})
			return err
		},
	} {
		err := change()
		require.Equal(t, wserr.SizeLimitExceeded, wserr.CodeOf(err), "%s: %v", name, err)
		assert.True(t, wserr.IsStoreFull(err), "%s: the store's cap refused it: %v", name, err)
	}
}

// TestCheckpointByteCapCountsTheChunksAnEditReplaced: under the mobile
// profile's 8 MiB of checkpoints per run, appends and a patch to a 12 MiB
// file (stored in chunks, each edit's next version sharing every chunk it
// did not reach) keep every checkpoint: each step counts the chunks it
// replaced, not the whole file. A write of other content then replaces
// every chunk, and the cap prunes the checkpoints before it.
func TestCheckpointByteCapCountsTheChunksAnEditReplaced(t *testing.T) {
	e := newRetEnv(t, wsstore.Options{Profile: wsstore.ProfileMobile})
	r := e.run("c", "run_1", nil)
	ws := e.s.Runs.Workspace(r.ID, runs.ModelScope)
	p := vfs.MustPath("output/big.log")
	body := letters(1, 1, 12<<20)
	_, err := ws.WriteFrom(e.ctx, p, strings.NewReader(body), vfs.WriteOptions{})
	require.NoError(t, err)
	for i := range 3 {
		_, err := ws.Write(e.ctx, p, []byte(fmt.Sprintf("line %d\n", i)), vfs.WriteOptions{Mode: vfs.Append})
		require.NoError(t, err)
	}
	_, err = ws.Patch(e.ctx, p, body[:40], strings.ToUpper(body[:40]), vfs.PatchOptions{})
	require.NoError(t, err)

	cps, err := e.s.Checkpoints.List(e.ctx, r.ID)
	require.NoError(t, err)
	assert.Len(t, cps, 6, "run.create's checkpoint, the write's, three appends' and the patch's")
	for _, d := range e.deletions() {
		assert.NotEqual(t, runs.DeletedCheckpoints, d.Kind, "nothing pruned: %s %d", d.Reason, d.BytesFreed)
	}
	ret, err := e.s.Checkpoints.Retained(e.ctx, nil, r.ID)
	require.NoError(t, err)
	assert.LessOrEqual(t, ret, int64(4*(2<<20)), "four edits, each replacing a chunk or two of at most 2 MiB")

	_, err = ws.WriteFrom(e.ctx, p, strings.NewReader(letters(2, 1, 12<<20)), vfs.WriteOptions{})
	require.NoError(t, err)
	cps, err = e.s.Checkpoints.List(e.ctx, r.ID)
	require.NoError(t, err)
	assert.Len(t, cps, 1, "other content replaces every chunk: only the newest checkpoint stays")
	var freed int64
	for _, d := range e.deletions() {
		if d.Kind == runs.DeletedCheckpoints {
			freed += d.BytesFreed
		}
	}
	assert.GreaterOrEqual(t, freed, int64(12<<20), "the versions pruned held the first content's chunks")
	storetest.RequireSound(t, e.s)
}

// TestByteSettingsOfZeroAreNoCap: maxCheckpointBytesPerRun and
// maxStoreBytes of 0 are no cap, unlike the run counts, where 0 keeps
// none: under the mobile profile, 0 turns its 8 MiB of checkpoints per
// run off, so versions keeping 9 MiB stay, and no write is refused.
func TestByteSettingsOfZeroAreNoCap(t *testing.T) {
	e := newRetEnv(t, wsstore.Options{Profile: wsstore.ProfileMobile})
	require.NoError(t, e.s.Runs.SetPolicy(e.ctx, runs.StoreScope, runs.Policy{MaxCheckpointBytesPerRun: ptr(int64(0)), MaxStoreBytes: ptr(int64(0))}))
	r := e.run("c", "run_1", nil)
	for i := range 4 {
		require.NoError(t, e.write(r.ID, "output/a.bin", letters(uint64(i), 3, 3<<20)))
	}
	ret, err := e.s.Checkpoints.Retained(e.ctx, nil, r.ID)
	require.NoError(t, err)
	assert.Greater(t, ret, int64(8<<20), "the versions replaced keep more than the mobile profile's cap")
	cps, err := e.s.Checkpoints.List(e.ctx, r.ID)
	require.NoError(t, err)
	assert.Len(t, cps, 5, "every checkpoint stays")
	assert.Empty(t, e.deletions())
	pol, err := e.s.Runs.EffectivePolicy(e.ctx, "")
	require.NoError(t, err)
	assert.Equal(t, int64(0), *pol.MaxCheckpointBytesPerRun)
	assert.Equal(t, 20, *pol.KeepCompletedRuns, "the other fields keep the mobile defaults")
}
