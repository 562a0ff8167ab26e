package archive_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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

// TestArchiveHoldsNoObjectList exports and imports stores of 3,000 and
// 30,000 small files: the live heap each takes does not grow with the
// count of objects, since the addresses an export plans and an import
// promises and verifies move to a scratch file on disk past a number of
// them, lowered here to 1,024 so that both stores pass it. With ten times
// the objects it grew by 1.7 MiB more for the export and 2.8 MiB for the
// import, where holding the addresses took it 4.9 MiB more for the export
// and 7.4 MiB for the import; the bounds, 3 and 5 MiB more, sit between.
// Fewer files would not tell the two apart: the addresses held take some
// 140 and 200 bytes an object.
// The stores train no zstd dictionary and re-encode in the background
// only when idle for an hour: a training's encoders and a second encoder
// for the re-encoding beside the import (8 MiB each) are the store's, not
// the archive's, and come or not with a count of small blobs or timing.
func TestArchiveHoldsNoObjectList(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 33,000 files")
	}
	defer archive.SetSpillAfter(1024)()
	ctx := context.Background()
	grew := func(files int) (exp, imp uint64) {
		src := storetest.OpenStoreWith(t, wsstore.Options{Now: storetest.NewClock().Now, CAS: noDicts})
		_, err := src.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "many"}, RunID: "many"})
		require.NoError(t, err)
		ws := src.Runs.Workspace("many", runs.ModelScope)
		// Directories of 50 files, 20 to a parent: every tree is small,
		// so the import's batches of trees weigh the same for both.
		const chunk = 3000
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
		path := filepath.Join(t.TempDir(), "archive.wsar")
		f, err := os.Create(path)
		require.NoError(t, err)
		var sum archive.Summary
		exp = storetest.HeapGrowth(func() {
			sum, err = src.Archive.Export(ctx, f, archive.Scope{All: true}, archive.Options{})
		})
		require.NoError(t, err)
		require.NoError(t, f.Close())
		require.GreaterOrEqual(t, sum.Blobs, int64(files))
		dst := storetest.OpenStoreWith(t, wsstore.Options{Now: storetest.NewClock().Now, CAS: noDicts})
		imp = storetest.HeapGrowth(func() {
			sum, err = importFile(t, dst, path, archive.Options{})
		})
		require.NoError(t, err)
		require.GreaterOrEqual(t, sum.Blobs, int64(files))
		t.Logf("%d files: export heap grew %.1f MiB, import %.1f MiB", files, float64(exp)/(1<<20), float64(imp)/(1<<20))
		return exp, imp
	}
	e1, i1 := grew(3000)
	e2, i2 := grew(30000)
	assert.Less(t, e2, e1+3<<20, "export heap with ten times the objects: holding their addresses took 4.9 MiB more")
	assert.Less(t, i2, i1+5<<20, "import heap with ten times the objects: holding their addresses took 7.4 MiB more")
}

var noDicts = cas.Options{DictTrainAfter: -1, ReencodeIdle: time.Hour}
