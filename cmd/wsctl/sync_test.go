package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/remote/s3fake"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

// fakeTier starts a fake object store for the test, with credentials in
// the environment, and returns it and the tier URL of prefix in its
// bucket "wsstore".
func fakeTier(t *testing.T, prefix string) (*s3fake.Server, string) {
	t.Helper()
	awsEnv(t)
	srv := s3fake.New("wsstore")
	t.Cleanup(srv.Close)
	return srv, "s3://wsstore/" + prefix + "?endpoint=" + srv.URL + "&region=us-east-1"
}

// demoDesk is a store, "desk", with the demo's runs and its file contents
// on a fake tier under the prefix desk: the tier, its URL and the store.
func demoDesk(t *testing.T) (*s3fake.Server, string, *cli) {
	t.Helper()
	srv, url := fakeTier(t, "desk")
	desk := newCLI(t)
	desk.ok("--blobs", url, "demo")
	return srv, url, desk
}

func awsEnv(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_CA_BUNDLE", "")
}

func (c *cli) runIDs() []string {
	c.t.Helper()
	var rs []struct {
		ID string `json:"runId"`
	}
	c.jsonOut(&rs, "runs")
	var ids []string
	for _, r := range rs {
		ids = append(ids, r.ID)
	}
	sort.Strings(ids)
	return ids
}

// TestSyncTwoStores: two stores (two devices) sync through one object
// store with wsctl alone: the second starts from nothing, both write,
// and both end with the same runs.
func TestSyncTwoStores(t *testing.T) {
	_, url := fakeTier(t, "team")
	desk, phone := newCLI(t), newCLI(t)
	desk.ok("--blobs", url, "demo")
	var rep wsstore.SyncReport
	desk.jsonOut(&rep, "sync")
	assert.NotEmpty(t, rep.Published)
	phone.jsonOut(&rep, "--blobs", url, "sync")
	assert.NotEmpty(t, rep.Added)
	assert.Equal(t, desk.runIDs(), phone.runIDs())

	desk.ok("demo")
	phone.ok("demo")
	desk.ok("sync")
	phone.ok("sync")
	desk.ok("sync")
	assert.Equal(t, desk.runIDs(), phone.runIDs())
	assert.Contains(t, desk.ok("--help"), "the store records it, so later commands need no --blobs",
		"the help of --blobs says what the syncs above did")
	assert.Len(t, desk.runIDs(), 3)
	desk.ok("reclaim-remote", "--dry-run")
	// --grace 0 means no grace, as gc's does, not the 7-day default.
	var def, none map[string]any
	desk.jsonOut(&def, "reclaim-remote", "--dry-run")
	desk.jsonOut(&none, "reclaim-remote", "--dry-run", "--grace", "0")
	assert.Zero(t, def["segments"], "the default grace keeps the segments just superseded")
	assert.Positive(t, none["segments"], "no grace: superseded segments go")

	// Sync needs a tier: the error names both ways to give one.
	other := newCLI(t)
	other.ok("init")
	errOut := other.fails(2, "sync")
	assert.Contains(t, errOut, "store.invalid_options")
	assert.Contains(t, errOut, "wsctl sync s3://bucket/prefix")
	assert.Contains(t, errOut, "--blobs")
	errOut = other.fails(2, "push")
	assert.Contains(t, errOut, "needs --blobs s3://bucket/prefix")
}

