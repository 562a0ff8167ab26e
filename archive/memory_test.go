package archive_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/archive"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

// noise is an endless reader of pseudo-random bytes, n of them.
type noise struct {
	r *rand.ChaCha8
	n int64
}

func (z *noise) Read(p []byte) (int, error) {
	if z.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > z.n {
		p = p[:z.n]
	}
	z.r.Read(p)
	z.n -= int64(len(p))
	return len(p), nil
}

// TestMemoryBounded streams a large file through export and import and
// checks that the live heap stays far below its size. The size is 256
// MiB, or WSSTORE_ARCHIVE_TEST_MIB mebibytes (1024 for the 1 GiB
// store). A 256 MiB file grows it by 3–10 MiB, other tests loading both
// cores or not, where holding the archive took 266–324 MiB.
func TestMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("streams a large file")
	}
	mib := int64(256)
	if s := os.Getenv("WSSTORE_ARCHIVE_TEST_MIB"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		require.NoError(t, err)
		mib = n
	}
	size := mib << 20
	const limit = 64 << 20
	ctx := context.Background()
	src := storetest.OpenStoreWith(t, wsstore.Options{Now: storetest.NewClock().Now})
	_, err := src.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "big"}, RunID: "big"})
	require.NoError(t, err)
	_, err = src.Runs.Workspace("big", runs.HostScope).WriteFrom(ctx, vfs.MustPath("output/big.bin"),
		&noise{r: rand.NewChaCha8([32]byte{1}), n: size}, vfs.WriteOptions{})
	require.NoError(t, err)

	path := filepath.Join(t.TempDir(), "big.wsar")
	f, err := os.Create(path)
	require.NoError(t, err)
	var sum archive.Summary
	grew := storetest.HeapGrowth(func() {
		sum, err = src.Archive.Export(ctx, f, archive.Scope{All: true}, archive.Options{})
	})
	require.NoError(t, err)
	require.NoError(t, f.Close())
	assert.Greater(t, sum.ArchiveBytes, size)
	t.Logf("export of %d MiB: heap grew %.1f MiB at most", mib, float64(grew)/(1<<20))
	assert.Less(t, grew, uint64(limit), "export heap")

	dst := storetest.OpenStoreWith(t, wsstore.Options{Now: storetest.NewClock().Now})
	grew = storetest.HeapGrowth(func() {
		sum, err = importFile(t, dst, path, archive.Options{})
	})
	require.NoError(t, err)
	t.Logf("import of %d MiB: heap grew %.1f MiB at most", mib, float64(grew)/(1<<20))
	assert.Less(t, grew, uint64(limit), "import heap")
	fi, err := dst.Runs.Workspace("big", runs.HostScope).Stat(ctx, vfs.MustPath("output/big.bin"))
	require.NoError(t, err)
	assert.Equal(t, size, fi.Size)
}

// commitLarge creates run id in st and commits n messages of nearly
// runs.MaxMessageBytes each.
func commitLarge(t *testing.T, st *wsstore.Store, id string, n int) {
	t.Helper()
	ctx := context.Background()
	_, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "c"}, RunID: id})
	require.NoError(t, err)
	sink := runs.SinkFunc(func(context.Context, runs.CommitRequest) (json.RawMessage, error) { return nil, nil })
	for i := range n {
		body := make([]byte, runs.MaxMessageBytes*9/10)
		for j := range body {
			body[j] = 'a' + byte((i+j)%26)
		}
		_, err := st.Runs.Workspace(id, runs.ModelScope).Write(ctx, vfs.MustPath("output/main.md"), body, vfs.WriteOptions{})
		require.NoError(t, err)
		_, err = st.Runs.Commit(ctx, id, sink, runs.CommitOptions{})
		require.NoError(t, err)
	}
}

// exportFile exports scope of st to a new file and returns its path.
func exportFile(t *testing.T, st *wsstore.Store, scope archive.Scope) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "archive.wsar")
	f, err := os.Create(path)
	require.NoError(t, err)
	_, err = st.Archive.Export(context.Background(), f, scope, archive.Options{})
	require.NoError(t, err)
	require.NoError(t, f.Close())
	return path
}

