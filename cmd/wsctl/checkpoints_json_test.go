package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/checkpoint"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/rss"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

// checkpointsStore makes a store whose run r has files files and, after
// the first, rounds more checkpoints (one write each), through wsctl
// batch.
func checkpointsStore(t *testing.T, bin string, files, rounds int) string {
	t.Helper()
	store := filepath.Join(t.TempDir(), "store")
	var in bytes.Buffer
	enc := json.NewEncoder(&in)
	require.NoError(t, enc.Encode(map[string]any{"op": "run.create", "runId": "r", "chat": map[string]string{"kind": "character", "stableChatId": "c"}}))
	edits := make([]map[string]string, files)
	for i := range edits {
		edits[i] = map[string]string{"path": fmt.Sprintf("output/d%02d/file%05d.md", i%40, i), "content": fmt.Sprintf("%d\n", i)}
	}
	require.NoError(t, enc.Encode(map[string]any{"op": "apply", "runId": "r", "edits": edits}))
	for i := range rounds {
		require.NoError(t, enc.Encode(map[string]any{"op": "write", "runId": "r", "path": "output/main.md", "content": fmt.Sprintf("round %d\n", i)}))
	}
	cmd := exec.Command(bin, "--store", store, "batch")
	cmd.Stdin = &in
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.NotContains(t, string(out), `"ok":false`)
	return store
}

// TestCheckpointsJSONStreams: `checkpoints --json` writes each
// checkpoint's view as it reads it, so its peak resident set does not grow
// with the run's checkpoints (each listing every file), and it stops
// between views when interrupted rather than write the rest.
func TestCheckpointsJSONStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and writes tens of MiB of JSON")
	}
	bin := wsctlBinary(t)
	small := checkpointsStore(t, bin, 2000, 20)
	large := checkpointsStore(t, bin, 2000, 300)

	t.Run("PeakRSS", func(t *testing.T) {
		peak := func(store string) (int64, int64) {
			cmd := exec.Command(bin, "--store", store, "checkpoints", "r", "--json")
			var n byteCounter
			cmd.Stdout = &n
			p, err := rss.Peak(cmd)
			if err == rss.ErrUnsupported {
				t.Skip(err)
			}
			require.NoError(t, err)
			return p, int64(n)
		}
		ps, ns := peak(small)
		pl, nl := peak(large)
		t.Logf("checkpoints --json: %d bytes at %d MiB peak, %d bytes at %d MiB peak", ns, ps>>20, nl, pl>>20)
		require.Greater(t, nl, int64(rssLimit), "the larger listing is larger than the bound")
		assert.Less(t, pl, int64(rssLimit))
		assert.Less(t, pl-ps, int64(16<<20), "the peak grows with the listing")
	})

	t.Run("Interrupted", func(t *testing.T) {
		c := &cli{t: t, store: large, env: map[string]string{}}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		w := &cancelWriter{cancel: cancel}
		var errOut strings.Builder
		code := execute(ctx, c.app(), []string{"--store", large, "checkpoints", "r", "--json"}, strings.NewReader(""), w, &errOut)
		assert.Equal(t, 130, code, "stderr %s", errOut.String())
		assert.Contains(t, errOut.String(), "wsctl.interrupted")
		assert.Less(t, w.n, 10<<20, "it stopped soon after the interrupt")
	})
}

// TestCheckpointsJSONStreamsEachView: `checkpoints --json` writes each
// checkpoint's files as it walks its tree, as checkpoint.json is read, so
// its peak resident set does not grow with a checkpoint's files either,
// and it writes what encoding the view whole would.
func TestCheckpointsJSONStreamsEachView(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and a store of 40,000 files")
	}
	bin := wsctlBinary(t)
	small := checkpointsStore(t, bin, 2000, 1)
	large := checkpointsStore(t, bin, 40000, 1)
	peak := func(store string) int64 {
		cmd := exec.Command(bin, "--store", store, "checkpoints", "r", "--json")
		cmd.Stdout = io.Discard
		p, err := rss.Peak(cmd)
		if err == rss.ErrUnsupported {
			t.Skip(err)
		}
		require.NoError(t, err)
		return p
	}
	ps, pl := peak(small), peak(large)
	t.Logf("checkpoints --json: %d MiB peak with 2,000 files, %d MiB with 40,000", ps>>20, pl>>20)
	assert.Less(t, pl-ps, int64(16<<20), "the peak grows with a checkpoint's files")

	c := &cli{t: t, store: small, env: map[string]string{}}
	st := c.open()
	var want bytes.Buffer
	want.WriteString("[")
	for seq := int64(1); seq <= 3; seq++ {
		v, err := st.Checkpoints.View(context.Background(), "r", seq)
		require.NoError(t, err)
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		enc.SetIndent("  ", "  ")
		if seq > 1 {
			want.WriteString(",")
		}
		want.WriteString("\n  ")
		require.NoError(t, enc.Encode(v))
		want.Truncate(want.Len() - 1)
	}
	want.WriteString("\n]\n")
	assert.Equal(t, want.String(), c.ok("checkpoints", "r", "--json"))
}

