package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

// seedChatRun creates a run in chat kind "character" stableChatId chat,
// writes output/a.md and, when finish, finishes it.
func seedChatRun(t *testing.T, st *wsstore.Store, chat, runID string, finish bool) {
	t.Helper()
	ctx := context.Background()
	_, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: chat}, RunID: runID})
	require.NoError(t, err)
	_, err = st.Runs.Workspace(runID, runs.ModelScope).Write(ctx, vfs.MustPath("output/a.md"), []byte(runID+"\n"), vfs.WriteOptions{})
	require.NoError(t, err)
	if finish {
		_, err = st.Runs.Finish(ctx, runID)
		require.NoError(t, err)
	}
}

func runIDsOf(t *testing.T, st *wsstore.Store) []string {
	t.Helper()
	rs, err := st.Runs.Runs(context.Background(), runs.ListQuery{})
	require.NoError(t, err)
	ids := []string{}
	for _, r := range rs {
		ids = append(ids, r.ID)
	}
	return ids
}

// TestPolicyPruneDeletions: policy --set sets the store's policy; prune
// --dry-run reports and deletes nothing; prune deletes what the policy
// names; deletions lists it; each in text and --json.
func TestPolicyPruneDeletions(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	st := c.open()
	seedChatRun(t, st, "s1", "old", true)
	seedChatRun(t, st, "s1", "new", true)
	seedChatRun(t, st, "s1", "live", false)
	chat1 := runs.ChatWorkspaceID(runs.ChatKey{Kind: "character", StableChatID: "s1"})

	out := c.ok("policy", "--set", "keepCompletedRuns=1", "--set", "autoPruneAfterDays=30")
	assert.Regexp(t, `(?m)^keepCompletedRuns +1$`, out)
	assert.Regexp(t, `(?m)^autoPruneAfterDays +30$`, out)
	assert.Regexp(t, `(?m)^keepFailedRuns +-$`, out)
	var pol struct {
		Scope     string      `json:"scope"`
		Policy    runs.Policy `json:"policy"`
		Effective runs.Policy `json:"effective"`
	}
	c.jsonOut(&pol, "policy", "--set", "autoPruneAfterDays=-")
	assert.Equal(t, runs.StoreScope, pol.Scope)
	require.NotNil(t, pol.Policy.KeepCompletedRuns)
	assert.Equal(t, 1, *pol.Policy.KeepCompletedRuns)
	assert.Nil(t, pol.Policy.AutoPruneAfterDays, "- unsets")
	pol.Policy, pol.Effective = runs.Policy{}, runs.Policy{}
	c.jsonOut(&pol, "policy", "--chat", chat1, "--set", "keepFailedRuns=2")
	assert.Equal(t, chat1, pol.Scope)
	assert.Nil(t, pol.Policy.KeepCompletedRuns, "the chat's own overrides only")
	assert.Equal(t, 1, *pol.Effective.KeepCompletedRuns, "inherited")
	assert.Equal(t, 2, *pol.Effective.KeepFailedRuns)
	// A cap given for the command is the one in force.
	out = c.ok("--max-store-bytes", "8000000", "policy")
	assert.Regexp(t, `(?m)^maxStoreBytes +8000000$`, out)
	// A value is the whole word, in decimal: "1e3" was read as 1, "3.5"
	// as 3 and "8MiB" as 8, each pruning far more than asked.
	for _, bad := range [][]string{{"--set", "keepCompletedRuns=x"}, {"--set", "keepCompletedRuns=-3"}, {"--set", "nope=1"}, {"--set", "keepCompletedRuns"},
		{"--set", "keepCompletedRuns=1e3"}, {"--set", "autoPruneAfterDays=3.5"}, {"--set", "maxCheckpointBytesPerRun=8MiB"},
		{"--set", "keepCompletedRuns=0x10"}, {"--set", "maxStoreBytes=99999999999999999999"}, {"--set", "keepCompletedRuns=2", "--set", "keepFailedRuns=1e3"}} {
		c.fails(2, append([]string{"policy"}, bad...)...)
	}
	if strconv.IntSize == 32 {
		// Past a 32-bit int: it was cut to 0, and prune deleted every
		// completed run.
		c.fails(2, "policy", "--set", "keepCompletedRuns=4294967296")
	}
	stored, err := st.Runs.Policy(context.Background(), runs.StoreScope)
	require.NoError(t, err)
	assert.Equal(t, 1, *stored.KeepCompletedRuns, "a refused --set changes nothing")

	out = c.ok("prune", "--dry-run")
	assert.Contains(t, out, "would delete run old ("+chat1+", completed) by keepCompletedRuns")
	assert.Contains(t, out, "1 runs, 0 runs' checkpoints; 0 bytes freed")
	var rep runs.PruneReport
	c.jsonOut(&rep, "prune", "--dry-run")
	assert.True(t, rep.DryRun)
	require.Len(t, rep.Runs, 1)
	assert.Equal(t, "old", rep.Runs[0].RunID)
	assert.Equal(t, 1, rep.RunCount)
	assert.False(t, rep.Truncated)
	assert.ElementsMatch(t, []string{"old", "new", "live"}, runIDsOf(t, st), "a dry run deletes nothing")
	var ds []runs.Deletion
	c.jsonOut(&ds, "deletions")
	assert.Empty(t, ds, "nor logs anything")

	out = c.ok("prune")
	assert.Contains(t, out, "deleted run old ("+chat1+", completed) by keepCompletedRuns")
	assert.ElementsMatch(t, []string{"new", "live"}, runIDsOf(t, st))
	c.jsonOut(&rep, "prune", "--chat", chat1)
	assert.False(t, rep.DryRun)
	assert.Empty(t, rep.Runs, "nothing left to prune")

	out = c.ok("deletions")
	assert.Regexp(t, `(?m)^ID +AT +KIND +WORKSPACE +RUN +REASON +BYTES FREED$`, out)
	assert.Regexp(t, `(?m)^1 +\S+ +run +`+chat1+` +old +keepCompletedRuns +0$`, out)
	c.jsonOut(&ds, "deletions")
	require.NotEmpty(t, ds)
	assert.Equal(t, runs.DeletedRun, ds[0].Kind)
	assert.Equal(t, "old", ds[0].RunID)
	assert.Equal(t, chat1, ds[0].ChatID)
	assert.Equal(t, "keepCompletedRuns", ds[0].Reason)
	c.jsonOut(&ds, "deletions", "--after", "1", "--limit", "1")
	assert.LessOrEqual(t, len(ds), 1)
	for _, d := range ds {
		assert.Greater(t, d.ID, int64(1))
	}
}

