package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/migrations"
	"github.com/wsstore/wsstore/wserr"
)

func TestDefaultStoreDir(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		goos string
		env  map[string]string
		want string
		err  bool
	}{
		{"WSSTORE_DIR wins", "linux", map[string]string{"WSSTORE_DIR": "/x/store", "XDG_DATA_HOME": "/xdg", "HOME": "/h"}, "/x/store", false},
		{"XDG_DATA_HOME", "linux", map[string]string{"XDG_DATA_HOME": "/xdg", "HOME": "/h"}, "/xdg/wsstore", false},
		{"relative XDG_DATA_HOME ignored", "linux", map[string]string{"XDG_DATA_HOME": "rel", "HOME": "/h"}, "/h/.local/share/wsstore", false},
		{"HOME on Linux", "linux", map[string]string{"HOME": "/h"}, "/h/.local/share/wsstore", false},
		{"macOS", "darwin", map[string]string{"HOME": "/Users/u", "XDG_DATA_HOME": "/xdg"}, "/Users/u/Library/Application Support/wsstore", false},
		{"Windows", "windows", map[string]string{"LocalAppData": `C:\Users\u\AppData\Local`}, filepath.Join(`C:\Users\u\AppData\Local`, "wsstore"), false},
		{"ErrNoHome", "linux", map[string]string{}, "", true},
		{"ErrNoLocalAppData", "windows", map[string]string{"HOME": "/h"}, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := defaultStoreDir(func(k string) string { return tt.env[k] }, tt.goos)
			if tt.err {
				require.Error(t, err)
				assert.Equal(t, 2, exitCode(err))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, filepath.FromSlash(tt.want), filepath.FromSlash(got))
		})
	}
}

func TestDefaultStoreUsedWithoutStoreFlag(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	xdg := t.TempDir()
	a := c.app()
	a.getenv = func(k string) string { return map[string]string{"XDG_DATA_HOME": xdg, "HOME": t.TempDir()}[k] }
	a.goos = "linux"
	var out, errOut strings.Builder
	code := execute(t.Context(), a, []string{"init"}, strings.NewReader(""), &out, &errOut)
	require.Equal(t, 0, code, errOut.String())
	assert.Contains(t, out.String(), filepath.Join(xdg, "wsstore"))
	assert.FileExists(t, filepath.Join(xdg, "wsstore", "wsstore.db"))
}

func TestHelpDocumentsExitStatuses(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	out := c.ok("--help")
	assert.Contains(t, out, "Exit status:")
	for _, s := range exitStatuses {
		assert.Contains(t, out, fmt.Sprintf("  %d  %s", s.Status, s.Meaning))
	}
	for _, cmd := range []string{"demo", "runs", "show", "ls", "cat", "checkpoints", "diff", "log", "stats", "du",
		"checkout", "sql", "rm", "gc", "vacuum", "fsck", "batch"} {
		assert.Contains(t, out, "\n  "+cmd+" ", "command %s listed", cmd)
	}
	assert.NoDirExists(t, c.store, "help must not create a store")
}

func TestExitCode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  error
		want int
	}{
		{nil, 0},
		{errors.New("plain"), 1},
		{wserr.New(wserr.Internal, "", "", "x"), 1},
		{usageError{errors.New("bad flag")}, 2},
		{wserr.New(wserr.InvalidArgument, "", "", "x"), 2},
		{wserr.New(wserr.RunNotFound, "", "", "x"), 3},
		{wserr.New(wserr.CheckpointNotFound, "", "", "x"), 3},
		{wserr.New(wserr.FileNotFound, "", "", "x"), 3},
		{wserr.New(wserr.NotFound, "", "", "x"), 3},
		{wserr.New(wserr.InvalidPath, "", "", "x"), 4},
		{wserr.New(wserr.PathNotWritable, "", "", "x"), 4},
		{fmt.Errorf("wrapped: %w", wserr.New(wserr.PatchOldStringNotUnique, "", "", "x")), 4},
		{wserr.New(wserr.InvalidState, "", "", "x"), 5},
		{wserr.New(wserr.RunExists, "", "", "x"), 5},
		{wserr.New(wserr.Conflict, "", "", "x"), 5},
		{wserr.New(wserr.Corrupt, "", "", "x"), 6},
		{wserr.New(wserr.NewerFormat, "", "", "x"), 7},
		{wserr.New(wserr.ReadOnly, "", "", "x"), 8},
		{wserr.New(wserr.Busy, "", "", "x"), 8},
		{wserr.New(wserr.MissingArtifact, "", "", "x"), 9},
		{wserr.New(wserr.SinkFailed, "", "", "x"), 9},
		{wserr.New("something.new", "", "", "x"), 1},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, exitCode(tt.err), "%v", tt.err)
	}
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.ok("demo")
	tests := []struct {
		name string
		args []string
		want int
	}{
		{"UnknownCommand", []string{"frobnicate"}, 2},
		{"UnknownFlag", []string{"runs", "--nope"}, 2},
		{"MissingArg", []string{"show"}, 2},
		{"TooManyArgs", []string{"cat", "a", "b", "c"}, 2},
		{"BadFlagValue", []string{"ls", "x", "--depth", "deep"}, 2},
		{"BadCheckpoint", []string{"diff", "x", "cp_x"}, 2},
		{"BadStatus", []string{"runs", "--status", "sleeping"}, 2},
		{"BadGrace", []string{"gc", "--grace", "soon"}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errOut := c.fails(tt.want, tt.args...)
			assert.True(t, strings.HasPrefix(errOut, "wsctl: "), errOut)
		})
	}
}