// byteCounter counts what is written to it.
type byteCounter int64

func (c *byteCounter) Write(p []byte) (int, error) { *c += byteCounter(len(p)); return len(p), nil }

// cancelWriter cancels its context at the first write, as a SIGINT
// arriving while the answer is being written would.
type cancelWriter struct {
	cancel func()
	n      int
}

func (w *cancelWriter) Write(p []byte) (int, error) {
	w.cancel()
	w.n += len(p)
	return len(p), nil
}

var _ io.Writer = (*cancelWriter)(nil)

// TestCheckpointsJSONPrunedMeanwhile: checkpoints a run's cap prunes
// while `checkpoints --json` lists them are left out; the listing stays
// one valid JSON array and succeeds.
func TestCheckpointsJSONPrunedMeanwhile(t *testing.T) {
	ctx := context.Background()
	c := newCLI(t)
	st := c.open()
	_, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "c"}, RunID: "r"})
	require.NoError(t, err)
	for range 300 {
		_, err := st.Runs.Checkpoint(ctx, "r", "round")
		require.NoError(t, err)
	}
	pruned := false
	w := writerFunc(func(p []byte) (int, error) {
		if !pruned {
			pruned = true
			seqs := make([]int64, 0, 20)
			for s := int64(100); s < 120; s++ {
				seqs = append(seqs, s)
			}
			require.NoError(t, st.DB.Update(ctx, func(tx *index.Tx) error { return st.Checkpoints.DeleteRecords(ctx, tx, "r", seqs) }))
		}
		return len(p), nil
	})
	var all bytes.Buffer
	require.NoError(t, writeCheckpointViews(ctx, io.MultiWriter(w, &all), st.Checkpoints, st.Trees, "r"))
	require.True(t, pruned)
	var views []map[string]any
	require.NoError(t, json.Unmarshal(all.Bytes(), &views), "one valid JSON array")
	assert.Len(t, views, 301-20, "the pruned checkpoints are left out")
}

// TestCheckpointsTextPrintsAPageAtATime: `checkpoints` reads and prints
// the run's checkpoints a page at a time, as ls does, so what it holds
// does not grow with the run's checkpoints: a page is printed before the
// next is read (checkpoints pruned meanwhile are not listed).
func TestCheckpointsTextPrintsAPageAtATime(t *testing.T) {
	if testing.Short() {
		t.Skip("makes more than a page of checkpoints")
	}
	ctx := context.Background()
	c := newCLI(t)
	st := c.open()
	_, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "c"}, RunID: "r"})
	require.NoError(t, err)
	for range vfs.DefaultListLimit + 20 {
		_, err := st.Runs.Checkpoint(ctx, "r", "round")
		require.NoError(t, err)
	}
	last := int64(vfs.DefaultListLimit + 21)
	writes := 0
	w := writerFunc(func(p []byte) (int, error) {
		if writes == 0 {
			require.NoError(t, st.DB.Update(ctx, func(tx *index.Tx) error {
				return st.Checkpoints.DeleteRecords(ctx, tx, "r", []int64{last - 1})
			}))
		}
		writes++
		return len(p), nil
	})
	var out bytes.Buffer
	var errOut strings.Builder
	code := execute(ctx, c.app(), []string{"--store", c.store, "checkpoints", "r"}, strings.NewReader(""), io.MultiWriter(w, &out), &errOut)
	require.Equal(t, 0, code, "stderr %s", errOut.String())
	assert.Greater(t, writes, 1, "one write per page at least")
	assert.Equal(t, int(last), strings.Count(out.String(), "\n"), "the header and every checkpoint but the one pruned after the first page")
	assert.False(t, strings.Contains(out.String(), checkpoint.ID(last-1)+" "), "the checkpoint pruned after the first page")
	assert.True(t, strings.Contains(out.String(), checkpoint.ID(last)+"  *"), "the last checkpoint, the run's HEAD")
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