// TestReplicateRestoreCLI: replicate --once ships the database through
// Litestream; restore builds a store from it that reads every run back
// from the object store.
func TestReplicateRestoreCLI(t *testing.T) {
	srv, _, desk := demoDesk(t)
	desk.ok("replicate", "--once")
	assert.NotEmpty(t, srv.Keys("wsstore", "desk/meta/"), "Litestream's files under the tier's prefix + meta")

	dir := filepath.Join(t.TempDir(), "restored")
	var rep struct {
		Runs     int  `json:"runs"`
		Verified bool `json:"verified"`
		Problems int  `json:"problems"`
	}
	desk.jsonOut(&rep, "restore", "--from", "s3://wsstore/desk/meta?endpoint="+srv.URL, "--verify", dir)
	assert.Equal(t, 1, rep.Runs)
	assert.True(t, rep.Verified)
	assert.Zero(t, rep.Problems)
	restored := &cli{t: t, store: dir, env: map[string]string{}}
	assert.Equal(t, desk.runIDs(), restored.runIDs())

	// Continuous: a signal (the context) stops it after its last round,
	// with exit 0, and what was written meanwhile is on the replica.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	go func() {
		_, _, code := desk.runCtx(ctx, strings.NewReader(""), "replicate", "--interval", "10s")
		done <- code
	}()
	desk.ok("demo")
	cancel()
	assert.Equal(t, 0, <-done)
	dir2 := filepath.Join(t.TempDir(), "restored2")
	desk.jsonOut(&rep, "restore", "--from", "s3://wsstore/desk/meta?endpoint="+srv.URL, dir2)
	assert.Equal(t, 2, rep.Runs, "the run written while replicate ran")

	errOut := desk.fails(2, "restore", "--from", "s3://wsstore/desk/meta?endpoint="+srv.URL, dir)
	assert.Contains(t, errOut, "store.invalid_options")
	errOut = desk.fails(3, "restore", "--from", "s3://wsstore/nothing?endpoint="+srv.URL, filepath.Join(t.TempDir(), "x"))
	assert.Contains(t, errOut, "store.not_found")
}

// TestRestoreFromTheSyncTier: restore --from the URL wsctl sync used (no
// replica there) builds a store from the segments the devices published,
// as a device of its own, and finds the replicate default beside it (the
// tier's prefix + meta) when there is one; a tier nothing syncs through is
// still store.not_found, and registers no device.
func TestRestoreFromTheSyncTier(t *testing.T) {
	srv, url := fakeTier(t, "team")
	desk := newCLI(t)
	desk.ok("--blobs", url, "demo")
	desk.ok("sync")

	dir := filepath.Join(t.TempDir(), "restored")
	var rep struct {
		Runs     int  `json:"runs"`
		Problems int  `json:"problems"`
		Verified bool `json:"verified"`
	}
	desk.jsonOut(&rep, "restore", "--from", url, "--verify", dir)
	assert.Equal(t, 1, rep.Runs)
	assert.True(t, rep.Verified)
	assert.Zero(t, rep.Problems)
	restored := &cli{t: t, store: dir, env: map[string]string{}}
	assert.Equal(t, desk.runIDs(), restored.runIDs())
	restored.ok("fsck")
	assert.Len(t, srv.Keys("wsstore", "team/devices/"), 2, "the restored store syncs as a device of its own")

	// With a replica at the tier's default (prefix + meta), that is restored.
	desk.ok("demo")
	desk.ok("replicate", "--once")
	dir2 := filepath.Join(t.TempDir(), "restored2")
	desk.jsonOut(&rep, "restore", "--from", url, dir2)
	assert.Equal(t, 2, rep.Runs, "the replica holds the run not synced yet")

	empty := "s3://wsstore/nothing?endpoint=" + srv.URL + "&region=us-east-1"
	errOut := desk.fails(3, "restore", "--from", empty, filepath.Join(t.TempDir(), "x"))
	assert.Contains(t, errOut, "store.not_found")
	assert.Empty(t, srv.Keys("wsstore", "nothing/"), "nothing written to a tier nothing syncs through")
}

