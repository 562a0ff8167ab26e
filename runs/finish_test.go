package runs_test

import (
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

func (e *lifecycleEnv) chatPersist(chatID string) map[string]string {
	e.t.Helper()
	c, err := e.svc.Chat(e.ctx, chatID)
	require.NoError(e.t, err)
	out := map[string]string{}
	require.NoError(e.t, e.st.Trees.Walk(e.ctx, nil, c.PersistRoot, func(p vfs.Path, en vfs.Entry) error {
		if en.Kind == vfs.KindFile {
			b, err := e.st.Blobs.ReadAll(e.ctx, en.Hash)
			require.NoError(e.t, err)
			out[p.String()] = string(b)
		}
		return nil
	}))
	return out
}

func TestFinishPromotesPersist(t *testing.T) {
	e := newLifecycleEnv(t)
	a := e.create("c1", runs.CreateRequest{})
	e.write(a.ID, "persist/memory.md", "likes tea")
	e.write(a.ID, "output/main.md", "hi")
	res, err := e.svc.Finish(e.ctx, a.ID)
	require.NoError(t, err)
	assert.Equal(t, runs.Completed, res.Run.Status)
	assert.False(t, res.Merged)
	assert.Equal(t, int64(1), res.PersistVersion)
	require.Len(t, res.PersistChanges, 1)
	assert.Equal(t, "memory.md", res.PersistChanges[0].Path.String())
	assert.Equal(t, map[string]string{"memory.md": "likes tea"}, e.chatPersist(a.ChatID))

	b := e.create("c1", runs.CreateRequest{})
	assert.Equal(t, "likes tea", e.read(e.svc.Workspace(b.ID, runs.ModelScope), "persist/memory.md"), "the next run sees the promoted layer")
	snap := e.read(e.svc.Workspace(b.ID, runs.HostScope), "input/persist_snapshot.json")
	assert.Contains(t, snap, `"persistVersion": 1`)

	t.Run("NoChangesKeepVersion", func(t *testing.T) {
		res, err := e.svc.Finish(e.ctx, b.ID)
		require.NoError(t, err)
		assert.Empty(t, res.PersistChanges)
		assert.Equal(t, int64(1), res.PersistVersion)
	})
	t.Run("ErrFinishedTwice", func(t *testing.T) {
		_, err := e.svc.Finish(e.ctx, a.ID)
		assert.True(t, wserr.Is(err, wserr.InvalidState))
	})
}

// promote writes files (path: content) into a run of chat and finishes
// it, so that later runs of the chat start from them.
func (e *lifecycleEnv) promote(chat string, files map[string]string) {
	e.t.Helper()
	r := e.create(chat, runs.CreateRequest{})
	for _, p := range slices.Sorted(maps.Keys(files)) {
		e.write(r.ID, p, files[p])
	}
	_, err := e.svc.Finish(e.ctx, r.ID)
	require.NoError(e.t, err)
}

func TestConcurrentRunsMergePersist(t *testing.T) {
	e := newLifecycleEnv(t)
	e.promote("c1", map[string]string{"persist/shared.md": "v0", "persist/old.md": "old"})

	a := e.create("c1", runs.CreateRequest{})
	b := e.create("c1", runs.CreateRequest{})
	e.write(a.ID, "persist/a.md", "from a")
	e.write(a.ID, "persist/shared.md", "same edit")
	e.write(b.ID, "persist/b.md", "from b")
	e.write(b.ID, "persist/shared.md", "same edit")
	require.NoError(t, e.svc.Workspace(b.ID, runs.ModelScope).Remove(e.ctx, vfs.MustPath("persist/old.md")))

	_, err := e.svc.Finish(e.ctx, a.ID)
	require.NoError(t, err)
	res, err := e.svc.Finish(e.ctx, b.ID)
	require.NoError(t, err)
	assert.True(t, res.Merged)
	assert.Equal(t, int64(3), res.PersistVersion)
	assert.Equal(t, map[string]string{"a.md": "from a", "b.md": "from b", "shared.md": "same edit"}, e.chatPersist(a.ChatID))
}

func TestConcurrentRunsConflictOnSamePath(t *testing.T) {
	e := newLifecycleEnv(t)
	a := e.create("c1", runs.CreateRequest{})
	b := e.create("c1", runs.CreateRequest{})
	e.write(a.ID, "persist/memory.md", "a says tea")
	e.write(b.ID, "persist/memory.md", "b says coffee")
	e.write(b.ID, "persist/other.md", "fine")
	_, err := e.svc.Finish(e.ctx, a.ID)
	require.NoError(t, err)
	chat, err := e.svc.Chat(e.ctx, a.ChatID)
	require.NoError(t, err)

	before := rowCounts(e)
	_, err = e.svc.Finish(e.ctx, b.ID)
	require.Error(t, err)
	assert.True(t, wserr.Is(err, wserr.PersistentWorkspaceConflict), "%v", err)
	assert.Contains(t, err.Error(), "memory.md")
	assert.NotContains(t, err.Error(), "other.md")
	assert.Equal(t, before, rowCounts(e), "a conflict changes nothing")
	after, err := e.svc.Chat(e.ctx, a.ChatID)
	require.NoError(t, err)
	assert.Equal(t, chat.PersistRoot, after.PersistRoot)
	got, err := e.svc.Run(e.ctx, b.ID)
	require.NoError(t, err)
	assert.Equal(t, runs.Running, got.Status, "the run can be resolved and finished again")

	e.write(b.ID, "persist/memory.md", "a says tea")
	_, err = e.svc.Finish(e.ctx, b.ID)
	require.NoError(t, err, "after resolving to the same content the merge succeeds")
	assert.Equal(t, map[string]string{"memory.md": "a says tea", "other.md": "fine"}, e.chatPersist(a.ChatID))
}

func TestUnfinishedRunsNeverTouchPersist(t *testing.T) {
	e := newLifecycleEnv(t)
	for _, end := range []runs.Status{runs.Failed, runs.Cancelled, ""} {
		r := e.create("c1", runs.CreateRequest{})
		e.write(r.ID, "persist/memory.md", "leak "+string(end))
		if end != "" {
			require.NoError(t, e.svc.SetStatus(e.ctx, r.ID, end, "test"))
			_, err := e.svc.Finish(e.ctx, r.ID)
			assert.True(t, wserr.Is(err, wserr.InvalidState))
		}
	}
	c, _, err := e.svc.ChatsPage(e.ctx, runs.ChatQuery{})
	require.NoError(t, err)
	require.Len(t, c, 1)
	assert.Equal(t, int64(0), c[0].PersistVersion)
	assert.Empty(t, e.chatPersist(c[0].ID))
}

func TestParallelFinishesMerge(t *testing.T) {
	e := newLifecycleEnv(t)
	const n = 6
	ids := make([]string, n)
	for i := range ids {
		r := e.create("c1", runs.CreateRequest{})
		ids[i] = r.ID
		e.write(r.ID, "persist/run"+string(rune('0'+i))+".md", "note")
	}
	errs := make(chan error, n)
	for _, id := range ids {
		go func() {
			_, err := e.svc.Finish(e.ctx, id)
			errs <- err
		}()
	}
	for range ids {
		require.NoError(t, <-errs)
	}
	chat, _, err := e.svc.ChatsPage(e.ctx, runs.ChatQuery{})
	require.NoError(t, err)
	assert.Equal(t, int64(n), chat[0].PersistVersion)
	assert.Len(t, e.chatPersist(chat[0].ID), n, "every run's change survives the parallel promotions")
}

func TestCancelAndDeleteRun(t *testing.T) {
	e := newLifecycleEnv(t)
	r := e.create("c1", runs.CreateRequest{})
	e.write(r.ID, "persist/memory.md", "never promoted")
	cancelled, err := e.svc.CancelAndDeleteRun(e.ctx, r.ID)
	require.NoError(t, err)
	assert.True(t, cancelled)
	_, err = e.svc.Run(e.ctx, r.ID)
	assert.True(t, wserr.Is(err, wserr.RunNotFound))
	assert.Empty(t, e.chatPersist(r.ChatID), "a discarded run never touches the chat's persist layer")

	_, err = e.svc.CancelAndDeleteRun(e.ctx, r.ID)
	assert.True(t, wserr.Is(err, wserr.RunNotFound))
}

// TestFinishMergesADirectoryTurnedIntoAFile: a run that replaces
// persist/notes/ (a directory) by a file persist/notes promotes over a run
// that changed only another file meanwhile: no path was changed by both.
func TestFinishMergesADirectoryTurnedIntoAFile(t *testing.T) {
	e := newLifecycleEnv(t)
	e.promote("c1", map[string]string{"persist/notes/a.md": "a", "persist/other.md": "o"})

	a := e.create("c1", runs.CreateRequest{})
	b := e.create("c1", runs.CreateRequest{})
	require.NoError(t, e.svc.Workspace(a.ID, runs.ModelScope).Remove(e.ctx, vfs.MustPath("persist/notes/a.md")))
	e.write(a.ID, "persist/notes", "now a file")
	e.write(b.ID, "persist/other.md", "o2")
	_, err := e.svc.Finish(e.ctx, b.ID)
	require.NoError(t, err)
	_, err = e.svc.Finish(e.ctx, a.ID)
	require.NoError(t, err, "no path was changed by both runs")
	assert.Equal(t, map[string]string{"notes": "now a file", "other.md": "o2"}, e.chatPersist(a.ChatID))
}
