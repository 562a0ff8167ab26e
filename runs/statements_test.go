package runs_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

// TestAppendAndCheckpointStatements counts the SQL statements of the
// chat shape's step, an append to the main draft and an explicit
// checkpoint: 15 and 7 (one more for a small file, which looks up the
// newest dictionary), whether the draft is 4 KB or 400 KB and whether 1
// or 169 earlier writes' re-encodings are queued. An append decides in
// its own transaction whether the file is large enough to stream (no read
// transaction before it), and a queued write reads the queue's bounds from
// its first and last rows.
func TestAppendAndCheckpointStatements(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	on := false
	var stmts []string
	trace := func(q string) {
		mu.Lock()
		defer mu.Unlock()
		if on {
			stmts = append(stmts, strings.Join(strings.Fields(q), " "))
		}
	}
	s := storetest.OpenStoreWith(t, wsstore.Options{Now: storetest.NewClock().Now, Index: index.Options{Trace: trace},
		// the background re-encoder stays out of the count
		CAS: cas.Options{ReencodeIdle: time.Hour}})
	off := false
	run, err := s.Runs.CreateRun(ctx, runs.CreateRequest{Chat: testChat, Profile: &runs.Profile{AutoCheckpoint: &off}})
	require.NoError(t, err)
	ws := s.Runs.Workspace(run.ID, runs.ModelScope)
	p := vfs.MustPath("output/main.md")
	para := []byte(strings.Repeat("The keeper lit the lamp at dusk and watched the ships pass. ", 40) + "\n")
	step := func() (write, checkpoint []string) {
		mu.Lock()
		on, stmts = true, nil
		mu.Unlock()
		_, err := ws.Write(ctx, p, para, vfs.WriteOptions{Mode: vfs.Append})
		require.NoError(t, err)
		mu.Lock()
		write, stmts = stmts, nil
		mu.Unlock()
		_, err = s.Runs.Checkpoint(ctx, run.ID, "round")
		require.NoError(t, err)
		mu.Lock()
		on, checkpoint = false, stmts
		mu.Unlock()
		return write, checkpoint
	}
	counts := map[string][2]int{}
	for i := range 170 {
		w, c := step()
		switch i {
		case 1, 169:
			key := fmt.Sprintf("%d KB, %d queued", (i+1)*len(para)>>10, i)
			counts[key] = [2]int{len(w), len(c)}
			if i == 169 {
				t.Logf("write:\n  %s\ncheckpoint:\n  %s", strings.Join(w, "\n  "), strings.Join(c, "\n  "))
			}
		}
	}
	assert.Equal(t, map[string][2]int{
		"4 KB, 1 queued":     {16, 7}, // a small file also looks up the newest dictionary
		"398 KB, 169 queued": {15, 7},
	}, counts, "statements of an append and a checkpoint")
	pending, err := s.Blobs.PendingReencodes(ctx)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, pending, 169)
}