// TestRestoreFailsWhole: a restore that fails after the replica is read
// (here, --blobs naming another tier than the source's) leaves no store
// behind, so running it again as it should be works; the store it then
// builds syncs as a device of its own, not as its source. Setup mistakes
// of replicate and restore (no such bucket, no credentials) are
// store.invalid_options (exit 2), not store.busy.
func TestRestoreFailsWhole(t *testing.T) {
	awsEnv(t)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	srv := s3fake.New("wsstore")
	t.Cleanup(srv.Close)
	url := "s3://wsstore/desk?endpoint=" + srv.URL + "&region=us-east-1"
	meta := "s3://wsstore/desk/meta?endpoint=" + srv.URL + "&region=us-east-1"
	desk := newCLI(t)
	desk.ok("--blobs", url, "demo")
	desk.ok("sync")
	desk.ok("replicate", "--once")

	dir := filepath.Join(t.TempDir(), "restored")
	errOut := desk.fails(2, "--blobs", "s3://wsstore/typo?endpoint="+srv.URL+"&region=us-east-1", "restore", "--from", meta, dir)
	assert.Contains(t, errOut, "store.invalid_options")
	entries, _ := os.ReadDir(dir)
	assert.Empty(t, entries, "no store left behind")

	desk.ok("restore", "--from", meta, dir)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		assert.True(t, strings.HasPrefix(e.Name(), wsstore.DBName), "only the store's files in DIR: %s", e.Name())
	}
	restored := &cli{t: t, store: dir, env: map[string]string{}}
	device := func(c *cli) string {
		out := strings.Fields(c.ok("sql", "SELECT value FROM meta WHERE key = 'remote.device'"))
		require.GreaterOrEqual(t, len(out), 2, "a header and the device id")
		return out[1]
	}
	assert.NotEqual(t, device(desk), device(restored), "the restored store is a device of its own")

	t.Run("PullFails", func(t *testing.T) {
		// The pull registers the restored device on the tier; it runs
		// once the store is in DIR, so a failed pull leaves a store that
		// wsctl pull completes, and no device on the tier that no store is.
		devices := func() []string { return srv.Keys("wsstore", "desk/devices/") }
		before := devices()
		srv.SetFault(func(r *http.Request) int {
			if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/devices/") {
				return http.StatusServiceUnavailable
			}
			return 0
		})
		dir := filepath.Join(t.TempDir(), "restored")
		errOut := desk.fails(8, "restore", "--from", meta, dir)
		assert.Contains(t, errOut, "run wsctl pull")
		assert.Equal(t, before, devices(), "no device registered for the failed pull")
		srv.SetFault(nil)
		restored := &cli{t: t, store: dir, env: map[string]string{}}
		restored.ok("pull")
		assert.Len(t, devices(), len(before)+1, "the pull registers the restored device")
		assert.Contains(t, devices(), "desk/devices/"+device(restored))
	})
	t.Run("ErrSetup", func(t *testing.T) {
		nobucket := "s3://nobucket/m?endpoint=" + srv.URL + "&region=us-east-1"
		errOut := desk.fails(2, "replicate", "--once", "--to", nobucket)
		assert.Contains(t, errOut, "store.invalid_options")
		errOut = desk.fails(2, "restore", "--from", nobucket, filepath.Join(t.TempDir(), "x"))
		assert.Contains(t, errOut, "store.invalid_options")
		t.Setenv("AWS_ACCESS_KEY_ID", "")
		t.Setenv("AWS_SECRET_ACCESS_KEY", "")
		errOut = desk.fails(2, "replicate", "--once", "--to", meta)
		assert.Contains(t, errOut, "store.invalid_options")
		assert.Contains(t, errOut, "AWS_PROFILE", "replication takes no profile= in its URL: the hint names what it takes")
		assert.NotContains(t, errOut, "name a profile in the URL")
		errOut = desk.fails(2, "restore", "--from", meta, filepath.Join(t.TempDir(), "y"))
		assert.Contains(t, errOut, "store.invalid_options")
	})
}

// TestSyncConflictOfADeletion: a run deleted on one device and written on
// the other is a conflict (exit 5) whose message says so, not that it was
// written on two devices.
func TestSyncConflictOfADeletion(t *testing.T) {
	_, url := fakeTier(t, "team")
	desk, phone := newCLI(t), newCLI(t)
	desk.ok("--blobs", url, "init")
	desk.seedRun(desk.open(), "run_a")
	desk.ok("sync")
	phone.ok("--blobs", url, "sync")
	desk.ok("rm", "--force", "run_a")
	desk.ok("sync")
	st := phone.open()
	_, err := st.Runs.Workspace("run_a", runs.ModelScope).Write(context.Background(), vfs.MustPath("output/a.md"), []byte("phone\n"), vfs.WriteOptions{})
	require.NoError(t, err)

	errOut := phone.fails(5, "sync")
	assert.Contains(t, errOut, "conflict: run run_a: deleted on device")
	assert.Contains(t, errOut, "1 chats, runs or actor spaces were changed on two devices, or deleted on one and changed on the other")
	assert.NotContains(t, errOut, "written on two devices")
}

