package actors_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/actors"
	"github.com/wsstore/wsstore/archive"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/wserr"
)

// counted is the number of actor's versions the long way: its journal's
// rows that still hold a root.
func counted(t *testing.T, st *wsstore.Store, actor string) int64 {
	t.Helper()
	ctx := context.Background()
	var n int64
	require.NoError(t, st.DB.View(ctx, func(tx *index.Tx) error {
		return tx.GetContext(ctx, &n, `SELECT count(*) FROM actor_changes WHERE actor = ? AND root IS NOT NULL`, actor)
	}))
	return n
}

// kept is the count of versions actor's row keeps (-1: NULL, none kept).
func kept(t *testing.T, st *wsstore.Store, actor string) int64 {
	t.Helper()
	ctx := context.Background()
	var n *int64
	require.NoError(t, st.DB.View(ctx, func(tx *index.Tx) error {
		return tx.GetContext(ctx, &n, `SELECT versions FROM actor_spaces WHERE actor = ?`, actor)
	}))
	if n == nil {
		return -1
	}
	return *n
}

func requireVersionsCounted(t *testing.T, st *wsstore.Store, actor, what string) {
	t.Helper()
	got, err := st.Actors.Stats(context.Background(), actor)
	require.NoError(t, err)
	want := counted(t, st, actor)
	require.Equal(t, want, got.Versions, "%s: versions", what)
	require.Equal(t, want, kept(t, st, actor), "%s: the row's count", what)
}

// TestStatsVersionsFollowEveryChange: through 300 random uploads,
// deletes, deletes by prefix and gcs keeping 1 to 3 versions, the
// versions Stats answers from the space's row are the journal's rows
// that hold one, counted after every change; a space an archive brings
// into another store, and one a merging import moves forward, count
// theirs as well.
func TestStatsVersionsFollowEveryChange(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	r := rand.New(rand.NewPCG(3, 38))
	dirs := []string{"", "a/", "a/b/", "d/"}
	path := func() string { return dirs[r.IntN(len(dirs))] + []string{"x.md", "y.txt", "z"}[r.IntN(3)] }
	step := func(i int, actor string) {
		var what string
		var err error
		switch n := r.IntN(10); {
		case n < 6:
			p := path()
			what = "upload " + p
			_, err = st.Actors.Upload(ctx, actor, p, strings.NewReader(fmt.Sprint(r.IntN(5))))
		case n < 8:
			p := path()
			what = "delete " + p
			_, err = st.Actors.Delete(ctx, actor, p)
		case n < 9:
			p := dirs[r.IntN(len(dirs))] + "x"
			what = "delete prefix " + p
			_, err = st.Actors.DeleteByPrefix(ctx, actor, p)
		default:
			what = "gc"
			_, err = st.Actors.GC(ctx, actors.GCOptions{Actor: actor, KeepVersions: 1 + r.IntN(3)})
		}
		if err != nil {
			require.Contains(t, []wserr.Code{wserr.NotADirectory, wserr.PathIsDirectory, wserr.FileNotFound},
				wserr.CodeOf(err), "step %d %s: %v", i, what, err)
		}
		requireVersionsCounted(t, st, actor, fmt.Sprintf("step %d %s", i, what))
	}
	for i := range 300 {
		step(i, []string{"alice", "bob"}[i%2])
	}
	// A gc of every space at once.
	_, err := st.Actors.GC(ctx, actors.GCOptions{KeepVersions: 2})
	require.NoError(t, err)
	requireVersionsCounted(t, st, "alice", "gc of every space")
	requireVersionsCounted(t, st, "bob", "gc of every space")

	t.Run("Imported", func(t *testing.T) {
		var arc bytes.Buffer
		_, err := st.Archive.Export(ctx, &arc, archive.Scope{Actors: []string{"alice"}}, archive.Options{})
		require.NoError(t, err)
		other := openStore(t)
		_, err = other.Archive.Import(ctx, bytes.NewReader(arc.Bytes()), archive.Options{})
		require.NoError(t, err)
		require.Positive(t, counted(t, other, "alice"))
		requireVersionsCounted(t, other, "alice", "imported")

		// Moved forward by a merging import: the store's own count, and
		// the new changes' versions.
		for i := range 20 {
			step(i, "alice")
		}
		arc.Reset()
		_, err = st.Archive.Export(ctx, &arc, archive.Scope{Actors: []string{"alice"}}, archive.Options{})
		require.NoError(t, err)
		sum, err := other.Archive.Import(ctx, bytes.NewReader(arc.Bytes()), archive.Options{Merge: true})
		require.NoError(t, err)
		require.Contains(t, sum.Updated, "actor alice")
		requireVersionsCounted(t, other, "alice", "merged")
	})
}

