package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/checkpoint"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

func TestRuns(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	st := c.open()
	c.seedRun(st, "run_a")
	c.seedRun(st, "run_b")
	require.NoError(t, st.Runs.SetStatus(context.Background(), "run_b", runs.Cancelled, "test"))

	out := c.ok("runs")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3, out)
	assert.Regexp(t, `^RUN\s+STATUS\s+CHAT\s+STABLE CHAT\s+PROFILE\s+HEAD\s+CREATED\s+UPDATED$`, lines[0])
	assert.Contains(t, out, "run_a")
	assert.Contains(t, out, "cancelled")

	t.Run("Status", func(t *testing.T) {
		var list []runs.Run
		c.jsonOut(&list, "runs", "--status", "running")
		require.Len(t, list, 1)
		assert.Equal(t, "run_a", list[0].ID)
	})
	t.Run("ChatByWorkspaceID", func(t *testing.T) {
		var list []runs.Run
		c.jsonOut(&list, "runs", "--chat", runs.ChatWorkspaceID(runs.ChatKey{Kind: "character", StableChatID: "chat-run_b"}))
		require.Len(t, list, 1)
		assert.Equal(t, "run_b", list[0].ID)
	})
	t.Run("ChatByStableID", func(t *testing.T) {
		var list []runs.Run
		c.jsonOut(&list, "runs", "--chat", "chat-run_a")
		require.Len(t, list, 1)
		assert.Equal(t, "run_a", list[0].ID)
	})
	t.Run("ChatByStableIDAcrossKinds", func(t *testing.T) {
		// The chats of every kind with that id: their runs together,
		// newest first, at most --limit of them in all.
		for _, r := range []struct{ id, kind string }{{"k_1", "character"}, {"k_2", "group"}, {"k_3", "character"}} {
			_, err := st.Runs.CreateRun(context.Background(), runs.CreateRequest{Chat: runs.ChatKey{Kind: r.kind, StableChatID: "shared"}, RunID: r.id})
			require.NoError(t, err)
		}
		ids := func(args ...string) []string {
			var list []runs.Run
			c.jsonOut(&list, append([]string{"runs", "--chat", "shared"}, args...)...)
			var out []string
			for _, r := range list {
				out = append(out, r.ID)
			}
			return out
		}
		assert.Equal(t, []string{"k_3", "k_2", "k_1"}, ids())
		assert.Equal(t, []string{"k_3"}, ids("--limit", "1"))
		assert.Equal(t, []string{"k_3", "k_2"}, ids("--limit", "2"))
		// The next page, across the chats' runs too.
		assert.Equal(t, []string{"k_2", "k_1"}, ids("--limit", "2", "--after", "k_3"))
		assert.Equal(t, []string{"k_1"}, ids("--after", "k_2"))
	})
	t.Run("Empty", func(t *testing.T) {
		assert.Equal(t, "[]\n", c.ok("runs", "--chat", "nobody", "--json"))
	})
}

func TestShow(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.seedRun(c.open(), "run_a")
	out := c.ok("show", "run_a")
	for _, want := range []string{"run_a", "running", "chat-run_a", "profile", "checkpoints  4, head cp_000004", "4 files",
		"main output/main.md -> message_body, required", "commits      none"} {
		assert.Contains(t, out, want)
	}
	var d runDetails
	c.jsonOut(&d, "show", "run_a")
	assert.Equal(t, "run_a", d.Run.ID)
	assert.Equal(t, 4, d.Checkpoints)
	assert.Equal(t, 4, d.Files)
	assert.EqualValues(t, 9, d.Events)

	errOut := c.fails(3, "show", "nope")
	assert.Contains(t, errOut, "run.not_found")
}