// TestRestoreFromTheSyncTierRegistersOnlyItsStore: a restore from the sync
// tier registers its device only once the store is in DIR, so every device
// on the tier is a store: one whose first sync failed (here, a device's
// segment damaged) is left in DIR, and wsctl sync there goes on once the
// tier is mended.
func TestRestoreFromTheSyncTierRegistersOnlyItsStore(t *testing.T) {
	srv, url := fakeTier(t, "team")
	desk := newCLI(t)
	desk.ok("--blobs", url, "demo")
	desk.ok("sync")
	segs := srv.Keys("wsstore", "team/sync/")
	require.NotEmpty(t, segs)
	orig := map[string][]byte{}
	for _, k := range segs {
		b, _ := srv.Object("wsstore", k)
		orig[k] = b
		srv.SetObject("wsstore", k, []byte("not a segment"))
	}

	dir := filepath.Join(t.TempDir(), "restored")
	errOut := desk.fails(6, "restore", "--from", url, dir)
	assert.Contains(t, errOut, "run wsctl sync there")
	require.FileExists(t, filepath.Join(dir, wsstore.DBName), "the store its device is")
	assert.Len(t, srv.Keys("wsstore", "team/devices/"), 2, "the source and the store in DIR")

	for k, b := range orig {
		srv.SetObject("wsstore", k, b)
	}
	restored := &cli{t: t, store: dir, env: map[string]string{}}
	restored.ok("sync")
	assert.Equal(t, desk.runIDs(), restored.runIDs())
	assert.Len(t, srv.Keys("wsstore", "team/devices/"), 2, "no device but the two stores")
}

// TestFirstSyncFailedOnTheTierKeepsItsStore: a first sync into a new
// store that fails after it took in what the other devices published, as
// it publishes its own segment, leaves its sync lock on the tier, which
// keeps reclaim-remote from removing any pack until the device syncs
// again. The store it made stays, to sync again, which settles the lock;
// one removed would leave the tier waiting for a device that no store is.
func TestFirstSyncFailedOnTheTierKeepsItsStore(t *testing.T) {
	srv, url := fakeTier(t, "team")
	desk, phone := newCLI(t), newCLI(t)
	desk.ok("--blobs", url, "demo")
	desk.ok("sync")
	srv.SetFault(func(r *http.Request) int {
		if r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, ".seg") {
			return http.StatusForbidden
		}
		return 0
	})
	errOut := phone.fails(2, "--blobs", url, "sync")
	assert.Contains(t, errOut, "is a device on the object store now and stays")
	require.FileExists(t, filepath.Join(phone.store, wsstore.DBName), "the store made stays")
	assert.NotEmpty(t, srv.Keys("wsstore", "team/locks/sync/"), "the cut-off sync's lock")
	srv.SetFault(nil)

	phone.ok("sync")
	assert.Equal(t, desk.runIDs(), phone.runIDs())
	assert.Empty(t, srv.Keys("wsstore", "team/locks/sync/"), "the next sync settles the lock")
	var rep struct {
		Waiting []string `json:"waiting"`
	}
	desk.jsonOut(&rep, "reclaim-remote", "--dry-run")
	assert.Empty(t, rep.Waiting, "no device is waited for")
}

// TestSyncPrintsCounts: wsctl sync prints how many items it took in,
// however many its report names: the first wsstore.MaxTakenNames.
func TestSyncPrintsCounts(t *testing.T) {
	_, url := fakeTier(t, "team")
	desk := newCLI(t)
	desk.ok("--blobs", url, "demo")
	st := desk.open()
	for i := range wsstore.MaxTakenNames {
		_, err := st.Runs.CreateRun(context.Background(), runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "c"},
			RunID: fmt.Sprintf("r-%06d", i)})
		require.NoError(t, err)
	}
	require.NoError(t, st.Close())
	desk.ok("sync")
	var rep wsstore.SyncReport
	newCLI(t).jsonOut(&rep, "--blobs", url, "sync")
	require.Greater(t, rep.AddedCount, wsstore.MaxTakenNames)
	assert.Len(t, rep.Added, wsstore.MaxTakenNames)
	assert.Contains(t, newCLI(t).ok("--blobs", url, "sync"), fmt.Sprintf("segments: %d added, 0 updated", rep.AddedCount))
}
