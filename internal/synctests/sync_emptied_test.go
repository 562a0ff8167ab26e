package synctests_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

// TestSyncBucketEmptiedReadsWhatAnotherPushedAgain: Y took in X's runs
// and holds none of their files. The bucket is emptied; X, which holds
// them, pushes them again, in other packs. Y's sync finds X's packs gone
// and takes in X's new index objects: Y reads every file of X's again,
// where before it kept its records of the packs gone and failed every
// read of them with store.corrupt for good, fsck too.
func TestSyncBucketEmptiedReadsWhatAnotherPushedAgain(t *testing.T) {
	ctx := context.Background()
	srv, open := fakeTier(t)
	x, y := open(), open()
	smallRuns(t, x, "chat-x", "old", 2)
	syncOK(t, x)
	syncOK(t, y)
	_, err := y.Remote.Evict(ctx, y.DB)
	require.NoError(t, err)
	for _, k := range srv.Keys("wsstore", "team/") {
		srv.SetObject("wsstore", k, nil)
	}
	smallRuns(t, x, "chat-x", "new", 1) // X's packs are not the ones gone
	rx := syncOK(t, x)
	require.Positive(t, rx.Repaired.Repush)
	ry := syncOK(t, y)
	assert.Positive(t, ry.Repaired.Lost, "Y holds X's files nowhere")

	got, err := y.Runs.Workspace("old-00", runs.ModelScope).Read(ctx, vfs.MustPath("output/0.md"), vfs.ReadOptions{})
	require.NoError(t, err, "X pushed the file again")
	assert.Equal(t, strings.Repeat("old-00 line\n", 20), string(got.Content))
	requireSame(t, contents(t, x), contents(t, y))
	fr, err := y.Fsck(ctx, nil)
	require.NoError(t, err)
	assert.Empty(t, fr.Problems)
}