func TestLs(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.seedRun(c.open(), "run_a")

	out := c.ok("ls", "run_a")
	assert.Contains(t, out, "input/")
	assert.Contains(t, out, "output/")
	assert.NotContains(t, out, "output/a.md", "depth 1 lists the roots only")

	// Depth 0 means what it means in batch list: the direct entries.
	assert.Equal(t, out, c.ok("ls", "run_a", "--depth", "0"))
	out = c.ok("ls", "run_a", "--depth", "2")
	assert.Contains(t, out, "input/prompt_snapshot.json")
	assert.Equal(t, out, c.ok("ls", "run_a", "-R"), "two levels are all there is")
	out = c.ok("ls", "run_a", "--recursive")
	assert.Contains(t, out, "input/prompt_snapshot.json")
	assert.Regexp(t, `file\s+8 B\s+[0-9a-f]{12}\s+generated\s+yes\s+output/a.md`, out)

	var infos []vfs.FileInfo
	c.jsonOut(&infos, "ls", "run_a", "output")
	require.Len(t, infos, 1)
	assert.Equal(t, "output/a.md", infos[0].Path.String())
	assert.EqualValues(t, 8, infos[0].Size)

	c.jsonOut(&infos, "ls", "run_a", "output", "--at", "cp_000002")
	require.Len(t, infos, 1)
	assert.EqualValues(t, 4, infos[0].Size, "at cp_000002 a.md is \"one\\n\"")

	// A visible root with no file is an empty directory, live or at a
	// checkpoint; below it a missing path is a miss.
	c.jsonOut(&infos, "ls", "run_a", "scratch", "--at", "2")
	assert.Empty(t, infos)
	assert.Equal(t, "KIND  SIZE  HASH  RESOURCE  WRITABLE  PATH\n", c.ok("ls", "run_a", "plan"))
	assert.Regexp(t, `dir\s+0 B\s+[0-9a-f]{12}\s+generated\s+no\s+plan/`, out)
	assert.Contains(t, c.fails(3, "ls", "run_a", "plan/nope"), "workspace.file_not_found")
	assert.Contains(t, c.fails(3, "ls", "run_a", "--at", "99"), "checkpoint.not_found")
	// A path typed on the command line is the typist's mistake, not a
	// model's.
	assert.Contains(t, c.fails(2, "ls", "run_a", "../x"), "wsctl.invalid_argument")
}

func TestCat(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.seedRun(c.open(), "run_a")

	assert.Equal(t, "one\ntwo\n", c.ok("cat", "run_a", "output/a.md"))
	assert.Equal(t, "one\n", c.ok("cat", "run_a", "output/a.md", "--at", "cp_000002"))
	assert.Equal(t, `{"messages":[]}`, c.ok("cat", "run_a", "input/prompt_snapshot.json"))
	assert.Equal(t, "\x00\x01\x02binary", c.ok("cat", "run_a", "scratch/b.bin"))

	var fc map[string]any
	c.jsonOut(&fc, "cat", "run_a", "scratch/b.bin")
	assert.Equal(t, base64.StdEncoding.EncodeToString([]byte("\x00\x01\x02binary")), fc["contentBase64"])
	assert.NotContains(t, fc, "content")
	c.jsonOut(&fc, "cat", "run_a", "output/a.md")
	assert.Equal(t, "one\ntwo\n", fc["content"])
	assert.EqualValues(t, 8, fc["size"])

	assert.Contains(t, c.fails(3, "cat", "run_a", "output/missing.md"), "workspace.file_not_found")
	assert.Contains(t, c.fails(4, "cat", "run_a", "output"), "workspace.path_is_directory")
	assert.Contains(t, c.fails(3, "cat", "nope", "output/a.md"), "run.not_found")
}