// importFile imports the archive at path into st, read from the file as
// a host streams it.
func importFile(t *testing.T, st *wsstore.Store, path string, opt archive.Options) (archive.Summary, error) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	return st.Archive.Import(context.Background(), f, opt)
}

// TestMergeHoldsNoMessageItHas: a merging import that brings a run
// forward gathers the run's rows until its journals are compared; the
// messages of commits the store holds already are not among them. Twenty
// messages of nearly 4 MiB merge with the live heap growing by what a few
// rows take (12–14 MiB, other tests loading both cores or not), where
// holding the messages took 86 MiB.
func TestMergeHoldsNoMessageItHas(t *testing.T) {
	if testing.Short() {
		t.Skip("commits 72 MiB of messages")
	}
	ctx := context.Background()
	src := storetest.OpenStoreWith(t, wsstore.Options{Now: storetest.NewClock().Now})
	dst := storetest.OpenStoreWith(t, wsstore.Options{Now: storetest.NewClock().Now})
	const commits = 20
	commitLarge(t, src, "r", commits)
	scope := archive.Scope{Runs: []string{"r"}}
	_, err := importFile(t, dst, exportFile(t, src, scope), archive.Options{})
	require.NoError(t, err)
	_, err = src.Runs.Workspace("r", runs.ModelScope).Write(ctx, vfs.MustPath("output/later.md"), []byte("after the first import\n"), vfs.WriteOptions{})
	require.NoError(t, err)
	later := exportFile(t, src, scope)

	var sum archive.Summary
	grew := storetest.HeapGrowth(func() {
		sum, err = importFile(t, dst, later, archive.Options{Merge: true})
	})
	require.NoError(t, err)
	assert.Equal(t, []string{"run r"}, sum.Updated)
	got, err := dst.Runs.Workspace("r", runs.HostScope).Read(ctx, vfs.MustPath("output/later.md"), vfs.ReadOptions{})
	require.NoError(t, err)
	assert.Equal(t, "after the first import\n", string(got.Content))
	cs, err := dst.Runs.Commits(ctx, "r")
	require.NoError(t, err)
	require.Len(t, cs, commits)
	assert.Len(t, cs[commits-1].Message.Body, runs.MaxMessageBytes*9/10, "the messages held stay as they were")
	t.Logf("merge of a run with %d commits of %d MiB: heap grew %.1f MiB at most", commits, runs.MaxMessageBytes*9/10>>20, float64(grew)/(1<<20))
	assert.Less(t, grew, uint64(40<<20), "no message the store holds is gathered")
}

// TestMergeOfAnUnchangedRunReadsNoJournal: a merging import of a run the
// store holds as the archive does (same row, same journal), as a sync
// meets in another device's base segment, keeps none of the run's events
// and reads one of the store's, whatever the journal's length: the live
// heap grows by about 1.5 MiB for a run of 40,000 events, where holding
// both journals took 45 MiB.
func TestMergeOfAnUnchangedRunReadsNoJournal(t *testing.T) {
	if testing.Short() {
		t.Skip("journals 40,000 events")
	}
	src := storetest.OpenStoreWith(t, wsstore.Options{Now: storetest.NewClock().Now})
	dst := storetest.OpenStoreWith(t, wsstore.Options{Now: storetest.NewClock().Now})
	journalLarge(t, src, "r")
	path := exportFile(t, src, archive.Scope{Runs: []string{"r"}})
	_, err := importFile(t, dst, path, archive.Options{})
	require.NoError(t, err)

	var sum archive.Summary
	grew := storetest.HeapGrowth(func() { sum, err = importFile(t, dst, path, archive.Options{Merge: true}) })
	require.NoError(t, err)
	assert.Contains(t, sum.Unchanged, "run r")
	assert.Empty(t, sum.Updated)
	t.Logf("merge of an unchanged run of 40,000 events: heap grew %.1f MiB at most", float64(grew)/(1<<20))
	assert.Less(t, grew, uint64(12<<20), "neither journal held")
}

