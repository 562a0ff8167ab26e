package runs_test

import (
	"context"
	"fmt"
	"strings"
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
// checkpoint: 9 and 6, whether the draft is 4 KB or 400 KB and whether
// 1 or 169 earlier writes' re-encodings are queued (a small version, too,
// is inserted raw in one statement: its job compresses it with the
// newest dictionary). An append decides in its own
// transaction whether the file is large enough to stream (no read
// transaction before it); the run's row comes with its chat's policy row;
// a version with no dictionary to settle is inserted unless stored, in
// one statement; the queue's insert returns its bounds; a directory
// stored whole checks no patch base, and a patch's base is checked by its
// own insert; the trees of a change list what they name in one
// statement.
func TestAppendAndCheckpointStatements(t *testing.T) {
	ctx := context.Background()
	var rec storetest.Statements
	s := storetest.OpenStoreWith(t, wsstore.Options{Now: storetest.NewClock().Now, Index: index.Options{Trace: rec.Trace},
		// the background re-encoder stays out of the count
		CAS: cas.Options{ReencodeIdle: time.Hour}})
	off := false
	run, err := s.Runs.CreateRun(ctx, runs.CreateRequest{Chat: testChat, Profile: &runs.Profile{AutoCheckpoint: &off}})
	require.NoError(t, err)
	ws := s.Runs.Workspace(run.ID, runs.ModelScope)
	p := vfs.MustPath("output/main.md")
	para := []byte(strings.Repeat("The keeper lit the lamp at dusk and watched the ships pass. ", 40) + "\n")
	step := func() (write, checkpoint []string) {
		write = rec.Record(func() {
			_, err := ws.Write(ctx, p, para, vfs.WriteOptions{Mode: vfs.Append})
			require.NoError(t, err)
		})
		checkpoint = rec.Record(func() {
			_, err := s.Runs.Checkpoint(ctx, run.ID, "round")
			require.NoError(t, err)
		})
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
		"4 KB, 1 queued":     {9, 6},
		"398 KB, 169 queued": {9, 6},
	}, counts, "statements of an append and a checkpoint")
	pending, err := s.Blobs.PendingReencodes(ctx)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, pending, 169)
}

// TestWriteStatements counts the SQL statements of a 4 KB file rewritten
// with a one-line edit under the default profile, its automatic checkpoint
// in the same transaction: 10, the first write's as the hundredth's. The
// version the write replaced counts at its stored size in the checkpoint,
// read by the statement that queues its re-encoding, and the write's event
// and its checkpoint's are appended by one statement. The log names each,
// so a statement that creeps back is seen.
func TestWriteStatements(t *testing.T) {
	ctx := context.Background()
	var rec storetest.Statements
	s := storetest.OpenStoreWith(t, wsstore.Options{Now: storetest.NewClock().Now, Index: index.Options{Trace: rec.Trace},
		CAS: cas.Options{ReencodeIdle: time.Hour}})
	run, err := s.Runs.CreateRun(ctx, runs.CreateRequest{Chat: testChat})
	require.NoError(t, err)
	ws := s.Runs.Workspace(run.ID, runs.ModelScope)
	p := vfs.MustPath("output/main.md")
	doc := make([]byte, 0, 8192)
	for i := 0; len(doc) < 4096; i++ {
		doc = fmt.Appendf(doc, "Paragraph %d: the keeper lit the lamp at dusk and watched the ships.\n", i)
	}
	_, err = ws.Write(ctx, p, doc, vfs.WriteOptions{})
	require.NoError(t, err)
	counts := map[int]int{}
	var stmts []string
	for i := range 100 {
		copy(doc[(i%50)*70:], fmt.Appendf(nil, "Paragraph %d: round %d", i%50, i))
		stmts = rec.Record(func() {
			fi, err := ws.Write(ctx, p, doc, vfs.WriteOptions{})
			require.NoError(t, err)
			require.NotEmpty(t, fi.Checkpoint)
		})
		if i == 0 || i == 99 {
			counts[i+1] = len(stmts)
		}
	}
	t.Logf("write with its checkpoint:\n  %s", strings.Join(stmts, "\n  "))
	assert.Equal(t, map[int]int{1: 10, 100: 10}, counts, "statements of a write and its automatic checkpoint")
}

