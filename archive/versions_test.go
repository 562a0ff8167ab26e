package archive_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/archive"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

// blobRecords reads every blob row of s by address.
func blobRecords(t *testing.T, s *wsstore.Store) map[cas.Hash]cas.BlobRecord {
	t.Helper()
	out := map[cas.Hash]cas.BlobRecord{}
	require.NoError(t, s.DB.View(context.Background(), func(tx *index.Tx) error {
		return s.Blobs.EachBlobRecord(context.Background(), tx, func(r cas.BlobRecord) error {
			out[r.Hash] = r
			return nil
		})
	}))
	return out
}

// drafts fills s with run r1, whose draft has 41 versions (40 of them
// checkpointed, the last one live) and whose log has 20, and an actor
// space whose report has 20, and returns the address of every version.
func drafts(t *testing.T, s *wsstore.Store) map[cas.Hash]bool {
	t.Helper()
	ctx := context.Background()
	_, err := s.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "c1"}, RunID: "r1"})
	require.NoError(t, err)
	write := func(p, body string) {
		t.Helper()
		_, err := s.Runs.Workspace("r1", runs.HostScope).Write(ctx, vfs.MustPath(p), []byte(body), vfs.WriteOptions{})
		require.NoError(t, err)
	}
	var draft, log, weekly string
	for i := range 40 {
		draft += fmt.Sprintf("Paragraph %d of the draft: %x\n", i, random(uint64(i), 150))
		write("output/draft.md", draft)
		if i%2 == 0 {
			log += fmt.Sprintf("step %d: %x\n", i, random(uint64(100+i), 60))
			write("output/notes/log.md", log)
		}
		_, err := s.Runs.Checkpoint(ctx, "r1", "step")
		require.NoError(t, err)
	}
	write("output/draft.md", draft+"The end.\n")
	for i := range 20 {
		weekly += fmt.Sprintf("week %d: %x\n", i, random(uint64(200+i), 100))
		_, err := s.Actors.Upload(ctx, "alice", "reports/weekly.md", strings.NewReader(weekly))
		require.NoError(t, err)
	}
	_, err = s.Blobs.Reencode(ctx, 0)
	require.NoError(t, err)

	versions := map[cas.Hash]bool{}
	v := view(t, s)
	for _, r := range v.Runs {
		for _, at := range append(r.AtEach, r.Files) {
			for _, h := range at {
				versions[h] = true
			}
		}
	}
	for _, a := range v.Actors {
		a := a.(map[string]any)
		for _, at := range append(a["versions"].([]map[string]cas.Hash), a["files"].(map[string]cas.Hash)) {
			for _, h := range at {
				versions[h] = true
			}
		}
	}
	require.Len(t, versions, 41+20+20+1) // and the run's input
	return versions
}

// TestImportStoresDeltas exports a run whose files have many versions,
// imports the archive into an empty store and closes it: the
// re-encodings the import queued leave the imported versions stored as
// the source store keeps them, the older ones deltas against newer ones,
// every version reads back the same, and fsck finds the store sound.
// Without dictionaries the two stores hold every version in the same
// form, byte for byte; with them, the whole forms a delta must beat
// depend on when a dictionary was trained, so only the bytes are close.
func TestImportStoresDeltas(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cas   cas.Options
		exact bool
	}{
		// An idle time of an hour keeps the background step out, so the
		// queue holds what the import queued until Close drains it.
		{"NoDictionary", cas.Options{InlineMax: 64 << 10, DictMax: -1, ReencodeIdle: time.Hour}, true},
		{"Defaults", cas.Options{InlineMax: 64 << 10, ReencodeIdle: time.Hour}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			opts := wsstore.Options{Now: storetest.NewClock().Now, CAS: tc.cas}
			src := storetest.OpenStoreWith(t, opts)
			versions := drafts(t, src)
			arc, _ := export(t, src, archive.Scope{All: true})

			// deltas counts the versions s keeps as deltas, and the bytes
			// all of them take.
			deltas := func(s *wsstore.Store) (n int, stored int64, recs map[cas.Hash]cas.BlobRecord) {
				recs = blobRecords(t, s)
				for h := range versions {
					r, ok := recs[h]
					require.True(t, ok, "version %s stored", h.Short())
					if r.Codec == cas.CodecDelta {
						n++
					}
					stored += r.Stored
				}
				return n, stored, recs
			}
			srcDeltas, srcStored, want := deltas(src)
			// Actor uploads store each version whole: the run's 61
			// versions of two files make the deltas.
			require.Greater(t, srcDeltas, 40, "the source store keeps its histories as deltas")

			dir := t.TempDir()
			dst, err := wsstore.Open(ctx, dir, opts)
			require.NoError(t, err)
			_, err = dst.Archive.Import(ctx, bytes.NewReader(arc), archive.Options{})
			require.NoError(t, err)
			pending, err := dst.Blobs.PendingReencodes(ctx)
			require.NoError(t, err)
			_, wholeStored, _ := deltas(dst)
			require.NoError(t, dst.Close())
			dst, err = wsstore.Open(ctx, dir, opts)
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, dst.Close()) })
			storetest.RequireSound(t, dst)

			gotDeltas, gotStored, got := deltas(dst)
			t.Logf("%d versions: source %d deltas, %d bytes stored; imported %d bytes whole, %d jobs queued; after Close %d deltas, %d bytes",
				len(versions), srcDeltas, srcStored, wholeStored, pending, gotDeltas, gotStored)
			// One job per changed file per checkpoint, and the live draft.
			assert.Equal(t, 40+20-2+1, pending, "the import queued a re-encoding per version replaced")
			pending, err = dst.Blobs.PendingReencodes(ctx)
			require.NoError(t, err)
			assert.Zero(t, pending, "Close ran every queued re-encoding")
			if tc.exact {
				for h := range versions {
					w, g := want[h], got[h]
					assert.Equal(t, w.Codec, g.Codec, "version %s: codec", h.Short())
					assert.Equal(t, w.Base, g.Base, "version %s: base", h.Short())
					assert.Equal(t, w.Stored, g.Stored, "version %s: stored bytes", h.Short())
				}
				assert.Equal(t, srcStored, gotStored)
			} else {
				assert.Greater(t, gotDeltas, 40, "the imported histories are deltas")
				assert.LessOrEqual(t, gotStored, srcStored+srcStored/4, "the imported versions take about what they take in the source")
			}
			assert.Less(t, gotStored, wholeStored/4, "far less than stored whole")
			for h := range versions {
				b, err := dst.Blobs.ReadAll(ctx, h)
				require.NoError(t, err)
				assert.Equal(t, h, cas.Sum(b), "version %s reads back", h.Short())
			}
			assert.Equal(t, view(t, src), view(t, dst), "every file at every checkpoint and version, every event")

			// Importing again adds nothing and queues nothing.
			sum, err := dst.Archive.Import(ctx, bytes.NewReader(arc), archive.Options{})
			require.NoError(t, err)
			assert.Zero(t, sum.NewObjects)
			pending, err = dst.Blobs.PendingReencodes(ctx)
			require.NoError(t, err)
			assert.Zero(t, pending)
		})
	}
}