// journalLarge gives run id of st 40,000 events with payloads of about
// 330 bytes, as a long agent run journals its tool calls.
func journalLarge(t *testing.T, st *wsstore.Store, id string) {
	t.Helper()
	ctx := context.Background()
	_, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "c"}, RunID: id})
	require.NoError(t, err)
	note := strings.Repeat("a tool call's arguments, as a host journals them. ", 6)
	for batch := range 4 {
		require.NoError(t, st.DB.Update(ctx, func(tx *index.Tx) error {
			for i := range 10_000 {
				if _, err := st.Journal.Append(ctx, tx, id, journal.ToolCallRequested, journal.Info,
					map[string]any{"toolCallId": fmt.Sprintf("t%d-%d", batch, i), "note": note}); err != nil {
					return err
				}
			}
			return nil
		}))
	}
}

// TestMergeBringsForwardHoldingNoJournal: a merging import of a run that
// went on after the store's copy (its row changed, a file written, a
// checkpoint taken) compares the two journals as the archive's events
// arrive, a page of the store's at a time, and keeps only the events the
// store lacks: the live heap grows by about 1.7 MiB for a run of 40,000
// events, where holding both journals took 45 MiB.
func TestMergeBringsForwardHoldingNoJournal(t *testing.T) {
	if testing.Short() {
		t.Skip("journals 40,000 events")
	}
	ctx := context.Background()
	src := storetest.OpenStoreWith(t, wsstore.Options{Now: storetest.NewClock().Now})
	dst := storetest.OpenStoreWith(t, wsstore.Options{Now: storetest.NewClock().Now})
	journalLarge(t, src, "r")
	scope := archive.Scope{Runs: []string{"r"}}
	_, err := importFile(t, dst, exportFile(t, src, scope), archive.Options{})
	require.NoError(t, err)
	_, err = src.Runs.Workspace("r", runs.ModelScope).Write(ctx, vfs.MustPath("output/later.md"), []byte("after the first import\n"), vfs.WriteOptions{})
	require.NoError(t, err)
	later := exportFile(t, src, scope)

	var sum archive.Summary
	grew := storetest.HeapGrowth(func() { sum, err = importFile(t, dst, later, archive.Options{Merge: true}) })
	require.NoError(t, err)
	assert.Equal(t, []string{"run r"}, sum.Updated)
	got, err := dst.Runs.Workspace("r", runs.HostScope).Read(ctx, vfs.MustPath("output/later.md"), vfs.ReadOptions{})
	require.NoError(t, err)
	assert.Equal(t, "after the first import\n", string(got.Content))
	var want, have int64
	require.NoError(t, src.DB.View(ctx, func(tx *index.Tx) error { want, err = src.Journal.Last(ctx, tx, "r"); return err }))
	require.NoError(t, dst.DB.View(ctx, func(tx *index.Tx) error { have, err = dst.Journal.Last(ctx, tx, "r"); return err }))
	assert.Equal(t, want, have, "the events the store lacked are appended")
	t.Logf("merge bringing forward a run of 40,000 events: heap grew %.1f MiB at most", float64(grew)/(1<<20))
	assert.Less(t, grew, uint64(12<<20), "neither journal held")
}

// TestExportHoldsOneCommitAtATime: a run's commits are exported one row
// at a time; twenty messages of nearly 4 MiB (72 MiB) export with the
// live heap growing by what a few of them take (11–14 MiB, other tests
// loading both cores or not), where holding the run's messages took
// 83 MiB. The bound, 48 MiB, lies between.
func TestExportHoldsOneCommitAtATime(t *testing.T) {
	if testing.Short() {
		t.Skip("commits 72 MiB of messages")
	}
	ctx := context.Background()
	src := storetest.OpenStoreWith(t, wsstore.Options{Now: storetest.NewClock().Now})
	const commits = 20
	commitLarge(t, src, "r", commits)
	var err error
	var sum archive.Summary
	grew := storetest.HeapGrowth(func() {
		sum, err = src.Archive.Export(ctx, io.Discard, archive.Scope{All: true}, archive.Options{})
	})
	require.NoError(t, err)
	assert.Greater(t, sum.ArchiveBytes, int64(commits*runs.MaxMessageBytes*9/10), "every message exported")
	t.Logf("export of %d commits of %d MiB: heap grew %.1f MiB at most", commits, runs.MaxMessageBytes*9/10>>20, float64(grew)/(1<<20))
	assert.Less(t, grew, uint64(48<<20), "one commit's message at a time, not all 72 MiB of them")
}