// TestApplyReadsEachDirectoryOnce: a batch whose edits interleave
// directories too wide for the tree cache to hold together reads each
// directory a bounded number of times, not once per edit: its lookups go
// in path order.
func TestApplyReadsEachDirectoryOnce(t *testing.T) {
	ctx := context.Background()
	var rec storetest.Statements
	s := storetest.OpenStoreWith(t, wsstore.Options{Now: storetest.NewClock().Now, Index: index.Options{Trace: rec.Trace},
		CAS: cas.Options{ReencodeIdle: time.Hour}})
	run, err := s.Runs.CreateRun(ctx, runs.CreateRequest{Chat: testChat})
	require.NoError(t, err)
	ws := s.Runs.Workspace(run.ID, runs.ModelScope)
	const dirs, wide = 3, 6000 // 18,000 entries: more than the cache holds
	var edits []runs.Edit
	for d := range dirs {
		for i := range wide {
			edits = append(edits, runs.Edit{Path: vfs.MustPath(fmt.Sprintf("output/d%d/f%05d.md", d, i)), Content: []byte(fmt.Sprint(d, i))})
		}
	}
	_, err = ws.Apply(ctx, edits)
	require.NoError(t, err)

	edits = edits[:0]
	for i := range 300 {
		edits = append(edits, runs.Edit{Path: vfs.MustPath(fmt.Sprintf("output/d%d/new%03d.md", i%dirs, i)), Content: []byte(fmt.Sprint(i))})
	}
	stmts := rec.Record(func() {
		_, err = ws.Apply(ctx, edits)
		require.NoError(t, err)
	})
	reads := 0
	for _, q := range stmts {
		if strings.Contains(q, "FROM trees") {
			reads++
		}
	}
	// Each pass (the lookups before the transaction and in it, the new
	// trees, the checkpoint's diff) reads each directory on the changed
	// paths, and its parents, about once; 620 when each edit read its own.
	assert.Less(t, reads, 10*dirs, "tree reads for 300 interleaved edits over %d wide directories", dirs)
}

// TestSearchStopsAtMaxFiles counts the tree reads of a search bounded by
// SearchOptions.MaxFiles: once it holds that many files it reads no more
// directories, so its cost does not grow with the rest of the workspace.
func TestSearchStopsAtMaxFiles(t *testing.T) {
	ctx := context.Background()
	var rec storetest.Statements
	// A cache of one entry makes every directory a read of the index.
	s := storetest.OpenStoreWith(t, wsstore.Options{Now: storetest.NewClock().Now, Index: index.Options{Trace: rec.Trace}, TreeCacheEntries: 1})
	run, err := s.Runs.CreateRun(ctx, runs.CreateRequest{Chat: testChat})
	require.NoError(t, err)
	ws := s.Runs.Workspace(run.ID, runs.ModelScope)
	var edits []runs.Edit
	for i := range 60 {
		edits = append(edits, runs.Edit{Path: vfs.MustPath(fmt.Sprintf("output/d%02d/notes.md", i)), Content: fmt.Appendf(nil, "the lamp at dusk, night %d\n", i)})
	}
	_, err = ws.Apply(ctx, edits)
	require.NoError(t, err)

	var hits []vfs.Hit
	stmts := rec.Record(func() {
		hits, err = hitsOf(ws.Search(ctx, "lamp", vfs.SearchOptions{MaxFiles: 3}))
		require.NoError(t, err)
	})
	assert.Len(t, hits, 3)
	trees := 0
	for _, q := range stmts {
		if strings.Contains(q, "FROM trees") {
			trees++
		}
	}
	assert.LessOrEqual(t, trees, 8, "tree reads of a search that stops at 3 files of 60 directories")
}
