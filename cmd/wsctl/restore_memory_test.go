package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/remote/s3fake"
	"github.com/wsstore/wsstore/runs"
)

// TestRestoreHoldsAPageOfRuns: restore counts the runs it restored a
// page at a time, so restoring 20,000 runs grows the live heap by about
// what restoring 20 does, where listing them whole held every run's row,
// its chat reference of 1,000 bytes included (40 MB for 20,001 runs).
// Counting a page at a time grows it by 2.5–5 MB (the database's page
// index and what opening it reads), other tests loading both cores or
// not: the bound, 16 MiB, sits between.
func TestRestoreHoldsAPageOfRuns(t *testing.T) {
	awsEnv(t)
	srv := s3fake.New("wsstore")
	t.Cleanup(srv.Close)
	defer debug.SetGCPercent(debug.SetGCPercent(1))
	ctx := context.Background()
	ref := json.RawMessage(`"` + strings.Repeat("r", 1000) + `"`)
	growth := func(n int) uint64 {
		c := newCLI(t)
		st := c.open()
		_, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "first"}, RunID: "run_first", ChatRef: ref})
		require.NoError(t, err)
		require.NoError(t, st.Close())
		copyRuns(t, c, "run_first", n)
		meta := "s3://wsstore/" + fmt.Sprint(n) + "/meta?endpoint=" + srv.URL + "&region=us-east-1"
		c.ok("replicate", "--once", "--to", meta)
		least := uint64(math.MaxUint64)
		for range 2 {
			var out strings.Builder
			dir := filepath.Join(t.TempDir(), "restored")
			g := storetest.HeapGrowth(func() {
				require.NoError(t, runRestore(ctx, restoreOptions{globals: globals{out: &out, errOut: io.Discard}, from: meta}, []string{dir}))
			})
			require.Contains(t, out.String(), fmt.Sprintf("restore: %d runs", n+1), "every run is counted")
			least = min(least, g)
		}
		return least
	}
	small, large := growth(20), growth(20000)
	t.Logf("heap growth of restore: %d bytes for 21 runs, %d for 20,001", small, large)
	assert.Less(t, large, small+16<<20, "heap growth restoring 20,001 runs")
}
