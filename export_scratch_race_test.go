package wsstore_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/archive"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// blockOnce holds its first Write until release is closed.
type blockOnce struct {
	bytes.Buffer
	started, release chan struct{}
	once             bool
}

func (b *blockOnce) Write(p []byte) (int, error) {
	if !b.once {
		b.once = true
		close(b.started)
		<-b.release
	}
	return b.Buffer.Write(p)
}

// TestExportOfAStrippedRootCollectedMeanwhile: the run's live root has
// scratch/ and is exported as the root without it, which write reads back
// from the live root. Rolled back to a checkpoint that strips to the same
// tree while the export writes, the live root is collected by a gc: the
// export is store.conflict (export again), never store.corrupt of a sound
// store. (A tree cache of one entry stands for a large export's.)
func TestExportOfAStrippedRootCollectedMeanwhile(t *testing.T) {
	ctx := context.Background()
	st := storetest.OpenStoreWith(t, wsstore.Options{TreeCacheEntries: 1})
	off := false
	_, err := st.Runs.CreateRun(ctx, runs.CreateRequest{RunID: "r", Chat: runs.ChatKey{Kind: "chat", StableChatID: "c"},
		Profile: &runs.Profile{AutoCheckpoint: &off}})
	require.NoError(t, err)
	ws := st.Runs.Workspace("r", runs.ModelScope)
	write := func(p, content string) {
		_, err := ws.Write(ctx, vfs.MustPath(p), []byte(content), vfs.WriteOptions{})
		require.NoError(t, err)
	}
	write("output/a.md", "a")
	write("scratch/t.txt", "one")
	cp, err := st.Runs.Checkpoint(ctx, "r", "x")
	require.NoError(t, err)
	write("scratch/t.txt", "two")

	w := &blockOnce{started: make(chan struct{}), release: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		_, err := st.Archive.Export(ctx, w, archive.Scope{All: true}, archive.Options{})
		done <- err
	}()
	<-w.started
	_, err = st.Runs.Rollback(ctx, "r", cp.Seq, runs.RollbackOptions{})
	require.NoError(t, err)
	_, err = st.GC(ctx, wsstore.GCOptions{Grace: -1})
	require.NoError(t, err)
	close(w.release)
	err = <-done
	if err != nil {
		assert.Equal(t, wserr.Conflict, wserr.CodeOf(err), "%v", err)
	}
}