// TestImportHoldsFewTreeEntries: an import stores trees in batches, and a
// batch is bounded by the bytes of its trees as well as by their number.
// A run of a 1,200-file directory with 128 checkpoints, each changing one
// file, has 128 versions of that directory, all in one batch of 256 trees
// by their number. With the batch's bytes lowered to 256 KiB (a tree here
// is some 100 KiB), the live heap grew by 8.6 MiB; held whole by their
// number, their decoded entries took it 26.5 MiB up, growing with the
// directory's width times the run's checkpoints. The bound, 16 MiB, lies
// between.
func TestImportHoldsFewTreeEntries(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 128 versions of a wide directory")
	}
	const files, versions = 1200, 128
	defer archive.SetTreeBatch(256, 256<<10)()
	ctx := context.Background()
	src := storetest.OpenStoreWith(t, wsstore.Options{Now: storetest.NewClock().Now})
	_, err := src.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "wide"}, RunID: "wide"})
	require.NoError(t, err)
	ws := src.Runs.Workspace("wide", runs.ModelScope)
	name := func(i int) vfs.Path { return vfs.MustPath(fmt.Sprintf("output/file_with_a_longish_name_%06d.txt", i)) }
	edits := make([]runs.Edit, files)
	for i := range edits {
		edits[i] = runs.Edit{Path: name(i), Content: []byte(strconv.Itoa(i))}
	}
	_, err = ws.Apply(ctx, edits)
	require.NoError(t, err)
	for v := range versions {
		_, err = ws.Write(ctx, name(v*7), []byte(fmt.Sprintf("version %d", v)), vfs.WriteOptions{})
		require.NoError(t, err)
	}
	path := exportFile(t, src, archive.Scope{All: true})

	dst := storetest.OpenStoreWith(t, wsstore.Options{Now: storetest.NewClock().Now})
	var sum archive.Summary
	grew := storetest.HeapGrowth(func() {
		sum, err = importFile(t, dst, path, archive.Options{})
	})
	require.NoError(t, err)
	require.Greater(t, sum.Trees, int64(versions))
	t.Logf("import of %d trees of %d entries: heap grew %.1f MiB at most", sum.Trees, files, float64(grew)/(1<<20))
	assert.Less(t, grew, uint64(16<<20), "trees held by their bytes, not only by their number")
}

// TestExportHoldsOneRunRowAtATime: an export reads a run's row as it
// exports it, not every run's row first, whether it exports the whole
// store (reading its runs in id order) or chats named (holding their
// runs' ids). Sixty-four runs whose host reference (chatRef) is 1 MiB
// each export with the live heap growing by a few of them (4–5 MiB, other
// tests loading both cores or not), not by all 64 MiB (71 MiB when the
// rows were held).
func TestExportHoldsOneRunRowAtATime(t *testing.T) {
	if testing.Short() {
		t.Skip("creates 64 runs of 1 MiB rows")
	}
	ctx := context.Background()
	src := storetest.OpenStoreWith(t, wsstore.Options{Now: storetest.NewClock().Now})
	const n = 64
	ref, err := json.Marshal(map[string]string{"note": strings.Repeat("r", runs.MaxChatRefBytes-64)})
	require.NoError(t, err)
	for i := range n {
		_, err := src.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: strconv.Itoa(i % 2)},
			ChatRef: ref, RunID: fmt.Sprintf("run_%03d", i)})
		require.NoError(t, err)
	}
	for name, scope := range map[string]archive.Scope{
		"all":   {All: true},
		"chats": {Chats: []string{"character:0", "character:1"}},
	} {
		var sum archive.Summary
		grew := storetest.HeapGrowth(func() {
			sum, err = src.Archive.Export(ctx, io.Discard, scope, archive.Options{})
		})
		require.NoError(t, err)
		require.Equal(t, n, sum.Runs)
		t.Logf("export (%s) of %d runs of 1 MiB rows: heap grew %.1f MiB at most", name, n, float64(grew)/(1<<20))
		assert.Less(t, grew, uint64(24<<20), "%s: a run's row at a time, not all 64 MiB of them", name)
	}
}

