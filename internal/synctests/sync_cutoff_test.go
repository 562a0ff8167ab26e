package synctests_test

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/remote"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

// TestReclaimWaitsForASyncCutOff: B's sync takes in A's run and fails to
// publish its segment, so no object set names what B now uses. A deletes
// the run, collects it and syncs; B's sync lock, left behind, expires.
// Reclaim on A must keep the run's pack, and say it waits for B, until
// B has synced again; B still reads the file meanwhile.
func TestReclaimWaitsForASyncCutOff(t *testing.T) {
	srv, open := fakeTier(t)
	ctx := context.Background()
	a, b := open(), open()
	_, err := a.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "c"}, RunID: "x"})
	require.NoError(t, err)
	big := make([]byte, 256<<10)
	r := rand.New(rand.NewPCG(7, 7))
	for i := range big {
		big[i] = byte(r.UintN(256))
	}
	_, err = a.Runs.Workspace("x", runs.ModelScope).Write(ctx, vfs.MustPath("output/big.bin"), big, vfs.WriteOptions{})
	require.NoError(t, err)
	syncOK(t, a)

	// B's segment PUT is refused: B took in the run and published nothing.
	srv.SetFault(func(r *http.Request) int {
		if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/team/sync/") {
			return http.StatusServiceUnavailable
		}
		return 0
	})
	_, err = b.Sync(ctx)
	require.Error(t, err)
	srv.SetFault(nil)
	read := func() ([]byte, error) {
		got, err := b.Runs.Workspace("x", runs.HostScope).Read(ctx, vfs.MustPath("output/big.bin"), vfs.ReadOptions{})
		return got.Content, err
	}
	got, err := read()
	require.NoError(t, err, "B took the run in")
	require.Equal(t, big, got)
	locks := srv.Keys("wsstore", "team/locks/sync/")
	require.Len(t, locks, 1, "the cut-off sync leaves its lock")
	// An hour later, the lock has expired.
	body, ok := srv.Object("wsstore", locks[0])
	require.True(t, ok)
	var lock map[string]any
	require.NoError(t, json.Unmarshal(body, &lock))
	lock["expires"] = time.Now().Add(-time.Minute).UTC().Format(time.RFC3339Nano)
	body, err = json.Marshal(lock)
	require.NoError(t, err)
	srv.SetObject("wsstore", locks[0], body)

	_, err = a.Runs.CancelAndDeleteRun(ctx, "x")
	require.NoError(t, err)
	_, err = a.GC(ctx, wsstore.GCOptions{Grace: -1})
	require.NoError(t, err)
	syncOK(t, a)
	devB, err := remote.Device(ctx, b.DB)
	require.NoError(t, err)
	rec, err := a.ReclaimRemote(ctx, remote.ReclaimOptions{Grace: -1})
	require.NoError(t, err)
	assert.Zero(t, rec.Packs, "no pack goes while B has not published")
	assert.Equal(t, []string{devB}, rec.Waiting)
	assert.Equal(t, locks, srv.Keys("wsstore", "team/locks/sync/"), "the lock that says so stays")
	_, err = b.Remote.Evict(ctx, b.DB)
	require.NoError(t, err)
	got, err = read()
	require.NoError(t, err, "B still reads the run it took in")
	assert.Equal(t, big, got)

	syncOK(t, b)
	assert.Empty(t, srv.Keys("wsstore", "team/locks/sync/"))
	rec, err = a.ReclaimRemote(ctx, remote.ReclaimOptions{Grace: -1})
	require.NoError(t, err)
	assert.Empty(t, rec.Waiting, "B has published since")
}
