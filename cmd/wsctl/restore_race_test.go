package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/remote/s3fake"
	"github.com/wsstore/wsstore/runs"
)

// TestRestoreLeavesAStoreMadeMeanwhile: a store made in DIR while a
// restore reads the replica (after its check that DIR holds none) is left
// as it is, with what was written to it; the restore fails with
// store.invalid_options.
func TestRestoreLeavesAStoreMadeMeanwhile(t *testing.T) {
	awsEnv(t)
	srv := s3fake.New("wsstore")
	t.Cleanup(srv.Close)
	desk := newCLI(t)
	desk.ok("demo")
	meta := "s3://wsstore/desk/meta?endpoint=" + srv.URL + "&region=us-east-1"
	desk.ok("replicate", "--once", "--to", meta)

	dir := filepath.Join(t.TempDir(), "restored")
	var once sync.Once
	srv.SetFault(func(r *http.Request) int {
		if r.Method == http.MethodGet {
			once.Do(func() {
				// Another program makes a store in DIR and writes to it.
				st, err := wsstore.Open(context.Background(), dir, wsstore.Options{})
				require.NoError(t, err)
				_, err = st.Runs.CreateRun(context.Background(), runs.CreateRequest{RunID: "precious",
					Chat: runs.ChatKey{Kind: "character", StableChatID: "precious"}})
				require.NoError(t, err)
				require.NoError(t, st.Close())
			})
		}
		return 0
	})
	errOut := desk.fails(2, "restore", "--from", meta, dir)
	assert.Contains(t, errOut, "store.invalid_options")
	srv.SetFault(nil)
	kept := &cli{t: t, store: dir, env: map[string]string{}}
	assert.Equal(t, []string{"precious"}, kept.runIDs(), "the store made meanwhile, as it was")
}

// TestSyncGapKeepsANewDevice: a store's first sync that meets a gap in
// another device's segments publishes its own before it fails (exit 6):
// the store, a device on the tier now, stays, and its report goes out,
// naming the device held back.
func TestSyncGapKeepsANewDevice(t *testing.T) {
	srv, url := fakeTier(t, "team")
	desk := newCLI(t)
	var rep struct {
		Device    string   `json:"device"`
		Published string   `json:"published"`
		Held      []string `json:"held"`
	}
	small := func(chat string) { // a change far smaller than the base
		_, errOut, code := desk.run(`{"op":"run.create","chat":{"kind":"character","stableChatId":"`+chat+`"}}`+"\n", "batch")
		require.Equal(t, 0, code, errOut)
	}
	desk.ok("--blobs", url, "demo")
	desk.ok("demo")
	desk.ok("sync")
	small("one")
	desk.jsonOut(&rep, "sync")
	gone := rep.Published
	require.NotContains(t, gone, "base")
	small("two")
	desk.ok("sync")
	srv.SetObject("wsstore", "team/"+gone, nil)

	phone := newCLI(t)
	out, errOut, code := phone.run("", "--blobs", url, "--json", "sync")
	require.Equal(t, 6, code, "stderr %s", errOut)
	assert.Contains(t, errOut, "store.corrupt")
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	assert.NotEmpty(t, rep.Published, "the new device published its own")
	assert.Equal(t, []string{strings.Split(gone, "/")[1]}, rep.Held)
	assert.NoError(t, storeExists(phone.store), "the new device's store stays")
}

// TestRestoreKilledThenRestoredLeavesNoCopy: a restore killed part way
// leaves its directory in DIR, up to a copy of the whole database; the
// restore run again succeeds beside it, and DIR then holds a store, so no
// restore runs there again. The next command that opens the store for
// writing once that directory is an hour old removes it; a younger one
// (a restore still running) stays.
func TestRestoreKilledThenRestoredLeavesNoCopy(t *testing.T) {
	srv, _ := fakeTier(t, "unused")
	desk := newCLI(t)
	desk.ok("demo")
	meta := "s3://wsstore/desk/meta?endpoint=" + srv.URL + "&region=us-east-1"
	desk.ok("replicate", "--once", "--to", meta)

	dir := filepath.Join(t.TempDir(), "restored")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	// What a restore killed after reading the replica leaves.
	killed := filepath.Join(dir, restoringPrefix+"123")
	require.NoError(t, os.Mkdir(killed, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(killed, wsstore.DBName), make([]byte, 1<<20), 0o644))
	desk.ok("restore", "--from", meta, dir)
	require.DirExists(t, killed, "an hour has not passed: it may be a restore still running")

	running := filepath.Join(dir, restoringPrefix+"456")
	require.NoError(t, os.Mkdir(running, 0o700))
	old := time.Now().Add(-2 * time.Hour)
	require.NoError(t, os.Chtimes(killed, old, old))
	restored := &cli{t: t, store: dir, env: map[string]string{}}
	restored.ok("gc")
	assert.NoDirExists(t, killed, "the killed restore's copy is removed")
	assert.DirExists(t, running, "a restore touched within the hour is left")
	assert.NotEmpty(t, restored.runIDs(), "the store is as restored")
}