func TestCheckpoints(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	st := c.open()
	c.seedRun(st, "run_a")
	_, err := st.Runs.Rollback(context.Background(), "run_a", 2, runs.RollbackOptions{})
	require.NoError(t, err)

	out := c.ok("checkpoints", "run_a")
	assert.Regexp(t, `cp_000001\s+-\s+after_init`, out)
	assert.Regexp(t, `cp_000002\s+\*\s+cp_000001\s+after_workspace_write`, out, "head is marked after the rollback")

	var cps []checkpoint.Checkpoint
	c.jsonOut(&cps, "checkpoints", "run_a")
	require.Len(t, cps, 4)
	assert.Equal(t, "cp_000004", cps[3].ID)
	assert.Equal(t, "after_init", cps[0].Reason)

	c.fails(3, "checkpoints", "nope")
}

func TestDiff(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.seedRun(c.open(), "run_a")

	out := c.ok("diff", "run_a", "cp_000002", "3")
	assert.Equal(t, "--- a/output/a.md\n+++ b/output/a.md\n@@ -1 +1,2 @@\n one\n+two\n", out)

	out = c.ok("diff", "run_a", "1")
	assert.Contains(t, out, "--- /dev/null\n+++ b/output/a.md\n@@ -0,0 +1,2 @@\n+one\n+two\n")
	assert.Contains(t, out, "Binary file scratch/b.bin added")

	assert.Equal(t, "", c.ok("diff", "run_a", "4", "live"), "no change since the last checkpoint")

	out = c.ok("diff", "run_a", "3", "1")
	assert.Equal(t, "--- a/output/a.md\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-one\n-two\n", out, "a deleted file diffs against /dev/null")

	var diffs []checkpoint.FileDiff
	c.jsonOut(&diffs, "diff", "run_a", "1", "3")
	require.Len(t, diffs, 1)
	assert.Equal(t, vfs.Added, diffs[0].Op)
	assert.Contains(t, diffs[0].Unified, "+two")

	c.fails(3, "diff", "run_a", "9")
	c.fails(2, "diff", "run_a", "zero")

	out = c.ok("diff", "run_a", "1", "--max-bytes", "10")
	assert.Equal(t, "File output/a.md added (0 B -> 8 B): diff left out at the response limit (1 hunk(s))\n"+
		"File scratch/b.bin added (0 B -> 9 B): diff left out at the response limit\n", out,
		"a file none of whose hunks fit names what it left out, and prints no headers past the limit")

	out = c.ok("diff", "run_a", "1", "--max-bytes", "70")
	assert.Equal(t, "--- /dev/null\n+++ b/output/a.md\n@@ -0,0 +1,2 @@\n+one\n+two\nBinary file scratch/b.bin added (0 B -> 9 B)\n", out,
		"a hunk that fits; a binary file takes none of the limit")

	text := "--- /dev/null\n+++ b/output/a.md\n@@ -0,0 +1,2 @@\n+one\n+two\n"
	out = c.ok("diff", "run_a", "1", "--max-bytes", fmt.Sprint(len(text)))
	assert.True(t, strings.HasPrefix(out, text), "a text exactly as long as the limit fits, its headers counted as printed: %q", out)
}

func TestLog(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.seedRun(c.open(), "run_a")

	out := c.ok("log", "run_a")
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	require.Len(t, lines, 9, out)
	assert.Regexp(t, `^   1  \d\d:\d\d:\d\d\.\d{3}  run_created\s+chat chat_`, lines[0])
	assert.Contains(t, lines[3], "workspace_file_written   output/a.md, 4 B")

	out = c.ok("log", "run_a", "--after", "5", "--limit", "2")
	lines = strings.Split(strings.TrimRight(out, "\n"), "\n")
	require.Len(t, lines, 2, out)
	assert.True(t, strings.HasPrefix(lines[0], "   6  "), lines[0])

	// --json is events.jsonl: one event per line.
	out = c.ok("log", "run_a", "--json", "--after", "6")
	lines = strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3)
	for i, l := range lines {
		var e map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &e))
		assert.EqualValues(t, 7+i, e["seq"])
	}
	c.fails(3, "log", "nope")
	c.fails(2, "log", "run_a", "--limit", "-1")
}
