package synctests_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
)

// TestSyncClockStepsBack: a device whose clock steps back between two
// syncs (a correction, a restored virtual machine, a host that fixes it)
// still publishes its next segment after its last, so the other devices
// read it. Before, the segment's key, which begins with its time, sorted
// before the last one they had read, and they never read it: the runs it
// carried never reached them.
func TestSyncClockStepsBack(t *testing.T) {
	ctx := context.Background()
	srv, open := fakeTier(t)
	var mu sync.Mutex
	now := time.Date(2026, 6, 1, 10, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	a, err := wsstore.Open(ctx, t.TempDir(), wsstore.Options{Blobs: "s3://wsstore/team?endpoint=" + srv.URL, Now: clock})
	require.NoError(t, err)
	t.Cleanup(func() { a.Close() })
	b := open()
	smallRuns(t, a, "chat-1", "early", 1)
	syncOK(t, a)
	syncOK(t, b)

	mu.Lock()
	now = now.Add(-time.Hour)
	mu.Unlock()
	smallRuns(t, a, "chat-1", "late", 1)
	syncOK(t, a)
	syncOK(t, b)
	assert.Contains(t, runIDs(t, b), "late-00", "B reads the segment A published after its clock stepped back")

	mu.Lock()
	now = now.Add(-time.Hour) // and again, to a time no earlier segment had
	mu.Unlock()
	smallRuns(t, a, "chat-1", "later", 1)
	syncOK(t, a)
	syncOK(t, b)
	assert.Contains(t, runIDs(t, b), "later-00")
}
