package archive_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/archive"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

// TestMergeSettlesRunsAndSpaces merges a later state of two runs and two
// actor spaces into a store holding an earlier one, the rows a merge keeps
// in memory and then on disk from the first: a run that went on (pruning
// checkpoints under its cap), a space that went on and a tail from an
// anchor come forward exactly as the writer holds them; a run and a space
// changed on both sides are conflicts and stay as they were here.
func TestMergeSettlesRunsAndSpaces(t *testing.T) { eachSpill(t, testMergeSettles) }

func testMergeSettles(t *testing.T) {
	ctx := context.Background()
	src := storetest.OpenStoreWith(t, wsstore.Options{Now: storetest.NewClock().Now})
	dst := storetest.OpenStoreWith(t, wsstore.Options{Now: storetest.NewClock().Now})
	prof := runs.DefaultProfile()
	prof.MaxCheckpoints = 4
	for _, id := range []string{"ahead", "parted"} {
		_, err := src.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "c"}, RunID: id, Profile: &prof})
		require.NoError(t, err)
	}
	write := func(st *wsstore.Store, run, name string, n int) {
		t.Helper()
		for i := range n {
			_, err := st.Runs.Workspace(run, runs.ModelScope).Write(ctx, vfs.MustPath("output/"+name),
				[]byte(fmt.Sprintf("%s, version %d\n%s", name, i, strings.Repeat("line\n", i))), vfs.WriteOptions{})
			require.NoError(t, err)
		}
	}
	upload := func(st *wsstore.Store, actor, name string, n int) {
		t.Helper()
		for i := range n {
			_, err := st.Actors.Upload(ctx, actor, name, strings.NewReader(fmt.Sprintf("%s %d", name, i)))
			require.NoError(t, err)
		}
	}
	write(src, "ahead", "a.md", 3)
	write(src, "parted", "p.md", 3)
	upload(src, "alice", "notes.txt", 3)
	upload(src, "bob", "notes.txt", 3)
	_, err := importFile(t, dst, exportFile(t, src, archive.Scope{All: true}), archive.Options{})
	require.NoError(t, err)

	write(src, "ahead", "a.md", 6) // past the cap: the checkpoints held here are pruned there
	upload(src, "alice", "more.txt", 4)
	write(src, "parted", "p.md", 1)
	write(dst, "parted", "p.md", 2)
	upload(src, "bob", "x.txt", 1)
	upload(dst, "bob", "y.txt", 1)
	before := view(t, dst)

	sum, err := importFile(t, dst, exportFile(t, src, archive.Scope{All: true}), archive.Options{Merge: true})
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"run ahead", "actor alice"}, sum.Updated)
	var conflicts []string
	for _, c := range sum.Conflicts {
		conflicts = append(conflicts, c.Kind+" "+c.ID)
	}
	assert.ElementsMatch(t, []string{"run parted", "actor bob"}, conflicts)
	have, want := view(t, dst), view(t, src)
	assert.Equal(t, want.Runs["ahead"], have.Runs["ahead"], "the run that went on is the writer's")
	assert.Len(t, have.Runs["ahead"].Checkpoints, 4, "pruned as the writer pruned")
	assert.Equal(t, want.Actors["alice"], have.Actors["alice"], "the space that went on is the writer's")
	assert.Equal(t, before.Runs["parted"], have.Runs["parted"], "a conflict leaves the run as it was")
	assert.Equal(t, before.Actors["bob"], have.Actors["bob"], "a conflict leaves the space as it was")

	// A tail from an anchor the store holds brings the run forward too.
	last, err := src.Journal.Last(ctx, nil, "ahead")
	require.NoError(t, err)
	write(src, "ahead", "a.md", 2)
	sum, err = importFile(t, dst, exportFile(t, src, archive.Scope{Runs: []string{"ahead"}, From: map[string]int64{"ahead": last}}), archive.Options{Merge: true})
	require.NoError(t, err)
	assert.Equal(t, []string{"run ahead"}, sum.Updated)
	assert.Equal(t, view(t, src).Runs["ahead"], view(t, dst).Runs["ahead"])
}