// TestMergeImportStoresDeltas brings a run forward with a merging import:
// the versions its new checkpoints replace, the last one the receiving
// store already held among them, end up deltas as in the source.
func TestMergeImportStoresDeltas(t *testing.T) {
	ctx := context.Background()
	opts := wsstore.Options{Now: storetest.NewClock().Now, CAS: cas.Options{InlineMax: 64 << 10, DictMax: -1, ReencodeIdle: time.Hour}}
	src := storetest.OpenStoreWith(t, opts)
	dst := storetest.OpenStoreWith(t, opts)
	_, err := src.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "c1"}, RunID: "r1"})
	require.NoError(t, err)
	var draft string
	step := func(i int) {
		draft += fmt.Sprintf("Paragraph %d of the draft: %x\n", i, random(uint64(i), 150))
		_, err := src.Runs.Workspace("r1", runs.HostScope).Write(ctx, vfs.MustPath("output/draft.md"), []byte(draft), vfs.WriteOptions{})
		require.NoError(t, err)
		_, err = src.Runs.Checkpoint(ctx, "r1", "step")
		require.NoError(t, err)
	}
	for i := range 10 {
		step(i)
	}
	arc, _ := export(t, src, archive.Scope{Runs: []string{"r1"}})
	_, err = dst.Archive.Import(ctx, bytes.NewReader(arc), archive.Options{})
	require.NoError(t, err)
	_, err = dst.Blobs.Reencode(ctx, 0)
	require.NoError(t, err)
	for i := 10; i < 30; i++ {
		step(i)
	}
	_, err = src.Blobs.Reencode(ctx, 0)
	require.NoError(t, err)
	arc, _ = export(t, src, archive.Scope{Runs: []string{"r1"}})
	sum, err := dst.Archive.Import(ctx, bytes.NewReader(arc), archive.Options{Merge: true})
	require.NoError(t, err)
	assert.Equal(t, []string{"run r1"}, sum.Updated)
	pending, err := dst.Blobs.PendingReencodes(ctx)
	require.NoError(t, err)
	assert.Equal(t, 20, pending, "one re-encoding per version the new checkpoints replace")
	_, err = dst.Blobs.Reencode(ctx, 0)
	require.NoError(t, err)

	want, got := blobRecords(t, src), blobRecords(t, dst)
	deltas := 0
	seen := map[cas.Hash]bool{}
	for _, at := range view(t, src).Runs["r1"].AtEach {
		h := at["output/draft.md"]
		if h.IsZero() || seen[h] {
			continue
		}
		seen[h] = true
		assert.Equal(t, want[h].Codec, got[h].Codec, "version %s: codec", h.Short())
		assert.Equal(t, want[h].Stored, got[h].Stored, "version %s: stored bytes", h.Short())
		if got[h].Codec == cas.CodecDelta {
			deltas++
		}
	}
	assert.Equal(t, 29, deltas, "every version of the draft but the newest is a delta")
	assert.Equal(t, view(t, src), view(t, dst))
}