// TestExportReadsAPageOfSpacesAtATime: a whole-store export exports each
// actor space as the page of spaces holding it is read (EachSpaceRecord,
// 512 a page): the first space's journal is read before the second page
// of spaces, so the export holds a page of them, never the store's list
// (the manifest keeps their names, which it needs). Gathering them first
// read every page before any journal, and grew the heap by some 100 bytes
// a space more than the names.
func TestExportReadsAPageOfSpacesAtATime(t *testing.T) {
	var rec storetest.Statements
	s := storetest.OpenStoreWith(t, wsstore.Options{Now: storetest.NewClock().Now, Index: index.Options{Trace: rec.Trace}})
	const n = 1030 // three pages
	for i := range n {
		_, err := s.Actors.Upload(t.Context(), fmt.Sprintf("a%06d", i), "notes.md", strings.NewReader("the same note"))
		require.NoError(t, err)
	}
	stmts := rec.Record(func() {
		sum, err := s.Archive.Export(t.Context(), io.Discard, archive.Scope{All: true}, archive.Options{})
		require.NoError(t, err)
		require.Equal(t, n, sum.Actors)
	})
	var pages []int
	journal := -1 // the first read of a space's journal
	for i, q := range stmts {
		switch {
		case strings.Contains(q, "FROM actor_spaces") && strings.Contains(q, "WHERE actor > ?"):
			pages = append(pages, i)
		case strings.Contains(q, "FROM actor_changes") && journal < 0:
			journal = i
		}
	}
	require.Len(t, pages, 3, "spaces 512, 512 and 6 at a time")
	require.GreaterOrEqual(t, journal, 0, "a space's journal read")
	assert.Less(t, journal, pages[1], "the first page's spaces exported before the second page is read")
}

// TestImportHoldsAPageOfIDs: an import keeps the ids the manifest lists,
// to check that each one's row arrives, in a set that moves to disk past
// spillAfter (64 here), so importing 6,000 runs grows the live heap as
// much as importing 600. Run ids of 120 bytes make holding them show:
// the manifest's list and a map of them took about 1.8 MiB more for the
// 5,400 runs more (2.4 MiB for 7,200).
func TestImportHoldsAPageOfIDs(t *testing.T) {
	if testing.Short() {
		t.Skip("creates 6,600 runs")
	}
	defer archive.SetSpillAfter(64)()
	ctx := context.Background()
	growth := func(n int) uint64 {
		src := storetest.OpenStoreWith(t, wsstore.Options{Now: storetest.NewClock().Now})
		for i := range n {
			_, err := src.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "c"},
				RunID: fmt.Sprintf("r-%0118d", i)})
			require.NoError(t, err)
		}
		path := exportFile(t, src, archive.Scope{All: true})
		dst := storetest.OpenStoreWith(t, wsstore.Options{Now: storetest.NewClock().Now})
		var sum archive.Summary
		var err error
		grew := storetest.HeapGrowth(func() { sum, err = importFile(t, dst, path, archive.Options{}) })
		require.NoError(t, err)
		require.Equal(t, n, sum.Runs)
		return grew
	}
	small, large := growth(600), growth(6000)
	t.Logf("import: heap grew by %.2f MiB at 600 runs, %.2f MiB at 6,000", float64(small)/(1<<20), float64(large)/(1<<20))
	assert.Less(t, int64(large)-int64(small), int64(1<<20), "the heap grows with the runs")
}
