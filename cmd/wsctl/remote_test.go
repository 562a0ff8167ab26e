package main

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/remote"
	"github.com/wsstore/wsstore/remote/s3fake"
)

// TestBlobsOnObjectStore: a store whose blobs live on an object store
// records a session, pushes its blobs in packs, and, with its local cache
// dropped, passes fsck reading every blob back from the packs.
func TestBlobsOnObjectStore(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	srv := s3fake.New("wsstore")
	t.Cleanup(srv.Close)
	url := "s3://wsstore/desk?endpoint=" + srv.URL + "&region=us-east-1"

	c := newCLI(t)
	c.skipFsck = true // the cleanup's fsck opens without --blobs
	c.ok("--blobs", url, "demo")
	assert.Zero(t, srv.Count("PUT"))
	// While another device reclaims, a push uploads nothing and says so.
	lease := "desk/locks/reclaim/00000000000000000001"
	srv.SetObject("wsstore", lease, fmt.Appendf(nil, `{"device":"laptop","expires":%q}`, time.Now().Add(time.Hour).Format(time.RFC3339)))
	errOut := c.fails(8, "--blobs", url, "push")
	assert.Contains(t, errOut, "store.busy")
	assert.Contains(t, errOut, "device laptop holds the lock")
	assert.Zero(t, srv.Count("PUT"))
	srv.SetObject("wsstore", lease, []byte(`{"device":"laptop","expires":"2000-01-01T00:00:00Z"}`))

	var rep remote.PushStats
	c.jsonOut(&rep, "--blobs", url, "push")
	assert.Greater(t, rep.Objects, 0)
	assert.Equal(t, 2*rep.Packs+min(rep.Chunked, 1)+1, srv.Count("PUT"), "packs, their indexes and the push's lock")
	assert.Empty(t, srv.Keys("wsstore", "desk/locks/push/"))
	c.jsonOut(&rep, "--blobs", url, "push")
	assert.Zero(t, rep.Objects, "nothing left to push")

	st, err := wsstore.Open(context.Background(), c.store, wsstore.Options{Blobs: url})
	require.NoError(t, err)
	defer st.Close()
	n, err := st.Remote.Evict(context.Background(), st.DB)
	require.NoError(t, err)
	assert.Greater(t, n, int64(0))
	gets := srv.Count("GET")
	fr, err := st.Fsck(context.Background(), nil)
	require.NoError(t, err)
	assert.Empty(t, fr.Problems)
	assert.Greater(t, srv.Count("GET"), gets, "fsck read the blobs from the object store")

	// The store recorded its tier: commands need no --blobs, and one
	// naming another bucket or prefix is refused.
	c.skipFsck = false
	c.ok("runs")
	c.jsonOut(&rep, "push")
	assert.Zero(t, rep.Objects)
	other := "s3://wsstore/other?endpoint=" + srv.URL + "&region=us-east-1"
	for _, args := range [][]string{{"runs"}, {"fsck"}, {"push"}} {
		errOut := c.fails(2, append([]string{"--blobs", other}, args...)...)
		assert.Contains(t, errOut, "store.invalid_options", args)
		assert.Contains(t, errOut, "remote tier", args)
	}
	// The same tier by another endpoint name is the same tier.
	c.ok("--blobs", "s3://wsstore/desk?endpoint="+srv.URL+"/&region=us-east-1", "runs")

	// A store with objects on a tier but no record of it (written before
	// stores recorded their tier) is refused without --blobs.
	raw, err := wsstore.Open(context.Background(), c.store, wsstore.Options{})
	require.NoError(t, err)
	require.NoError(t, raw.DB.Update(context.Background(), func(tx *index.Tx) error {
		_, err := tx.ExecContext(context.Background(), `DELETE FROM meta WHERE key = 'remote.blobs'`)
		return err
	}))
	require.NoError(t, raw.Close())
	c.skipFsck = true
	for _, args := range [][]string{{"runs"}, {"fsck"}, {"gc"}} {
		errOut := c.fails(2, args...)
		assert.Contains(t, errOut, "store.invalid_options", args)
		assert.Contains(t, errOut, "remote blob tier", args)
	}
}

// TestBlobsTierChosenWithTheStore: a remote tier is chosen when a store
// is made. One named for a store that already holds file contents of its
// own is refused and changes nothing (those contents would look missing
// through the tier, and a sync would announce objects no device can
// fetch); one named for a store that never stored anything on its tier
// (a first sync to a missing bucket) may be corrected.
func TestBlobsTierChosenWithTheStore(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	srv := s3fake.New("wsstore")
	t.Cleanup(srv.Close)
	url := "s3://wsstore/desk?endpoint=" + srv.URL + "&region=us-east-1"

	t.Run("ErrStoreWithContents", func(t *testing.T) {
		c := newCLI(t)
		c.ok("demo", "--store", c.store)
		before := c.ok("cat", "latest", "output/main.md")
		for _, args := range [][]string{{"sync"}, {"push"}, {"runs"}} {
			errOut := c.fails(2, append([]string{"--blobs", url}, args...)...)
			assert.Contains(t, errOut, "store.invalid_options", args)
			assert.Contains(t, errOut, "holds file contents of its own", args)
		}
		assert.Equal(t, before, c.ok("cat", "latest", "output/main.md"), "the store reads as before")
		assert.Empty(t, srv.Keys("wsstore", "desk/"), "nothing was sent")
		assert.Contains(t, c.ok("sql", "SELECT value FROM meta WHERE key = 'remote.blobs'"), "(0 rows)", "and no tier recorded")
	})

	t.Run("OKCorrectAnUnusedTier", func(t *testing.T) {
		c := newCLI(t)
		c.skipFsck = true // the cleanup's fsck opens without --blobs
		missing := "s3://nobucket/desk?endpoint=" + srv.URL + "&region=us-east-1"
		// Written through the mistyped tier, held locally: nothing ever
		// reached it.
		c.ok("--blobs", missing, "demo", "--store", c.store)
		assert.Contains(t, c.fails(2, "sync"), "store.invalid_options")
		c.ok("--blobs", url, "sync")
		assert.Contains(t, c.ok("cat", "latest", "output/main.md"), "keeper")
		c.ok("--blobs", url, "demo", "--store", c.store)
		c.ok("--blobs", url, "sync")
		fsck := c.ok("fsck")
		assert.Contains(t, fsck, "no problems")
		// Now that the tier holds what the store stored, it is the
		// store's for good.
		errOut := c.fails(2, "--blobs", missing, "runs")
		assert.Contains(t, errOut, "not this one")
	})
}
