package synctests_test

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/remote"
	"github.com/wsstore/wsstore/remote/replica"
	"github.com/wsstore/wsstore/remote/s3fake"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

// awsTestEnv points the AWS SDK at the test credentials (s3fake.TestEnv).
func awsTestEnv(t *testing.T) { s3fake.TestEnv(t) }

// writeRuns writes n runs named prefix-NN in chat, each with a few
// checkpointed edits; every tenth run also holds a file large enough to
// be chunked.
func writeRuns(t *testing.T, st *wsstore.Store, chat, prefix string, n int) {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		id := fmt.Sprintf("%s-%02d", prefix, i)
		_, err := st.Runs.CreateRun(ctx, runs.CreateRequest{
			Chat:   runs.ChatKey{Kind: "character", StableChatID: chat},
			RunID:  id,
			Inputs: map[string][]byte{"prompt_snapshot.json": []byte(fmt.Sprintf(`{"run":%q}`, id))},
		})
		require.NoError(t, err)
		ws := st.Runs.Workspace(id, runs.ModelScope)
		main := vfs.MustPath("output/main.md")
		_, err = ws.Write(ctx, main, []byte(fmt.Sprintf("# %s\n\nThe keeper climbs the tower.\n", id)), vfs.WriteOptions{})
		require.NoError(t, err)
		_, err = ws.Patch(ctx, main, "climbs the tower", "climbs the tower in the storm", vfs.PatchOptions{})
		require.NoError(t, err)
		_, err = ws.Write(ctx, vfs.MustPath("output/notes/"+id+".txt"), bytes.Repeat([]byte(id+" note\n"), 40), vfs.WriteOptions{})
		require.NoError(t, err)
		if i%10 == 9 {
			big := make([]byte, 5<<20)
			rnd := rand.NewChaCha8([32]byte{byte(i)})
			_, _ = rnd.Read(big)
			_, err = ws.Write(ctx, vfs.MustPath("output/big.bin"), big, vfs.WriteOptions{})
			require.NoError(t, err)
		}
		_, err = st.Runs.Checkpoint(ctx, id, "draft")
		require.NoError(t, err)
	}
}

// contents is every file at every checkpoint of every run, and every
// run's journal, keyed "run/cp/path" and "run/events.jsonl".
func contents(t *testing.T, st *wsstore.Store) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	rs, err := st.Runs.Runs(ctx, runs.ListQuery{})
	require.NoError(t, err)
	for _, r := range rs {
		cps, err := st.Checkpoints.List(ctx, r.ID)
		require.NoError(t, err)
		for _, cp := range cps {
			fsys := st.Trees.FS(ctx, cp.Root)
			require.NoError(t, fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return err
				}
				b, err := fs.ReadFile(fsys, p)
				if err != nil {
					return fmt.Errorf("%s %s %s: %w", r.ID, cp.ID, p, err)
				}
				out[r.ID+"/"+cp.ID+"/"+p] = string(b)
				return nil
			}))
		}
		var ev bytes.Buffer
		require.NoError(t, st.Journal.Export(ctx, r.ID, &ev))
		out[r.ID+"/events.jsonl"] = ev.String()
	}
	return out
}

func keys(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// TestReplicateRestore: device A writes 20 runs on a remote tier, pushes
// its blobs and replicates its database through Litestream; device B
// restores the database from nothing, opens it without naming the tier
// (the store recorded it), and with no byte cached reads every file at
// every checkpoint and every journal from the object store, equal to A's.
func TestReplicateRestore(t *testing.T) {
	awsTestEnv(t)
	m := s3fake.StartMoto(t)
	m.CreateBucket("wsstore")
	ctx := context.Background()
	blobsURL := "s3://wsstore/blobs?endpoint=" + m.URL
	metaURL := "s3://wsstore/meta?endpoint=" + m.URL

	dirA := t.TempDir()
	a, err := wsstore.Open(ctx, dirA, wsstore.Options{Blobs: blobsURL})
	require.NoError(t, err)
	defer a.Close()
	writeRuns(t, a, "chat-a", "run-a", 20)
	_, err = a.Remote.Push(ctx, a.DB)
	require.NoError(t, err)
	owner, err := remote.ReplicaOwnerOf(ctx, a.DB)
	require.NoError(t, err)
	rep, err := replica.Start(ctx, a.DB.Path(), metaURL, replica.Options{Owner: owner})
	require.NoError(t, err)
	require.NoError(t, rep.Sync(ctx))
	require.NoError(t, rep.Close(ctx))
	want := contents(t, a)
	require.Len(t, want, 18*17+2*23, "20 journals and every file of every checkpoint: 5 checkpoints of 16 files in all, 6 of 22 where a big file was written")

	dirB := t.TempDir()
	require.NoError(t, replica.Restore(ctx, metaURL, filepath.Join(dirB, wsstore.DBName), replica.Options{}))
	b, err := wsstore.Open(ctx, dirB, wsstore.Options{})
	require.NoError(t, err)
	defer b.Close()
	require.NotNil(t, b.Remote, "the restored store uses the tier it recorded")
	evicted, err := b.Remote.Evict(ctx, b.DB)
	require.NoError(t, err)
	require.Greater(t, evicted, int64(0), "nothing is read from a cache")
	got := contents(t, b)
	assert.Equal(t, keys(want), keys(got))
	for k, v := range want {
		require.True(t, v == got[k], "%s differs", k)
	}
	fr, err := b.Fsck(ctx, nil)
	require.NoError(t, err)
	assert.Empty(t, fr.Problems)

	// A second restore into the same place is refused, not merged.
	err = replica.Restore(ctx, metaURL, filepath.Join(dirB, wsstore.DBName), replica.Options{})
	assert.ErrorContains(t, err, "store.invalid_options")
}
