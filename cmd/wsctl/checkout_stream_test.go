package main

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/internal/rss"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

// TestCheckoutRecords: a checkout of the live run writes its records
// (tool-args/, tool-results/) beside its files, as the host's view shows
// them; a checkout of a checkpoint, which holds none, writes none.
func TestCheckoutRecords(t *testing.T) {
	c := newCLI(t)
	rs := c.batch(strings.Join([]string{
		`{"op":"run.create","chat":{"kind":"character","stableChatId":"s1"},"runId":"r1"}`,
		`{"op":"write","runId":"r1","path":"output/a.md","content":"a\n"}`,
		`{"op":"tool.call","runId":"r1","toolCallId":"call_1","name":"search","args":{"q":"x"}}`,
		`{"op":"tool.result","runId":"r1","toolCallId":"call_1","result":{"hits":1}}`,
	}, "\n") + "\n")
	for _, r := range rs {
		require.True(t, r.OK, "%+v", r)
	}
	live := filepath.Join(t.TempDir(), "live")
	c.ok("checkout", "r1", live)
	assert.FileExists(t, filepath.Join(live, "output", "a.md"))
	assert.FileExists(t, filepath.Join(live, "tool-args", "call_1.json"))
	assert.FileExists(t, filepath.Join(live, "tool-results", "call_1.json"))

	at := filepath.Join(t.TempDir(), "at")
	c.ok("checkout", "r1", at, "--at", "cp_000002")
	assert.FileExists(t, filepath.Join(at, "output", "a.md"))
	assert.NoDirExists(t, filepath.Join(at, "tool-args"))
}

// TestCheckoutMakesEmptyRoots: the profile's visible roots that hold no
// file are listed as directories by ls and list, and checkout makes them
// as empty directories, live and at a checkpoint; scratch/ is left out
// (never checked out), and a root of the profile's that holds files is
// checked out as before.
func TestCheckoutMakesEmptyRoots(t *testing.T) {
	c := newCLI(t)
	rs := c.batch(strings.Join([]string{
		`{"op":"run.create","chat":{"kind":"character","stableChatId":"s1"},"runId":"r1","profile":{"visibleRoots":["output","scratch","plan","notes"]}}`,
		`{"op":"write","runId":"r1","path":"output/a.md","content":"a\n"}`,
	}, "\n") + "\n")
	for _, r := range rs {
		require.True(t, r.OK, "%+v", r)
	}
	ls := c.ok("ls", "r1")
	for _, root := range []string{"notes/", "plan/", "scratch/"} {
		assert.Contains(t, ls, root)
	}
	for _, at := range []string{"", "cp_000001", "cp_000002"} {
		dir := filepath.Join(t.TempDir(), "co")
		args := []string{"checkout", "r1", dir, "--json"}
		if at != "" {
			args = append(args, "--at", at)
		}
		var res checkoutResult
		c.jsonOut(&res, args...)
		var got []string
		require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if p != dir {
				rel, _ := filepath.Rel(dir, p)
				got = append(got, filepath.ToSlash(rel))
			}
			return err
		}))
		want := []string{"input", "input/persist_snapshot.json", "notes", "output", "output/a.md", "plan"}
		if at == "cp_000001" {
			want = []string{"input", "input/persist_snapshot.json", "notes", "output", "plan"}
		}
		assert.Equal(t, want, got, "at %q", at)
		assert.Equal(t, 4, res.Dirs, "input, notes, output, plan; at %q", at)
	}
}

// TestCheckoutStreamsItsListing: checkout walks the trees as it writes
// the files, holding no listing of them. The wsctl binary's peak resident
// set checking out 30,000 files with long names is 9–10 MiB above its peak
// for 3,000: the tree cache filling to its bound (16,384 entries of names
// of 200 bytes) and the collector's headroom over it. A checkout that
// listed the files first was 37 MiB above (about 550 bytes of listing a
// file, doubled by the headroom). On a busy machine a single run's peak
// now and then lies 10–20 MiB above its usual one (the collector and the
// scavenger falling behind), so each store is checked out again, up to
// three times in all, while the difference of the lowest peaks is not
// within the bound: a checkout holding a listing is above it every time.
func TestCheckoutStreamsItsListing(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 33,000 files")
	}
	bin := peakBinary(t)
	// store makes a store whose run holds n files (and its
	// input/persist_snapshot.json) and returns its directory.
	store := func(n int) string {
		c := newCLI(t)
		st := c.open()
		ctx := context.Background()
		_, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "big"}, RunID: "big"})
		require.NoError(t, err)
		name := strings.Repeat("n", 200)
		edits := make([]runs.Edit, 0, n)
		for i := range n {
			edits = append(edits, runs.Edit{Path: vfs.MustPath(fmt.Sprintf("output/d%03d/%s%05d.md", i/100, name, i)), Content: []byte("x")})
		}
		_, err = st.Runs.Workspace("big", runs.HostScope).Apply(ctx, edits)
		require.NoError(t, err)
		require.NoError(t, st.Close())
		return c.store
	}
	// peak checks the run of the store of n files out into a new
	// directory and returns the checkout's peak resident set.
	peak := func(dir string, n int) int64 {
		co := filepath.Join(t.TempDir(), "co")
		cmd := exec.Command(bin, "--store", dir, "checkout", "big", co)
		var out, errOut strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errOut
		p, err := rss.Peak(cmd)
		require.NoError(t, err, "%s", errOut.String())
		assert.Contains(t, out.String(), fmt.Sprintf("checked out %d files", n+1), "and the run's input/persist_snapshot.json")
		entries, err := os.ReadDir(filepath.Join(co, "output"))
		require.NoError(t, err)
		assert.Len(t, entries, n/100)
		return p
	}
	const bound = 16 << 20
	smallStore, largeStore := store(3_000), store(30_000)
	small, large := peak(smallStore, 3_000), peak(largeStore, 30_000)
	for try := 1; large-small >= bound && try < 3; try++ {
		t.Logf("checkout peak RSS %.1f MiB at 3,000 files, %.1f MiB at 30,000: checked out again", mib(small), mib(large))
		small, large = min(small, peak(smallStore, 3_000)), min(large, peak(largeStore, 30_000))
	}
	t.Logf("checkout peak RSS %.1f MiB at 3,000 files, %.1f MiB at 30,000", mib(small), mib(large))
	assert.Less(t, large-small, int64(bound), "the peak grows with the files")
}

// TestCheckoutSyncFlag: checkout --sync writes the same workspace as
// checkout does, synced to the disk before it is put in place.
func TestCheckoutSyncFlag(t *testing.T) {
	c := newCLI(t)
	c.seedRun(c.open(), "run_a")
	dir := filepath.Join(t.TempDir(), "co")
	out := c.ok("checkout", "run_a", dir, "--sync")
	assert.Contains(t, out, "checked out 3 files")
	b, err := os.ReadFile(filepath.Join(dir, "output", "a.md"))
	require.NoError(t, err)
	assert.Equal(t, "one\ntwo\n", string(b))
}