// TestRmChat: refused with exit status 5 and chat.active_run while a run
// is active, changing nothing; --force cancels and deletes; a chat the
// store never saw is reported.
func TestRmChat(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	st := c.open()
	seedChatRun(t, st, "s2", "done2", true)
	seedChatRun(t, st, "s2", "live2", false)
	seedChatRun(t, st, "s3", "done3", true)
	chat2 := runs.ChatWorkspaceID(runs.ChatKey{Kind: "character", StableChatID: "s2"})

	errOut := c.fails(5, "rm-chat", "character:s3", "character:s2")
	assert.Contains(t, errOut, "chat.active_run")
	assert.ElementsMatch(t, []string{"done2", "live2", "done3"}, runIDsOf(t, st), "all or nothing: s3 stays too")
	var ds []runs.Deletion
	c.jsonOut(&ds, "deletions")
	assert.Empty(t, ds)
	c.fails(2, "rm-chat")
	c.fails(2, "rm-chat", "s2")

	out := c.ok("rm-chat", "--force", "character:s2", "character:never")
	assert.Contains(t, out, "deleted chat "+chat2+" (character:s2): 2 runs, 1 cancelled")
	assert.Contains(t, out, "no workspace for character:never")
	assert.Equal(t, []string{"done3"}, runIDsOf(t, st))

	var res runs.DeleteChatsResult
	c.jsonOut(&res, "rm-chat", "character:s3")
	require.Len(t, res.Chats, 1)
	assert.True(t, res.Chats[0].Found)
	assert.Equal(t, []string{"done3"}, res.Chats[0].Runs)
	assert.Empty(t, runIDsOf(t, st))

	c.jsonOut(&ds, "deletions")
	var chats []runs.Deletion
	for _, d := range ds {
		if d.Kind == runs.DeletedChat {
			chats = append(chats, d)
		}
	}
	require.Len(t, chats, 2)
	assert.Equal(t, chat2, chats[0].ChatID)
	assert.Equal(t, "forced", chats[0].Reason)
	assert.Contains(t, string(chats[0].Detail), "live2")
	assert.Equal(t, "requested", chats[1].Reason)
}

