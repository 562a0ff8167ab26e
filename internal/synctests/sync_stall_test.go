package synctests_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/remote"
	"github.com/wsstore/wsstore/remote/s3fake"
	"github.com/wsstore/wsstore/wserr"
)

// TestFailedSyncTriesItsLockOnce: a sync that fails because the object
// store stopped answering gives the removal of its lock one attempt, not
// every attempt of a request, each waiting the idle timeout again (before,
// the removal had all five, and a failed sync took about twice as long as
// its failing request). The lock so left does not hold back the device's
// next sync, which removes it.
func TestFailedSyncTriesItsLockOnce(t *testing.T) {
	awsTestEnv(t)
	srv := s3fake.New("wsstore")
	t.Cleanup(srv.Close)
	ctx := context.Background()
	st, err := wsstore.Open(ctx, t.TempDir(), wsstore.Options{Blobs: "s3://wsstore/team?endpoint=" + srv.URL,
		Remote: remote.Options{MaxBackoff: 10 * time.Millisecond, IdleTimeout: 100 * time.Millisecond}})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	createRun(t, st, "r")
	edit(t, st, "r", "life.md", "A")

	var mu sync.Mutex
	uploads, removals := 0, 0
	srv.SetStall(func(r *http.Request) bool {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/data/"):
			uploads++
			return true
		case r.Method == http.MethodDelete && strings.Contains(r.URL.Path, "/locks/sync/"):
			removals++
			return true
		}
		return false
	})
	_, err = st.Sync(ctx)
	require.Error(t, err)
	assert.Equal(t, wserr.Busy, wserr.CodeOf(err), "%v", err)
	assert.ErrorIs(t, err, remote.ErrUnavailable)
	mu.Lock()
	assert.Equal(t, 5, uploads, "the failing upload has its five attempts")
	assert.Equal(t, 1, removals, "the lock's removal is tried once")
	mu.Unlock()
	assert.Len(t, srv.Keys("wsstore", "team/locks/sync/"), 1, "the lock is left to expire")

	srv.SetStall(nil)
	syncOK(t, st)
	assert.Empty(t, srv.Keys("wsstore", "team/locks/sync/"), "the next sync removes the lock left behind")
}
