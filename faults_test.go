package wsstore_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/cas/storagetest"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// TestDiskFullRefusesTheWriteOnly: a blob write that meets a full disk
// (the storage failing with ENOSPC, as the fault wrapper injects it) is
// refused with store.disk_full, changes nothing, leaves fsck clean, and
// the same write succeeds once space frees.
func TestDiskFullRefusesTheWriteOnly(t *testing.T) {
	ctx := context.Background()
	st, faults := storagetest.NewFaulty(cas.NewSQLiteStorage())
	s, err := wsstore.Open(ctx, t.TempDir(), wsstore.Options{CAS: cas.Options{Storage: st}})
	require.NoError(t, err)
	defer s.Close()
	_, err = s.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "c"}, RunID: "r"})
	require.NoError(t, err)
	ws := s.Runs.Workspace("r", runs.HostScope)
	_, err = ws.Write(ctx, vfs.MustPath("output/a.md"), []byte("before\n"), vfs.WriteOptions{})
	require.NoError(t, err)
	cps, err := s.Checkpoints.List(ctx, "r")
	require.NoError(t, err)

	for _, content := range [][]byte{[]byte("small\n"), random(7, 300<<10)} {
		faults.Add(storagetest.Fault{Method: storagetest.Put, Err: fmt.Errorf("write: %w", syscall.ENOSPC)})
		_, err = ws.Write(ctx, vfs.MustPath("output/b.bin"), content, vfs.WriteOptions{})
		require.Error(t, err)
		assert.Equal(t, wserr.DiskFull, wserr.CodeOf(err), "%v", err)
		faults.Clear()

		after, err := s.Checkpoints.List(ctx, "r")
		require.NoError(t, err)
		assert.Equal(t, len(cps), len(after), "no checkpoint for the refused write")
		_, err = ws.Stat(ctx, vfs.MustPath("output/b.bin"))
		assert.Equal(t, wserr.FileNotFound, wserr.CodeOf(err))
		rep, err := s.Fsck(ctx, nil)
		require.NoError(t, err)
		assert.Empty(t, rep.Problems)
	}
	_, err = ws.Write(ctx, vfs.MustPath("output/b.bin"), []byte("after\n"), vfs.WriteOptions{})
	require.NoError(t, err, "writes work again once space frees")
}
