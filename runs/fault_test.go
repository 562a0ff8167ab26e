package runs_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

var errInjected = errors.New("injected failure")

// failAt makes the service fail once at point.
func failAt(svc *runs.Service, point string) {
	runs.SetFault(svc, func(p string) error {
		if p == point {
			runs.SetFault(svc, nil)
			return errInjected
		}
		return nil
	})
}

// TestFailureAfterEventsLeavesNothing: a failure between the journal
// events and the checkpoint of a write rolls back the events, the blob,
// the trees, the delta re-encoding of the previous version, and the root.
func TestFailureAfterEventsLeavesNothing(t *testing.T) {
	e := newLifecycleEnv(t)
	r := e.create("c1", runs.CreateRequest{})
	v1 := "# draft\n\n" + "the keeper lit the lamp at dusk and watched the harbour for ships; "
	for range 6 {
		v1 += v1
	}
	v2 := v1 + "a second paragraph"
	e.write(r.ID, "output/main.md", v1)
	e.write(r.ID, "output/main.md", v2)
	info, err := e.svc.Blobs().Stat(e.ctx, cas.Sum([]byte(v2)))
	require.NoError(t, err)
	require.NotEqual(t, cas.CodecDelta, info.Codec, "the newest version is whole")

	before := rowCounts(e)
	run, err := e.svc.Run(e.ctx, r.ID)
	require.NoError(t, err)
	failAt(e.svc, "after_event")
	_, err = e.svc.Workspace(r.ID, runs.ModelScope).Write(e.ctx, vfs.MustPath("output/main.md"), []byte(v2+" and a third"), vfs.WriteOptions{})
	require.ErrorIs(t, err, errInjected)

	assert.Equal(t, before, rowCounts(e))
	after, err := e.svc.Run(e.ctx, r.ID)
	require.NoError(t, err)
	assert.Equal(t, run.Root, after.Root)
	assert.Equal(t, run.HeadCheckpoint, after.HeadCheckpoint)
	info, err = e.svc.Blobs().Stat(e.ctx, cas.Sum([]byte(v2)))
	require.NoError(t, err)
	assert.NotEqual(t, cas.CodecDelta, info.Codec, "the rolled-back write did not leave v2 as a delta against content that is gone")
	assert.Equal(t, v2, e.read(e.svc.Workspace(r.ID, runs.ModelScope), "output/main.md"))

	e.write(r.ID, "output/main.md", v2+" and a third")
	info, err = e.svc.Blobs().Stat(e.ctx, cas.Sum([]byte(v2)))
	require.NoError(t, err)
	assert.Equal(t, cas.CodecDelta, info.Codec, "the same write, committed, does turn v2 into a delta")
}

// TestFailureAfterPromotionLeavesNothing: a failure after Finish moved the
// chat's persist layer, before the run completed, undoes the promotion.
func TestFailureAfterPromotionLeavesNothing(t *testing.T) {
	e := newLifecycleEnv(t)
	r := e.create("c1", runs.CreateRequest{})
	e.write(r.ID, "persist/memory.md", "likes tea")
	before := rowCounts(e)
	failAt(e.svc, "after_promote")
	_, err := e.svc.Finish(e.ctx, r.ID)
	require.ErrorIs(t, err, errInjected)
	assert.Equal(t, before, rowCounts(e))
	chat, err := e.svc.Chat(e.ctx, r.ChatID)
	require.NoError(t, err)
	assert.Zero(t, chat.PersistVersion)
	assert.Empty(t, e.chatPersist(r.ChatID))
	got, err := e.svc.Run(e.ctx, r.ID)
	require.NoError(t, err)
	assert.Equal(t, runs.Running, got.Status)

	res, err := e.svc.Finish(e.ctx, r.ID)
	require.NoError(t, err, "the run finishes once the failure is gone")
	assert.Equal(t, int64(1), res.PersistVersion)
}
