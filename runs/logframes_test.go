package runs_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

// logFrames returns the frames of the store's write-ahead log, as the
// log's index header says (mxFrame: a 32-bit integer in the machine's byte
// order at offset 16 of the -shm file).
func logFrames(t *testing.T, st *wsstore.Store) uint32 {
	t.Helper()
	b, err := os.ReadFile(st.DB.Path() + "-shm")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(b), 20)
	return binary.NativeEndian.Uint32(b[16:])
}

// TestWritePagesDoNotGrowWithWorkspace counts the pages a write with its
// automatic checkpoint adds to the log (each a 4 KiB frame): a one-line
// edit of a 4 KB file in a directory of 10 files, among 200, writes about
// as many as in a directory of 100 files among 2,000. Its pages are the
// leaves it inserts into, one or two per b-tree it touches, however many
// rows each b-tree holds, and its directory's new version is a patch. (A
// directory stored whole at every write takes it from 40 to 101.)
func TestWritePagesDoNotGrowWithWorkspace(t *testing.T) {
	ctx := context.Background()
	median := func(files int) int {
		// the background re-encoder stays out of the count
		st := storetest.OpenStoreWith(t, wsstore.Options{CAS: cas.Options{ReencodeIdle: time.Hour}})
		r, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: testChat})
		require.NoError(t, err)
		ws := st.Runs.Workspace(r.ID, runs.ModelScope)
		edits := make([]runs.Edit, files)
		for i := range edits {
			edits[i] = runs.Edit{Path: vfs.MustPath(fmt.Sprintf("output/pkg%02d/file%04d.go", i%20, i)),
				Content: fmt.Appendf(nil, "package pkg%02d\n\n// File %d of the project.\nconst N%d = %d\n", i%20, i, i, i)}
		}
		_, err = ws.Apply(ctx, edits)
		require.NoError(t, err)
		p := vfs.MustPath("output/pkg00/main.md")
		doc := make([]byte, 0, 8192)
		for i := 0; len(doc) < 4096; i++ {
			doc = fmt.Appendf(doc, "Paragraph %d: the keeper lit the lamp at dusk and watched the ships.\n", i)
		}
		var counts []int
		for i := range 60 {
			copy(doc[(i%50)*70:], fmt.Appendf(nil, "Paragraph %d: round %d", i%50, i))
			before := logFrames(t, st)
			fi, err := ws.Write(ctx, p, doc, vfs.WriteOptions{})
			require.NoError(t, err)
			require.NotEmpty(t, fi.Checkpoint)
			// A write that starts the log over (after a checkpoint
			// copied all of it) is left out: its frames begin at 0.
			if after := logFrames(t, st); after > before && i >= 10 {
				counts = append(counts, int(after-before))
			}
		}
		require.GreaterOrEqual(t, len(counts), 25, "writes that did not start the log over")
		slices.Sort(counts)
		return counts[len(counts)/2]
	}
	small, large := median(200), median(2000)
	t.Logf("log pages of a write with its checkpoint: %d among 200 files, %d among 2,000", small, large)
	assert.LessOrEqual(t, small, 40, "pages of a small write among 20 files")
	assert.LessOrEqual(t, large, small+4, "pages of the same write among 2,000 files")
}