// TestMaxStoreBytes: a write that would take the store past
// --max-store-bytes, or past the maxStoreBytes setting, is refused with
// workspace.size_limit_exceeded and changes nothing; a small one fits.
func TestMaxStoreBytes(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	st := c.open()
	seedChatRun(t, st, "s1", "r1", false)
	used, err := st.DB.UsedBytes(context.Background())
	require.NoError(t, err)
	limit := used + 64<<10
	big := randomLetters(1, 1, 256<<10)
	lines := `{"op":"write","runId":"r1","path":"output/big.md","content":"` + string(big) + `"}` + "\n" +
		`{"op":"write","runId":"r1","path":"output/small.md","content":"fits"}` + "\n"
	check := func(args ...string) {
		t.Helper()
		out, errOut, code := c.run(lines, append(args, "batch")...)
		require.Equal(t, 0, code, errOut)
		rs := decodeResponses(t, out)
		require.Len(t, rs, 2)
		assert.Equal(t, "workspace.size_limit_exceeded", rs[0].code())
		assert.True(t, rs[1].OK, "%+v", rs[1].Error)
		_, err := st.Runs.Workspace("r1", runs.HostScope).Read(context.Background(), vfs.MustPath("output/big.md"), vfs.ReadOptions{})
		assert.Error(t, err, "the refused write changed nothing")
	}
	check("--max-store-bytes", fmt.Sprint(limit))

	c.ok("policy", "--set", "maxStoreBytes="+fmt.Sprint(limit))
	check()
	var pol struct {
		Effective runs.Policy `json:"effective"`
	}
	c.jsonOut(&pol, "policy")
	assert.Equal(t, limit, *pol.Effective.MaxStoreBytes)
	c.fails(2, "policy", "--chat", runs.ChatWorkspaceID(runs.ChatKey{Kind: "character", StableChatID: "s1"}), "--set", "maxStoreBytes=1")
}

// TestPolicySetRefusedBeforeOpen: a bad --set is a usage error (exit 2)
// found before the store is opened, whether there is no store, or one
// that cannot be opened; the store is left as it was.
func TestPolicySetRefusedBeforeOpen(t *testing.T) {
	c := newCLI(t)
	for _, bad := range []string{"nope=1", "keepCompletedRuns", "keepCompletedRuns=x"} {
		errOut := c.fails(2, "policy", "--set", bad)
		assert.Contains(t, errOut, "wsctl.invalid_argument", bad)
	}
	assert.Error(t, storeExists(c.store), "no store was created")

	c.skipFsck = true
	c.ok("init")
	db := filepath.Join(c.store, wsstore.DBName)
	garbage := bytes.Repeat([]byte("not a database "), 100)
	require.NoError(t, os.WriteFile(db, garbage, 0o644))
	c.fails(2, "policy", "--set", "nope=1")
	got, err := os.ReadFile(db)
	require.NoError(t, err)
	assert.Equal(t, garbage, got)
	c.fails(6, "policy", "--set", "keepCompletedRuns=1")
}

// TestDeletionsHoldsAPage: deletions reads and prints the log a page at a
// time, so the live heap grows by a few pages for a log of 20,000 entries
// (pages of 10 here): 0.8–1.4 MB, other tests loading both cores or not,
// where holding the whole log grows it by 11.5 MB in text, 8.7 MB in
// JSON. The bound, 5 MiB, sits between, with room for a machine loaded past that.
func TestDeletionsHoldsAPage(t *testing.T) {
	defer func(n int) { deletionsPage = n }(deletionsPage)
	deletionsPage = 10
	ctx := context.Background()
	growth := func(n int, json bool) uint64 {
		c := newCLI(t)
		st := c.open()
		_, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "c"}, RunID: "run_a"})
		require.NoError(t, err)
		_, err = st.Runs.CancelAndDeleteRun(ctx, "run_a")
		require.NoError(t, err)
		require.NoError(t, st.Close())
		// The log of many deletions, copied from the first entry.
		_, err = rawDB(t, c).Exec(`WITH RECURSIVE n (i) AS (SELECT 2 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
			INSERT INTO deletions (at, kind, chat_id, run_id, reason, detail, bytes_freed)
			SELECT d.at + n.i, d.kind, d.chat_id, 'run_' || n.i, d.reason, d.detail, d.bytes_freed FROM n, deletions d WHERE d.id = 1`, n)
		require.NoError(t, err)
		least := uint64(math.MaxUint64)
		for range 3 {
			var out countingWriter
			g := storetest.HeapGrowth(func() {
				require.NoError(t, runDeletions(ctx, deletionsOptions{globals: globals{storeDir: c.store, json: json, out: &out, errOut: io.Discard}}))
			})
			require.Greater(t, int(out), n*40, "the log was printed")
			least = min(least, g)
		}
		return least
	}
	for _, json := range []bool{false, true} {
		small, large := growth(20, json), growth(20000, json)
		t.Logf("heap growth of deletions (json %v): %d bytes for 20 entries, %d for 20,000", json, small, large)
		assert.Less(t, large, small+5<<20, "heap growth for 20,000 entries (json %v)", json)
	}
}

// countingWriter counts the bytes written to it and keeps none.
type countingWriter int

func (w *countingWriter) Write(b []byte) (int, error) {
	*w += countingWriter(len(b))
	return len(b), nil
}
