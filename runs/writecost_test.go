package runs_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/cas/storagetest"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

// TestWriteCostThroughTheWorkspace counts the content store's storage
// calls per workspace change: a write, an append and a patch each insert
// one object, and an append or a patch reads the previous version once
// (the read that builds the new content) and hands it on rather than have
// it decoded again.
func TestWriteCostThroughTheWorkspace(t *testing.T) {
	ctx := context.Background()
	st, faults := storagetest.NewFaulty(cas.NewSQLiteStorage())
	s := storetest.OpenStoreWith(t, wsstore.Options{Now: storetest.NewClock().Now, CAS: cas.Options{Storage: st}})
	off := false
	run, err := s.Runs.CreateRun(ctx, runs.CreateRequest{Chat: testChat, Profile: &runs.Profile{AutoCheckpoint: &off}})
	require.NoError(t, err)
	ws := s.Runs.Workspace(run.ID, runs.ModelScope)
	p := vfs.MustPath("output/main.md")
	var doc strings.Builder
	for i := range 60 {
		fmt.Fprintf(&doc, "line %d of a 4 KB draft an agent grows round after round\n", i)
	}
	_, err = ws.Write(ctx, p, []byte(doc.String()), vfs.WriteOptions{})
	require.NoError(t, err)

	count := func() (inserts, reads int) {
		return faults.Calls(storagetest.Put) + faults.Calls(storagetest.PutAt), faults.Calls(storagetest.Get)
	}
	for round := range 10 {
		steps := []struct {
			name  string
			reads int
			do    func() error
		}{
			{"Write", 0, func() error {
				_, err := ws.Write(ctx, p, []byte(strings.Replace(doc.String(), "line 3 ", fmt.Sprintf("line 3 (round %d) ", round), 1)), vfs.WriteOptions{})
				return err
			}},
			{"Append", 1, func() error {
				_, err := ws.Write(ctx, p, fmt.Appendf(nil, "round %d appends\n", round), vfs.WriteOptions{Mode: vfs.Append})
				return err
			}},
			{"Patch", 1, func() error {
				_, err := ws.Patch(ctx, p, fmt.Sprintf("round %d appends", round), fmt.Sprintf("round %d patched", round), vfs.PatchOptions{})
				return err
			}},
		}
		for _, step := range steps {
			t.Run(fmt.Sprintf("%s%02d", step.name, round), func(t *testing.T) {
				i0, r0 := count()
				require.NoError(t, step.do())
				i1, r1 := count()
				assert.Equal(t, 1, i1-i0, "objects inserted")
				assert.Equal(t, step.reads, r1-r0, "whole reads of the previous version")
			})
		}
	}
}
