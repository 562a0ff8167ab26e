package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

// TestRunReferences: a run is named by its id, a unique prefix of one, or
// latest, in every command that takes one; an ambiguous prefix is a
// command-line mistake that names the candidates.
func TestRunReferences(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	st := c.open()
	c.seedRun(st, "run_alpha")
	c.seedRun(st, "run_beta")
	c.seedRun(st, "run_bet")

	var d runDetails
	c.jsonOut(&d, "show", "run_al")
	assert.Equal(t, "run_alpha", d.Run.ID, "a unique prefix")
	c.jsonOut(&d, "show", "run_bet")
	assert.Equal(t, "run_bet", d.Run.ID, "an exact id wins over being a prefix of another")
	c.jsonOut(&d, "show", "latest")
	newest, err := st.Runs.Runs(context.Background(), runs.ListQuery{Limit: 1})
	require.NoError(t, err)
	assert.Equal(t, newest[0].ID, d.Run.ID)

	errOut := c.fails(2, "show", "run_")
	assert.Contains(t, errOut, "wsctl.invalid_argument")
	assert.Contains(t, errOut, "run_alpha, run_bet, run_beta")
	assert.Contains(t, c.fails(3, "show", "nope"), "run.not_found")

	assert.Equal(t, "one\ntwo\n", c.ok("cat", "run_alp", "output/a.md"))
	for _, args := range [][]string{
		{"ls", "run_alp"}, {"checkpoints", "run_alp"}, {"diff", "run_alp", "1"}, {"log", "run_alp"},
		{"checkout", "run_alp", filepath.Join(t.TempDir(), "out")},
	} {
		c.ok(args...)
	}
	assert.Contains(t, c.ok("rm", "run_alp", "--force"), "deleted run run_alpha")

	empty := newCLI(t)
	empty.ok("init")
	assert.Contains(t, empty.fails(3, "show", "latest"), "the store has no runs")
}

// TestCheckpointReferences: HEAD is the checkpoint the run is at and
// HEAD~N walks its parents, so after a rollback it follows the branch the
// run is on; --at, diff's FROM and TO take them.
func TestCheckpointReferences(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	st := c.open()
	ctx := context.Background()
	c.seedRun(st, "run_a") // cp_000001 … cp_000004
	_, err := st.Runs.Rollback(ctx, "run_a", 2, runs.RollbackOptions{})
	require.NoError(t, err)
	_, err = st.Runs.Workspace("run_a", runs.ModelScope).Write(ctx, vfs.MustPath("output/a.md"), []byte("three\n"), vfs.WriteOptions{})
	require.NoError(t, err) // cp_000005, parent cp_000002

	st2, err := wsstore.Open(ctx, c.store, wsstore.Options{})
	require.NoError(t, err)
	defer st2.Close()
	for ref, want := range map[string]int64{"HEAD": 5, "head": 5, "HEAD~0": 5, "HEAD~1": 2, "HEAD^": 2, "HEAD~": 2, "HEAD~2": 1, "HEAD~~": 1, "HEAD^^": 1, "HEAD^1": 2, "HEAD^0": 5, "HEAD~1^": 1, "cp_000003": 3, "3": 3} {
		r, err := parseCheckpointRef(ref, false)
		require.NoError(t, err, ref)
		got, err := r.resolve(ctx, st2, "run_a")
		require.NoError(t, err, ref)
		assert.Equal(t, want, got, ref)
	}
	assert.Equal(t, "three\n", c.ok("cat", "run_a", "output/a.md", "--at", "HEAD"))
	assert.Equal(t, "one\n", c.ok("cat", "run_a", "output/a.md", "--at", "HEAD~1"))
	assert.Contains(t, c.ok("diff", "run_a", "HEAD~1", "HEAD"), "-one\n+three\n")
	assert.Empty(t, c.ok("diff", "run_a", "HEAD", "live"))
	assert.Contains(t, c.fails(3, "cat", "run_a", "output/a.md", "--at", "HEAD~3"), "checkpoint.not_found")
	for _, bad := range []string{"HEAD~x", "HEAD~-1", "HEAD^2", "HEAD~1x", "HEAD~99999999999999999999", "HEAD~9223372036854775807~9223372036854775807~9", "HEADS", "yesterday", "0"} {
		errOut := c.fails(2, "cat", "run_a", "output/a.md", "--at", bad)
		assert.Contains(t, errOut, "wsctl.invalid_argument", bad)
	}
	assert.Contains(t, c.fails(2, "diff", "run_a", "live"), "wsctl.invalid_argument", "FROM is a checkpoint")
}

