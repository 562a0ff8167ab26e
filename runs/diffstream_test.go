package runs_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/checkpoint"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

// TestDiffFuncHoldsNoDiff: a diff passed a file at a time (DiffFunc, which
// wsctl diff prints from) takes a heap that does not grow with the files
// it passes: 4,000 and 40,000 added files grow it alike, where the whole
// diff held (Diff) grows with them.
func TestDiffFuncHoldsNoDiff(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 44,000 files")
	}
	ctx := context.Background()
	measure := func(files int) (streamed, held uint64) {
		s := storetest.OpenStoreWith(t, wsstore.Options{Now: storetest.NewClock().Now})
		_, err := s.Runs.CreateRun(ctx, runs.CreateRequest{Chat: testChat, RunID: "wide"})
		require.NoError(t, err)
		ws := s.Runs.Workspace("wide", runs.ModelScope)
		from, err := s.Runs.Checkpoint(ctx, "wide", "before")
		require.NoError(t, err)
		const chunk = 4000
		for c := 0; c < files; c += chunk {
			edits := make([]runs.Edit, chunk)
			for j := range edits {
				i := c + j
				edits[j] = runs.Edit{Path: vfs.MustPath(fmt.Sprintf("output/d%03d/f%02d.md", i/50, i%50)), Content: fmt.Appendf(nil, "line one of file %d\nline two\n", i)}
			}
			_, err = ws.Apply(ctx, edits)
			require.NoError(t, err)
		}
		n := 0
		streamed = storetest.HeapGrowth(func() {
			err = s.Runs.DiffFunc(ctx, "wide", from.Seq, runs.Live, runs.DiffOptions{}, func(d checkpoint.FileDiff) error {
				n++
				return nil
			})
		})
		require.NoError(t, err)
		require.Equal(t, files, n)
		var all []checkpoint.FileDiff
		held = storetest.HeapGrowth(func() {
			all, err = s.Runs.Diff(ctx, "wide", from.Seq, runs.Live, runs.DiffOptions{})
		})
		require.NoError(t, err)
		require.Len(t, all, files)
		t.Logf("%d files: the diff streamed grew the heap %.1f MiB, held %.1f MiB", files, float64(streamed)/(1<<20), float64(held)/(1<<20))
		return streamed, held
	}
	s1, h1 := measure(4000)
	s2, h2 := measure(40000)
	assert.Less(t, s2, s1+4<<20, "streamed with ten times the files")
	assert.Greater(t, h2, h1+8<<20, "held with ten times the files: the measure sees a diff held")
}
