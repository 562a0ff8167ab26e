package runs_test

import (
	"context"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// noise returns n incompressible bytes from seed.
func noise(seed byte, n int64) io.Reader {
	return io.LimitReader(rand.NewChaCha8([32]byte{seed}), n)
}

// cancelPart yields r's bytes and cancels its context once n have gone.
type cancelPart struct {
	r      io.Reader
	n      int64
	cancel context.CancelFunc
}

func (c *cancelPart) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if c.n -= int64(n); c.n <= 0 {
		c.cancel()
	}
	return n, err
}

// TestCancelledStreamedWritesLeaveRoomUnderTheCap: streamed writes
// cancelled halfway leave none of what they stored, so under a store cap
// the next write has the room they would have taken, at once and with no
// gc.
func TestCancelledStreamedWritesLeaveRoomUnderTheCap(t *testing.T) {
	st := storetest.OpenStoreWith(t, wsstore.Options{Runs: runs.Options{MaxStoreBytes: 64 << 20}})
	ctx := context.Background()
	_, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "cap"}, RunID: "cap"})
	require.NoError(t, err)
	ws := st.Runs.Workspace("cap", runs.HostScope)
	used := func() int64 {
		n, err := st.DB.UsedBytes(ctx)
		require.NoError(t, err)
		return n
	}
	before := used()
	for i := range 2 {
		cctx, cancel := context.WithCancel(ctx)
		_, err := ws.WriteFrom(cctx, vfs.MustPath("output/upload.bin"), &cancelPart{r: noise(byte(i), 40<<20), n: 20 << 20, cancel: cancel}, vfs.WriteOptions{})
		cancel()
		require.True(t, wserr.Is(err, wserr.Canceled), "%v", err)
	}
	require.Less(t, used()-before, int64(1<<20), "what the cancelled writes stored is freed")
	_, err = ws.WriteFrom(ctx, vfs.MustPath("output/data.bin"), noise(9, 30<<20), vfs.WriteOptions{})
	require.NoError(t, err)
}

// TestStreamedWriteOfStoredContentUnderATightCap: under a store cap with
// less room than a file's size, a streamed write of content the store
// holds already (the same file again, or at another path) adds no content
// bytes and is made; new content of that size is refused, storing nothing.
func TestStreamedWriteOfStoredContentUnderATightCap(t *testing.T) {
	ctx := context.Background()
	for _, size := range []int64{1 << 20, 6 << 20} { // one row; chunks
		st := storetest.OpenStoreWith(t, wsstore.Options{})
		_, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "cap"}, RunID: "cap"})
		require.NoError(t, err)
		ws := st.Runs.Workspace("cap", runs.HostScope)
		first, err := ws.WriteFrom(ctx, vfs.MustPath("output/a.bin"), noise(1, size), vfs.WriteOptions{})
		require.NoError(t, err)
		used, err := st.DB.UsedBytes(ctx)
		require.NoError(t, err)
		limit := used + size/2
		require.NoError(t, st.Runs.SetPolicy(ctx, runs.StoreScope, runs.Policy{MaxStoreBytes: &limit}))

		for _, p := range []string{"output/a.bin", "output/b.bin"} {
			fi, err := ws.WriteFrom(ctx, vfs.MustPath(p), noise(1, size), vfs.WriteOptions{})
			require.NoError(t, err, "%d bytes stored already, to %s", size, p)
			require.Equal(t, first.Hash, fi.Hash)
		}
		before, err := st.DB.UsedBytes(ctx)
		require.NoError(t, err)
		_, err = ws.WriteFrom(ctx, vfs.MustPath("output/c.bin"), noise(2, size), vfs.WriteOptions{})
		require.True(t, wserr.Is(err, wserr.SizeLimitExceeded), "new content: %v", err)
		after, err := st.DB.UsedBytes(ctx)
		require.NoError(t, err)
		require.Less(t, after-before, size/2, "the refused content is not stored")
	}
}
