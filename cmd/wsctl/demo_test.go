package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/runs"
)

func TestDemo(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	out := c.ok("demo")

	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	assert.Less(t, len(lines), 41, "demo prints under 41 lines:\n%s", out)
	for _, want := range []string{
		"chat sink <- commit_demo_", `mes "The keeper lit the lamp at dusk.\n"`, `extra.status_bar "night 1 | lamp lit\n"`,
		"timeline", "run_created", "workspace_file_written   output/main.md", "workspace_patch_applied  output/main.md, 1 replacement",
		"scratch/notes.md", "workspace_rolled_back    to cp_000003", "cp_000006 after_workspace_write, from cp_000003",
		"manifest_set             2 artifacts", "artifact_assembled", "chat_commit_completed", "running -> completed", "run_completed",
		"final diff", "--- /dev/null\n+++ b/output/main.md\n@@ -0,0 +1 @@\n+The keeper lit the lamp at dusk.\n",
		"+++ b/output/status.md",
	} {
		assert.Contains(t, out, want)
	}
	// The rolled-back notes are not in the final diff.
	assert.NotContains(t, out[strings.Index(out, "final diff"):], "scratch/notes.md")

	// It runs again with a fresh run id in the same chat.
	c.ok("demo")
	var list []runs.Run
	c.jsonOut(&list, "runs")
	require.Len(t, list, 2)
	assert.NotEqual(t, list[0].ID, list[1].ID)
	assert.Equal(t, list[0].ChatID, list[1].ChatID)
	for _, r := range list {
		assert.Equal(t, runs.Completed, r.Status)
		assert.True(t, strings.HasPrefix(r.ID, "demo_"))
	}
}

func TestDemoJSON(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	var res demoResult
	c.jsonOut(&res, "demo")
	assert.True(t, strings.HasPrefix(res.RunID, "demo_"))
	assert.Len(t, res.Events, 22) // scratch_collected closes it
	assert.Equal(t, "completed", res.Commit.Status)
	assert.Equal(t, "The keeper lit the lamp at dusk.\n", res.Commit.Message.Body)
	assert.Equal(t, "night 1 | lamp lit\n", res.Commit.Message.Extra["status_bar"])
	require.Len(t, res.Diff, 2)
	assert.Equal(t, "output/main.md", res.Diff[0].Path)
}
