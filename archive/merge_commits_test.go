package archive_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/archive"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

// TestMergeBringsCommitOutcomes: a run synced while its commit was
// pending, and synced again once the commit was resolved on the device
// that made it, ends with the resolved outcome on the other device too,
// not pending beside a journal that says otherwise; a merge that brings
// the commit still pending leaves an outcome already recorded alone.
func TestMergeBringsCommitOutcomes(t *testing.T) {
	ctx := context.Background()
	src, dst := open(t), open(t)
	_, err := src.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "c1"}, RunID: "r1"})
	require.NoError(t, err)
	_, err = src.Runs.Workspace("r1", runs.ModelScope).Write(ctx, vfs.MustPath("output/main.md"), []byte("the message\n"), vfs.WriteOptions{})
	require.NoError(t, err)

	// A commit whose delivering process is gone: another Service on the
	// store, its sink held until the test ends.
	gone := runs.New(runs.Deps{DB: src.DB, Blobs: src.Blobs, Trees: src.Trees, Journal: src.Journal, Checkpoints: src.Checkpoints}, runs.Options{})
	held, release, done := make(chan string, 1), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		_, _ = gone.Commit(context.Background(), "r1", runs.SinkFunc(func(_ context.Context, req runs.CommitRequest) (json.RawMessage, error) {
			held <- req.CommitID
			<-release
			return nil, nil
		}), runs.CommitOptions{})
	}()
	defer func() { close(release); <-done }()
	id := <-held

	arc, _ := export(t, src, archive.Scope{Runs: []string{"r1"}})
	_, err = dst.Archive.Import(ctx, bytes.NewReader(arc), archive.Options{})
	require.NoError(t, err)
	status := func() runs.CommitRecord {
		t.Helper()
		cs, err := dst.Runs.Commits(ctx, "r1")
		require.NoError(t, err)
		require.Len(t, cs, 1)
		return cs[0]
	}
	assert.Equal(t, runs.CommitPending, status().Status)

	_, err = src.Runs.ResolveCommit(ctx, "r1", id, runs.CommitOutcome{Status: runs.CommitCompleted, Receipt: json.RawMessage(`{"messageId":5}`)})
	require.NoError(t, err)
	later, _ := export(t, src, archive.Scope{Runs: []string{"r1"}})
	sum, err := dst.Archive.Import(ctx, bytes.NewReader(later), archive.Options{Merge: true})
	require.NoError(t, err)
	assert.Equal(t, []string{"run r1"}, sum.Updated)
	got := status()
	assert.Equal(t, runs.CommitCompleted, got.Status)
	assert.JSONEq(t, `{"messageId":5}`, string(got.Receipt))
	assert.Equal(t, view(t, src), view(t, dst))

	// The earlier archive again, its commit pending: the store is ahead.
	_, err = dst.Archive.Import(ctx, bytes.NewReader(arc), archive.Options{Merge: true})
	require.NoError(t, err)
	assert.Equal(t, runs.CommitCompleted, status().Status)
}