// TestRestoreRefusesALogLeftInDir: DIR holds no store but the write-ahead
// log of one whose database file was removed. SQLite would replay that
// log onto the restored database at its first open (a store.corrupt
// store, or another's rows in it); the restore refuses DIR with
// store.invalid_options, reads nothing and leaves the log as it is.
func TestRestoreRefusesALogLeftInDir(t *testing.T) {
	awsEnv(t)
	srv := s3fake.New("wsstore")
	t.Cleanup(srv.Close)
	desk := newCLI(t)
	desk.ok("demo")
	meta := "s3://wsstore/desk/meta?endpoint=" + srv.URL + "&region=us-east-1"
	desk.ok("replicate", "--once", "--to", meta)

	// Another store's log, copied while that store is open and written.
	other := filepath.Join(t.TempDir(), "other")
	st, err := wsstore.Open(context.Background(), other, wsstore.Options{})
	require.NoError(t, err)
	_, err = st.Runs.CreateRun(context.Background(), runs.CreateRequest{RunID: "gone",
		Chat: runs.ChatKey{Kind: "character", StableChatID: "gone"}})
	require.NoError(t, err)
	log, err := os.ReadFile(filepath.Join(other, wsstore.DBName+"-wal"))
	require.NoError(t, err)
	require.NotEmpty(t, log)
	require.NoError(t, st.Close())

	dir := filepath.Join(t.TempDir(), "restored")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	walPath := filepath.Join(dir, wsstore.DBName+"-wal")
	require.NoError(t, os.WriteFile(walPath, log, 0o644))
	errOut := desk.fails(2, "restore", "--from", meta, dir)
	assert.Contains(t, errOut, "store.invalid_options")
	assert.Contains(t, errOut, "wsstore.db-wal")
	got, err := os.ReadFile(walPath)
	require.NoError(t, err)
	assert.Equal(t, log, got, "the log is left as it was")
	es, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, es, 1, "nothing made beside the log")

	// Once the log is removed, the restore goes through.
	require.NoError(t, os.Remove(walPath))
	desk.ok("restore", "--from", meta, dir)
	restored := &cli{t: t, store: dir, env: map[string]string{}}
	restored.ok("fsck")
	assert.Equal(t, desk.runIDs(), restored.runIDs())
}

// TestRestoreInterruptedAfterPlacingSaysSo: an interrupt that stops the
// pull after the restored store is in DIR exits 130 and says that the
// store is there and that wsctl pull takes the indexes in, as a pull that
// fails otherwise does; the store is whole and the pull goes through.
func TestRestoreInterruptedAfterPlacingSaysSo(t *testing.T) {
	srv, url, desk := demoDesk(t)
	desk.ok("replicate", "--once")

	dir := filepath.Join(t.TempDir(), "restored")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv.SetFault(func(r *http.Request) int {
		if _, err := os.Stat(filepath.Join(dir, wsstore.DBName)); err == nil {
			cancel() // the store is placed: the pull is under way
		}
		return 0
	})
	_, errOut, code := desk.runCtx(ctx, strings.NewReader(""), "restore", "--from", url, dir)
	srv.SetFault(nil)
	require.Equal(t, 130, code, "stderr: %s", errOut)
	assert.Contains(t, errOut, "wsctl.interrupted")
	assert.Contains(t, errOut, dir)
	assert.Contains(t, errOut, "wsctl pull")
	restored := &cli{t: t, store: dir, env: map[string]string{}}
	restored.ok("fsck")
	restored.ok("pull")
	assert.Equal(t, desk.runIDs(), restored.runIDs())
}

// TestRestoreVerifyReadsTheObjectStore: restore --verify reads the files
// back from the object store, not from the cache the restored store
// holds as its source held it: with every pack on the object store
// altered it exits 6 naming problems, where the store itself, reading
// its cache, stays whole.
func TestRestoreVerifyReadsTheObjectStore(t *testing.T) {
	srv, url, desk := demoDesk(t)
	desk.ok("replicate", "--once")

	ok := filepath.Join(t.TempDir(), "ok")
	desk.ok("restore", "--verify", "--from", url, ok)

	packs := srv.Keys("wsstore", "desk/data/")
	require.NotEmpty(t, packs)
	for _, k := range packs {
		b, found := srv.Object("wsstore", k)
		require.True(t, found)
		b[0] ^= 0xff
		srv.SetObject("wsstore", k, b)
	}
	dir := filepath.Join(t.TempDir(), "restored")
	errOut := desk.fails(6, "restore", "--verify", "--from", url, dir)
	assert.Contains(t, errOut, "problems found reading the restored store back")
	restored := &cli{t: t, store: dir, env: map[string]string{}}
	restored.ok("fsck") // its cache holds every object whole
}

// TestRestoreIntoADirItCannotMakeIsAMistake: a DIR restore cannot make or
// write in (a name too long for the file system, no permission, or no
// name at all) is the command
// line's mistake, exit status 2, as --store naming such a directory is
// for every other command; it was store.internal (exit status 1), an
// error in wsctl. Nothing is read from --from, which need not answer.
func TestRestoreIntoADirItCannotMakeIsAMistake(t *testing.T) {
	c := newCLI(t)
	from := "s3://wsstore/desk/meta?endpoint=http://127.0.0.1:1&region=us-east-1"
	long := filepath.Join(t.TempDir(), strings.Repeat("d", 300))
	dirs := []string{long, ""}
	if os.Geteuid() != 0 { // root writes whatever the permissions say
		locked := filepath.Join(t.TempDir(), "locked")
		require.NoError(t, os.Mkdir(locked, 0o555))
		dirs = append(dirs, locked)
	}
	for _, dir := range dirs {
		errOut := c.fails(2, "restore", "--from", from, dir)
		assert.Regexp(t, `store\.invalid_options|wsctl\.invalid_argument`, errOut, "%q", dir)
		assert.NotContains(t, errOut, "store.internal", "%q", dir)
	}
	assert.NoDirExists(t, c.store)
}