// TestCLIArgumentErrorsAreNotModelCorrectable: bad flag values, paths and
// a missing user data directory are wsctl.invalid_argument (exit 2),
// never workspace.* codes a host would hand to its model.
func TestCLIArgumentErrorsAreNotModelCorrectable(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.seedRun(c.open(), "run_a")
	for _, args := range [][]string{
		{"ls", "run_a", "--depth", "-1"},
		{"runs", "--limit", "-1"},
		{"runs", "--status", "sleeping"},
		{"log", "run_a", "--after", "-1"},
		{"gc", "--grace", "soon"},
		{"cat", "run_a", "../x"},
		{"sql", ""},
		{"replicate", "--to", "s3://bkt/meta?endpoint=http://127.0.0.1:1", "--interval", "0"},
		{"replicate", "--to", "s3://bkt/meta?endpoint=http://127.0.0.1:1", "--interval", "-1s"},
	} {
		errOut := c.fails(2, args...)
		assert.Contains(t, errOut, "wsctl.invalid_argument", "%v", args)
		assert.NotContains(t, errOut, "workspace.", "%v", args)
	}

	a := c.app()
	a.getenv = func(string) string { return "" }
	a.goos = "linux"
	var out, errOut strings.Builder
	code := execute(t.Context(), a, []string{"runs"}, strings.NewReader(""), &out, &errOut)
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut.String(), "wsctl.invalid_argument: cannot find the user's data directory")
}

// TestCompletion: run arguments complete to run ids (and latest),
// checkpoint arguments and --at to the run's checkpoints and HEAD,
// --status to the statuses.
func TestCompletion(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	st := c.open()
	c.seedRun(st, "run_a")
	c.seedRun(st, "run_b")
	lines := func(args ...string) []string {
		t.Helper()
		out := c.ok(append([]string{"__complete"}, args...)...)
		var vals []string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if !strings.HasPrefix(l, ":") {
				vals = append(vals, strings.SplitN(l, "\t", 2)[0])
			}
		}
		return vals
	}
	assert.ElementsMatch(t, []string{"latest", "run_a", "run_b"}, lines("show", ""))
	assert.ElementsMatch(t, []string{"run_a"}, lines("cat", "run_a"))
	assert.Equal(t, []string{"HEAD", "cp_000004", "cp_000003", "cp_000002", "cp_000001"}, lines("diff", "run_a", ""))
	assert.Equal(t, []string{"HEAD", "live", "cp_000004", "cp_000003", "cp_000002", "cp_000001"}, lines("diff", "run_a", "1", ""))
	assert.Equal(t, []string{"cp_000003"}, lines("ls", "run_b", "--at", "cp_000003"))
	var statuses []string
	for _, s := range runStatuses {
		statuses = append(statuses, string(s))
	}
	assert.Equal(t, statuses, lines("runs", "--status", ""))
	noStore := newCLI(t).ok("__complete", "show", "")
	assert.True(t, strings.HasPrefix(noStore, ":"), "no store: no ids, no error: %q", noStore)

	// The completion scripts: each shell's, and a usage error (exit 2)
	// for a shell it has none for, or none named.
	for _, sh := range []string{"bash", "zsh", "fish", "powershell"} {
		assert.NotEmpty(t, c.ok("completion", sh), sh)
	}
	assert.Contains(t, c.fails(2, "completion", "tcsh"), "name a shell")
	assert.Contains(t, c.fails(2, "completion"), "name a shell")
}

// TestRootHelpListsCommandsBeforeExitStatuses: the root's help reads
// what wsctl is, its commands and flags, then the exit table; a command's
// help has no exit table.
func TestRootHelpListsCommandsBeforeExitStatuses(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	out := c.ok("--help")
	cmds, flags, exits := strings.Index(out, "Available Commands:"), strings.Index(out, "Flags:"), strings.Index(out, "Exit status:")
	require.True(t, cmds > 0 && flags > 0 && exits > 0, out)
	assert.Less(t, cmds, exits)
	assert.Less(t, flags, exits)
	for _, cmd := range []string{"init", "version", "demo"} {
		assert.Contains(t, out, "\n  "+cmd+" ")
	}
	assert.NotContains(t, c.ok("ls", "--help"), "Exit status:")
}

