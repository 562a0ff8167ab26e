package archive_test

import (
	"context"
	"fmt"
	"runtime/debug"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/archive"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

// TestArchiveHoldsNoObjectList exports and imports stores of 5,000 and
// 50,000 small files: the heap each takes does not grow with the count of
// objects, since the addresses an export plans and an import promises and
// verifies move to a scratch file on disk past a few MiB. (Holding them
// took the heap 11–15 MiB further up for the larger store.)
// The stores train no zstd dictionary and re-encode in the background
// only when idle for an hour: a training's encoders and a second encoder
// for the re-encoding beside the import (8 MiB each) are the store's, not
// the archive's, and come or not with a count of small blobs or timing.
func TestArchiveHoldsNoObjectList(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 55,000 files")
	}
	ctx := context.Background()
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	grew := func(files int) (exp, imp uint64) {
		src := storetest.OpenStoreWith(t, wsstore.Options{Now: storetest.NewClock().Now, CAS: noDicts})
		_, err := src.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "many"}, RunID: "many"})
		require.NoError(t, err)
		ws := src.Runs.Workspace("many", runs.ModelScope)
		// Directories of 50 files, 20 to a parent: every tree is small,
		// so the import's batches of trees weigh the same for both.
		const chunk = 5000
		for c := 0; c < files; c += chunk {
			edits := make([]runs.Edit, chunk)
			for j := range edits {
				i := c + j
				edits[j] = runs.Edit{Path: vfs.MustPath(fmt.Sprintf("output/d%02d/s%02d/f%02d.txt", i/1000, i/50%20, i%50)),
					Content: fmt.Appendf(nil, "file %d\n", i)}
			}
			_, err = ws.Apply(ctx, edits)
			require.NoError(t, err)
		}
		path := exportFile(t, src, archive.Scope{All: true})
		var sum archive.Summary
		exp = heapPeak(t, func() {
			sum, err = src.Archive.Export(ctx, discard{}, archive.Scope{All: true}, archive.Options{})
		})
		require.NoError(t, err)
		require.GreaterOrEqual(t, sum.Blobs, int64(files))
		dst := storetest.OpenStoreWith(t, wsstore.Options{Now: storetest.NewClock().Now, CAS: noDicts})
		imp = heapPeak(t, func() {
			sum, err = importFile(t, dst, path, archive.Options{})
		})
		require.NoError(t, err)
		require.GreaterOrEqual(t, sum.Blobs, int64(files))
		t.Logf("%d files: export heap grew %.1f MiB, import %.1f MiB", files, float64(exp)/(1<<20), float64(imp)/(1<<20))
		return exp, imp
	}
	e1, i1 := grew(5000)
	e2, i2 := grew(50000)
	assert.Less(t, e2, e1+8<<20, "export heap with ten times the objects: holding their addresses took 11–15 MiB more")
	assert.Less(t, i2, i1+8<<20, "import heap with ten times the objects: holding their addresses took 11–15 MiB more")
}

var noDicts = cas.Options{DictTrainAfter: -1, ReencodeIdle: time.Hour}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
