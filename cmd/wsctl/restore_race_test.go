package main

import (
	"context"
	"net/http"
	"path/filepath"
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