func TestQueriesNeedAStore(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	for _, args := range [][]string{{"runs"}, {"show", "r"}, {"stats"}, {"du"}, {"fsck"}, {"gc"}, {"vacuum"}, {"sql", "SELECT 1"}, {"rm", "r"}} {
		errOut := c.fails(3, args...)
		assert.Contains(t, errOut, "store.not_found")
		assert.Contains(t, errOut, "wsctl init")
	}
	_, err := os.Stat(c.store)
	assert.True(t, errors.Is(err, os.ErrNotExist), "queries must not create the store")
}

// TestReadOnlyCommandsUpgradeAnOlderStore: a store an older build left at
// an earlier schema is upgraded by a query, as by any writing command,
// instead of failing on columns it does not have yet.
func TestReadOnlyCommandsUpgradeAnOlderStore(t *testing.T) {
	c := newCLI(t)
	require.NoError(t, os.MkdirAll(c.store, 0o755))
	raw, err := sql.Open("sqlite", "file:"+filepath.Join(c.store, wsstore.DBName))
	require.NoError(t, err)
	p, err := goose.NewProvider(goose.DialectSQLite3, raw, migrations.FS, goose.WithDisableGlobalRegistry(true))
	require.NoError(t, err)
	_, err = p.UpTo(context.Background(), 1)
	require.NoError(t, err)
	require.NoError(t, raw.Close())

	out := c.ok("stats")
	assert.Contains(t, out, "runs")
	c.ok("fsck")
}

// TestStorePathIsAFile: a --store that names a file, or lies below one,
// is a bad command line for every command, whether it reads, writes or
// creates the store, and the file is left alone.
func TestStorePathIsAFile(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "afile")
	require.NoError(t, os.WriteFile(file, []byte("not a store"), 0o644))
	for _, store := range []string{file, filepath.Join(file, "sub")} {
		for _, args := range [][]string{{"batch"}, {"demo"}, {"runs"}, {"sql", "SELECT 1"}, {"gc"}, {"fsck"}, {"stats", "--json"}} {
			t.Run(strings.Join(append([]string{filepath.Base(store)}, args...), " "), func(t *testing.T) {
				c := newCLI(t)
				c.store = store
				out, errOut, code := c.run(`{"op":"finish"}`+"\n", args...)
				assert.Equal(t, 2, code, "stderr %s", errOut)
				assert.Empty(t, out)
				assert.Contains(t, errOut, "wsctl: open store "+store+": store.invalid_options: ")
				assert.NotContains(t, errOut, "mkdir")
			})
		}
	}
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	assert.Equal(t, "not a store", string(b))
}

// TestInterruptedCommand: a command that SIGINT or SIGTERM stops midway (a
// cancelled context) ends with wsctl.interrupted and exit status 130, not
// an uncoded "context canceled".
func TestInterruptedCommand(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.ok("demo")
	for _, args := range [][]string{{"gc"}, {"fsck"}, {"stats"}, {"vacuum"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			out, errOut, code := c.runCtx(ctx, strings.NewReader(""), args...)
			assert.Equal(t, 130, code, "stdout %s stderr %s", out, errOut)
			assert.Contains(t, errOut, "wsctl.interrupted")
		})
	}
}