// TestStatsVersionsNotCountedYet: a space whose row keeps no count of
// versions (NULL) answers its journal's count, and its next change, or a
// gc that prunes it, counts the journal and keeps the count again.
func TestStatsVersionsNotCountedYet(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	for i := range 6 {
		upload(t, st, "alice", "f.md", fmt.Sprint("v", i))
	}
	unset := func() {
		require.NoError(t, st.DB.Update(ctx, func(tx *index.Tx) error {
			_, err := tx.ExecContext(ctx, `UPDATE actor_spaces SET versions = NULL WHERE actor = 'alice'`)
			return err
		}))
	}
	unset()
	got, err := st.Actors.Stats(ctx, "alice")
	require.NoError(t, err)
	assert.EqualValues(t, 6, got.Versions)
	page, _, err := st.Actors.StatsPage(ctx, nil, "", 0)
	require.NoError(t, err)
	require.Len(t, page, 1)
	assert.EqualValues(t, 6, page[0].Versions)
	assert.EqualValues(t, -1, kept(t, st, "alice"))

	upload(t, st, "alice", "f.md", "v6")
	requireVersionsCounted(t, st, "alice", "counted by the next change")
	assert.EqualValues(t, 7, kept(t, st, "alice"))

	unset()
	rep, err := st.Actors.GC(ctx, actors.GCOptions{Actor: "alice", KeepVersions: 2})
	require.NoError(t, err)
	require.EqualValues(t, 5, rep.Pruned)
	requireVersionsCounted(t, st, "alice", "counted by a gc")
	assert.EqualValues(t, 2, kept(t, st, "alice"))
}

// TestStatsPageReadsNoJournal: a page of three actors' stats runs the
// same statements, and they read as many pages of the store, whether
// each actor made 10 changes or 1,000: it reads the spaces' rows, not
// their journals.
func TestStatsPageReadsNoJournal(t *testing.T) {
	ctx := context.Background()
	names := []string{"alice", "bob", "carol"}
	measure := func(changes int) (stmts []string, pages int) {
		var rec storetest.Statements
		st := storetest.OpenStoreWith(t, wsstore.Options{Index: index.Options{Trace: rec.Trace}})
		for i := range changes {
			for _, a := range names {
				_, err := st.Actors.Upload(ctx, a, fmt.Sprintf("d%d/f.md", i%7), strings.NewReader(fmt.Sprint(i)))
				require.NoError(t, err)
			}
		}
		var page []actors.Stats
		stmts = rec.Record(func() {
			var err error
			page, _, err = st.Actors.StatsPage(ctx, nil, "", 10)
			require.NoError(t, err)
		})
		require.Len(t, page, 3)
		for _, s := range page {
			require.EqualValues(t, changes, s.Versions)
		}
		// Replay each statement that reads the store: the page of spaces,
		// and any that reads one actor's rows, once per actor in turn.
		next := 0
		for _, q := range stmts {
			switch {
			case strings.Contains(q, "FROM actor_spaces WHERE actor > ?"):
				pages += storetest.PagesRead(t, st.DB.Path(), q, "", 11)
			case strings.Contains(q, "actor = ?"):
				pages += storetest.PagesRead(t, st.DB.Path(), q, names[next%len(names)])
				next++
			}
		}
		return stmts, pages
	}
	small, smallPages := measure(10)
	large, largePages := measure(1000)
	t.Logf("a stats page of 3 actors: %d statements, %d pages read after 10 changes each; %d, %d after 1,000",
		len(small), smallPages, len(large), largePages)
	assert.Equal(t, small, large, "statements of a stats page")
	require.Positive(t, smallPages)
	assert.LessOrEqual(t, largePages, smallPages+1, "pages read after 1,000 changes each")
	for _, q := range large {
		assert.NotContains(t, q, "actor_changes", "a stats page reads no journal rows")
	}
}