// TestStatsFiguresAgree: each ratio stats prints divides the figures on
// its own line, and stored is contents plus trees.
func TestStatsFiguresAgree(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.ok("demo", "--store", c.store)
	var s wsstore.Stats
	c.jsonOut(&s, "stats")
	require.Positive(t, s.ContentStoredBytes)
	assert.Equal(t, s.StoredBytes, s.ContentStoredBytes+s.TreeStoredBytes)
	assert.InDelta(t, float64(s.BlobLogicalBytes)/float64(s.ContentStoredBytes), s.CompressionRatio, 1e-9)

	out := c.ok("stats")
	line := func(name string) string {
		m := regexp.MustCompile(`(?m)^` + name + `\s+(.*)$`).FindStringSubmatch(out)
		require.NotNil(t, m, "%s line in\n%s", name, out)
		return m[1]
	}
	contents := line("contents")
	assert.True(t, strings.HasPrefix(contents, humanBytes(s.ContentStoredBytes)+" "), contents)
	assert.Contains(t, contents, fmt.Sprintf("%.1fx: %s / %s", s.CompressionRatio, humanBytes(s.BlobLogicalBytes), humanBytes(s.ContentStoredBytes)))
	logical := line("logical")
	assert.Contains(t, logical, fmt.Sprintf("%.1fx: %s referenced / %s", s.DedupRatio, humanBytes(s.ReferencedBytes), humanBytes(s.BlobLogicalBytes)))
	assert.Equal(t, fmt.Sprintf("%s  in rows: %s contents + %s trees", humanBytes(s.StoredBytes), humanBytes(s.ContentStoredBytes), humanBytes(s.TreeStoredBytes)), line("stored"))
}

// TestVersion: --version and version print the build's module version and
// commit; --json gives them as an object; neither opens a store.
func TestVersion(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	run := func(args ...string) string {
		a := c.app()
		a.readBuildInfo = func() (*debug.BuildInfo, bool) {
			return &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: modulePath, Version: "v0.1.0"}, Settings: []debug.BuildSetting{
				{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
				{Key: "vcs.time", Value: "2026-12-01T10:00:00Z"}, {Key: "vcs.modified", Value: "true"},
			}}, true
		}
		var out, errOut strings.Builder
		require.Equal(t, 0, execute(t.Context(), a, append([]string{"--store", c.store}, args...), strings.NewReader(""), &out, &errOut), errOut.String())
		return out.String()
	}
	line := "wsctl v0.1.0 (commit 0123456789abcdef0123456789abcdef01234567, 2026-12-01T10:00:00Z, modified) github.com/wsstore/wsstore go1.26.8"
	assert.True(t, strings.HasPrefix(run("--version"), line), run("--version"))
	assert.True(t, strings.HasPrefix(run("version"), line))
	var b buildInfo
	require.NoError(t, json.Unmarshal([]byte(run("version", "--json")), &b))
	assert.Equal(t, buildInfo{Module: modulePath, Version: "v0.1.0", Revision: "0123456789abcdef0123456789abcdef01234567",
		Time: "2026-12-01T10:00:00Z", Modified: true, Go: "go1.26.8", Platform: b.Platform}, b)
	assert.NoDirExists(t, c.store)

	// A test binary carries no vcs stamp: the line says so.
	assert.Contains(t, c.ok("version"), "no commit stamped")
}

// TestInit: init creates an empty store, says so, and on an existing store
// changes nothing; DIR overrides --store; a file is refused.
func TestInit(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	assert.Contains(t, c.ok("init"), "created an empty store in "+c.store)
	assert.FileExists(t, filepath.Join(c.store, wsstore.DBName))
	assert.Equal(t, "[]\n", c.ok("runs", "--json"))
	assert.Contains(t, c.ok("init"), c.store+" already holds a store (0 runs): nothing changed")
	c.seedRun(c.open(), "run_a")
	var res initResult
	c.jsonOut(&res, "init")
	assert.Equal(t, initResult{Store: c.store, Created: false, Runs: 1}, res)

	dir := filepath.Join(t.TempDir(), "a", "b")
	assert.Contains(t, c.ok("init", dir), "created an empty store in "+dir)
	assert.FileExists(t, filepath.Join(dir, wsstore.DBName))

	file := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	assert.Contains(t, c.fails(2, "init", file), "store.invalid_options")
}

