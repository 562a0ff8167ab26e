package main

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"

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
