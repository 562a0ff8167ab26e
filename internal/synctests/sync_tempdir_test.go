package synctests_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/remote"
	"github.com/wsstore/wsstore/wserr"
)

// TestSyncWithoutTemporaryFiles: a sync that cannot keep its temporary
// files (the object list and the segment it uploads; here TMPDIR names no
// directory) fails with a coded error before it publishes anything, and
// the next sync that can publishes all the device holds, which another
// device then takes in whole.
func TestSyncWithoutTemporaryFiles(t *testing.T) {
	srv, open := fakeTier(t)
	ctx := context.Background()
	a := open()
	smallRuns(t, a, "chat-tmp", "r", 3)
	tmp := os.TempDir()
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "none"))
	_, err := a.Sync(ctx)
	require.Error(t, err)
	assert.True(t, wserr.Is(err, wserr.Internal), "coded: %v", err)
	assert.ErrorContains(t, err, "temporary file")
	assert.ErrorContains(t, err, "none", "names the directory")
	assert.Empty(t, srv.Keys("wsstore", "team/sync/"), "no segment published")

	t.Setenv("TMPDIR", tmp)
	rep := syncOK(t, a)
	assert.True(t, rep.Base)
	b := open()
	got := syncOK(t, b)
	assert.Equal(t, []string{"run r-00", "run r-01", "run r-02"}, runsOf(got, got.Added))

	// A pull lists the object set it publishes in a temporary file too.
	c := open()
	dev, err := remote.Device(ctx, c.DB)
	require.NoError(t, err)
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "none"))
	_, err = c.PullRemote(ctx)
	require.Error(t, err)
	assert.True(t, wserr.Is(err, wserr.Internal), "coded: %v", err)
	assert.ErrorContains(t, err, "object list")
	assert.Empty(t, srv.Keys("wsstore", "team/sync/"+dev+"/"), "no segment published")
	t.Setenv("TMPDIR", tmp)
	_, err = c.PullRemote(ctx) // what the failed pull took in is published now
	require.NoError(t, err)
	assert.Len(t, srv.Keys("wsstore", "team/sync/"+dev+"/"), 1)
}