// TestStoreThroughASymlinkLoop: a --store that is a loop of symbolic
// links, or whose database file is one, is a bad --store (exit 2
// store.invalid_options) for reading and creating commands alike, and
// nothing is made there.
func TestStoreThroughASymlinkLoop(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	parent := t.TempDir()
	loop := filepath.Join(parent, "loop")
	require.NoError(t, os.Symlink(loop, loop))
	inner := filepath.Join(parent, "inner")
	require.NoError(t, os.Mkdir(inner, 0o755))
	db := filepath.Join(inner, wsstore.DBName)
	require.NoError(t, os.Symlink(db, db))
	for _, dir := range []string{loop, inner} {
		for _, args := range [][]string{{"runs"}, {"stats"}, {"init"}, {"batch"}} {
			out := c.fails(2, append([]string{"--store", dir}, args...)...)
			assert.Contains(t, out, "store.invalid_options", "%s %v", dir, args)
		}
	}
	entries, err := os.ReadDir(parent)
	require.NoError(t, err)
	assert.Len(t, entries, 2)
	entries, err = os.ReadDir(inner)
	require.NoError(t, err)
	assert.Len(t, entries, 1)
}

// TestDemoStoreChoice: without --store demo leaves no store anywhere and
// says how to keep one; with --store the run stays there and the default
// store is untouched.
func TestDemoStoreChoice(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	def := filepath.Join(t.TempDir(), "default")
	c.env["WSSTORE_DIR"] = def
	a := c.app()
	var out, errOut strings.Builder
	require.Equal(t, 0, execute(t.Context(), a, []string{"demo"}, strings.NewReader(""), &out, &errOut), errOut.String())
	m := regexp.MustCompile(`temporary store \((.*)\), removed when demo ends`).FindStringSubmatch(out.String())
	require.NotNil(t, m, out.String())
	assert.NoDirExists(t, filepath.Dir(m[1]), "the temporary store is removed")
	assert.Contains(t, out.String(), `"wsctl demo --store ./demo-store" keeps the run`)
	assert.NoDirExists(t, def)

	out.Reset()
	require.Equal(t, 0, execute(t.Context(), c.app(), []string{"init"}, strings.NewReader(""), &out, &errOut), errOut.String())
	assert.Contains(t, c.ok("demo"), "the run stays there until")
	var list []runs.Run
	c.jsonOut(&list, "runs")
	assert.Len(t, list, 1, "the --store store keeps the run")
	st, err := wsstore.Open(t.Context(), def, wsstore.Options{})
	require.NoError(t, err)
	defer st.Close()
	rs, err := st.Runs.Runs(t.Context(), runs.ListQuery{})
	require.NoError(t, err)
	assert.Empty(t, rs, "init && demo --store X leaves the default store empty")
}

// TestRunPrefixReadsTheRunsItMatches: naming a run by a prefix of its id
// holds the runs the prefix matches, not every run of the store: the heap
// grows about as much among 2,000 runs as among 20. Reading every run to
// match the prefix grew it by about 2 MiB among 2,000.
func TestRunPrefixReadsTheRunsItMatches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	growth := func(n int) uint64 {
		st, err := wsstore.Open(ctx, t.TempDir(), wsstore.Options{})
		require.NoError(t, err)
		defer st.Close()
		for i := range n {
			_, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "c"}, RunID: fmt.Sprintf("run_%05d", i)})
			require.NoError(t, err)
		}
		_, err = st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "c"}, RunID: "target_run"})
		require.NoError(t, err)
		least := uint64(math.MaxUint64)
		for range 3 {
			var id string
			g := storetest.HeapGrowth(func() {
				id, err = resolveRun(ctx, st, "target_r")
				require.NoError(t, err)
			})
			require.Equal(t, "target_run", id)
			least = min(least, g)
		}
		return least
	}
	small, large := growth(20), growth(2000)
	t.Logf("heap growth of resolving a run prefix: %d bytes among 20 runs, %d among 2,000", small, large)
	assert.Less(t, large, small+256<<10, "heap growth among 2,000 runs")
}