// TestInterruptedMidway cancels maintenance commands at moments spread
// over their work on a store of 1,000 files: whatever they were doing
// (reading a tree, a statement closed under them), they end with exit
// status 0 (done first) or 130, never as an internal error or as
// corruption.
func TestInterruptedMidway(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	var in strings.Builder
	in.WriteString(`{"op":"run.create","chat":{"kind":"character","stableChatId":"big"}}` + "\n")
	for i := range 1000 {
		fmt.Fprintf(&in, `{"op":"write","path":"output/d%02d/f%04d.md","content":"content %d %s"}`+"\n", i%50, i, i, strings.Repeat("x", i%200))
	}
	for _, r := range c.batch(in.String()) {
		require.True(t, r.OK, "%+v", r.Error)
	}
	for _, args := range [][]string{{"gc"}, {"fsck"}, {"vacuum"}, {"stats"}, {"du"}} {
		for d := time.Duration(0); d <= 20*time.Millisecond; d += 2 * time.Millisecond {
			ctx, cancel := context.WithCancel(context.Background())
			stop := time.AfterFunc(d, cancel)
			_, errOut, code := c.runCtx(ctx, strings.NewReader(""), args...)
			stop.Stop()
			cancel()
			assert.Contains(t, []int{0, 130}, code, "%v cancelled after %v: %s", args, d, strings.TrimSpace(errOut))
		}
	}
}

// TestBadGlobalFlagsBeforeTheStore: a bad --synchronous, --profile,
// --max-store-bytes or --blobs is a usage error (exit 2) whether or not
// there is a store, found before any command looks at the store.
func TestBadGlobalFlagsBeforeTheStore(t *testing.T) {
	c := newCLI(t)
	bad := [][]string{{"--synchronous", "bogus"}, {"--profile", "bogus"}, {"--max-store-bytes", "-1"}, {"--blobs", "http://x"}}
	for _, cmd := range [][]string{{"runs"}, {"stats"}, {"gc"}, {"fsck"}} {
		for _, flags := range bad {
			args := append(append([]string{}, flags...), cmd...)
			errOut := c.fails(2, args...)
			assert.Contains(t, errOut, "store.invalid_options", "wsctl %v", args)
		}
	}
	assert.Error(t, storeExists(c.store), "no store was created")
	assert.Contains(t, c.fails(2, "--synchronous", "Bogus", "runs"), `--synchronous must be normal or full, not "Bogus"`,
		"the value is named as it was given")
	c.ok("init")
	for _, flags := range bad {
		c.fails(2, append(flags, "runs")...)
	}
}

// TestStoreThisUserMayNotReadIsCoded: a store whose directory or database
// file this user may not read is named as such, store.invalid_options
// (exit status 2, as a --store that cannot hold a store), for reading and
// writing commands alike; it was store.internal or an uncoded SQLite
// error (exit status 1), and store.read_only ("it can be read") for a
// writing one. Root reads whatever the permissions say, so this runs only
// as another user.
func TestStoreThisUserMayNotReadIsCoded(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads whatever the permissions say")
	}
	c := newCLI(t)
	st := c.open()
	c.seedRun(st, "r1")
	require.NoError(t, st.Close())
	db := filepath.Join(c.store, "wsstore.db")
	for _, lock := range []struct {
		path string
		mode os.FileMode
	}{{db, 0o644}, {c.store, 0o755}} {
		require.NoError(t, os.Chmod(lock.path, 0))
		t.Cleanup(func() { _ = os.Chmod(lock.path, lock.mode) })
		for _, args := range [][]string{{"runs"}, {"cat", "r1", "output/a.md"}, {"fsck"}, {"init"}, {"rm", "r1", "--force"}} {
			errOut := c.fails(2, args...)
			assert.Contains(t, errOut, "store.invalid_options", "%s %v", lock.path, args)
			assert.Contains(t, errOut, "may not read", "%s %v", lock.path, args)
		}
		require.NoError(t, os.Chmod(lock.path, lock.mode))
	}
	assert.Contains(t, c.ok("runs"), "r1", "the store is as it was")
}

// TestHelpOfAnUnknownTopic: "wsctl help NAME" for a NAME that is no
// command fails as "wsctl NAME" does, wsctl.invalid_argument and exit
// status 2, where it printed the usage and exited 0; help of a command
// still prints its help.
func TestHelpOfAnUnknownTopic(t *testing.T) {
	c := newCLI(t)
	for _, args := range [][]string{{"help", "frobnicate"}, {"help", "actor", "uplaod"}} {
		errOut := c.fails(2, args...)
		assert.Contains(t, errOut, "wsctl.invalid_argument", "%v", args)
		assert.Contains(t, errOut, "no help topic", "%v", args)
	}
	assert.Contains(t, c.ok("help", "runs"), "runs lists the store's runs")
	assert.Contains(t, c.ok("help", "actor", "upload"), "Usage:")
	assert.Contains(t, c.ok("help"), "Available Commands:")
}
