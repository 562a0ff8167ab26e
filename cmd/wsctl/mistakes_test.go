package main

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "modernc.org/sqlite"
)

// TestCommandLineMistakesAreCoded: a mistake on the command line (a flag
// value that does not parse, an unknown command, a negative limit, a
// policy value out of range, a directory where a file goes, a checkout
// directory that cannot be made) fails with wsctl.invalid_argument and
// exit status 2, never without a code or with a workspace. code.
func TestCommandLineMistakesAreCoded(t *testing.T) {
	c := newCLI(t)
	st := c.open()
	c.seedRun(st, "r1")
	require.NoError(t, st.Close())
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o644))
	for _, args := range [][]string{
		{"log", "r1", "--limit", "abc"},
		{"nosuchcommand"},
		{"--bogus-flag"},
		{"diff", "r1", "1", "--max-bytes", "-5"},
		{"policy", "--set", "keepCompletedRuns=-1"},
		{"actor", "upload", "bob", "x.md", t.TempDir()},
		{"checkout", "r1", filepath.Join(file, "sub")},
		{"deletions", "--limit", "-1"},
		{"deletions", "--after", "-1"},
		{"actor", "ls", "bob", "--depth", "-1"},
		{"ls", "r1", "-R", "--depth", "2"},
		{"actor"},
		{"actor", "uplaod", "bob", "x.md", file},
		{"token", "crate"},
		{"actor", "ls", "bob", "../x"},
		{"actor", "stats", ""},
		{"actor", "upload", "a/b", "x.md", file},
		{"token", "create", "--actor", "a/b"},
		{"token", "create", "--expires", "0"},
		{"token", "create", "--expires", "-1h"},
		{"token", "create", "--expires", "soon"},
		{"token", "create", "--expires", "1.5d"},
		{"token", "create", "--expires", ""},
		{"serve", "--listen", "bogus"},
		{"serve", "--max-request-bytes", "-1"},
		{"serve", "--read-timeout", "-1s"},
	} {
		errOut := c.fails(2, args...)
		assert.Contains(t, errOut, "wsctl.invalid_argument", "%v", args)
		assert.NotContains(t, errOut, "workspace.", "%v", args)
		assert.NotContains(t, errOut, "wsctl: wsctl:", "%v", args)
	}
}

// TestEmptyValuesAreRefusedNotWidened: an empty --chat, --grace or actor
// (a script's unset variable) is a mistake, exit status 2 with nothing
// changed, never read as the flag left out: policy --chat "" set the
// store's policy, prune --chat "" pruned every chat, actor gc "" pruned
// every actor and --grace "" ran with the default grace.
func TestEmptyValuesAreRefusedNotWidened(t *testing.T) {
	c := newCLI(t)
	st := c.open()
	c.seedRun(st, "r1")
	_, err := st.Runs.Finish(context.Background(), "r1")
	require.NoError(t, err)
	require.NoError(t, st.Close())
	file := filepath.Join(t.TempDir(), "file")
	for _, content := range []string{"one", "two"} {
		require.NoError(t, os.WriteFile(file, []byte(content), 0o644))
		c.ok("actor", "upload", "bob", "x.md", file)
	}
	for _, args := range [][]string{
		{"policy", "--chat", "", "--set", "keepCompletedRuns=0"},
		{"policy", "--chat="},
		{"prune", "--chat", ""},
		{"actor", "gc", ""},
		{"actor", "gc", "--grace", ""},
		{"gc", "--grace="},
	} {
		errOut := c.fails(2, args...)
		assert.Contains(t, errOut, "wsctl.invalid_argument", "%v", args)
		assert.NotContains(t, errOut, "workspace.", "%v", args)
	}
	var pol struct {
		Policy map[string]any `json:"policy"`
	}
	c.jsonOut(&pol, "policy")
	assert.Empty(t, pol.Policy, "the store's policy is as it was")
	assert.Contains(t, c.ok("runs"), "r1")
	var stats struct {
		Versions int `json:"versions"`
	}
	c.jsonOut(&stats, "actor", "stats", "bob")
	assert.Equal(t, 2, stats.Versions, "no version pruned")
}

// TestSQLOnlyOnAStore: sql refuses a database that is not a store as every
// command does, and writes REALs JSON has no number for as strings.
func TestSQLOnlyOnAStore(t *testing.T) {
	c := newCLI(t)
	require.NoError(t, os.MkdirAll(c.store, 0o755))
	db, err := sql.Open("sqlite", filepath.Join(c.store, "wsstore.db"))
	require.NoError(t, err)
	_, err = db.Exec(`CREATE TABLE t (a)`)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	c.skipFsck = true
	errOut := c.fails(6, "sql", "SELECT * FROM t")
	assert.Contains(t, errOut, "store.not_a_store")

	d := newCLI(t)
	d.ok("init")
	var rows []map[string]any
	d.jsonOut(&rows, "sql", "SELECT 1e300*1e300 AS up, -1e300*1e300 AS down, 1.5 AS x")
	require.Len(t, rows, 1)
	assert.Equal(t, map[string]any{"up": "+Inf", "down": "-Inf", "x": 1.5}, rows[0])
}

// TestUnknownChatIsNotFound: policy and prune of a chat the store does not
// hold fail with store.not_found (exit 3) instead of answering as if it
// were empty; a name that is no chat's is a usage error (exit 2).
func TestUnknownChatIsNotFound(t *testing.T) {
	c := newCLI(t)
	c.ok("init")
	for _, chat := range []string{"chat_0000000000000000", "character:nope"} {
		for _, args := range [][]string{{"policy", "--chat", chat}, {"prune", "--chat", chat}, {"prune", "--chat", chat, "--dry-run"}} {
			assert.Contains(t, c.fails(3, args...), "store.not_found", "%v", args)
		}
	}
	for _, args := range [][]string{{"policy", "--chat", "nope"}, {"prune", "--chat", "nope"}, {"prune", "--chat", "nope", "--dry-run"}} {
		assert.Contains(t, c.fails(2, args...), "wsctl.invalid_argument", "%v", args)
	}
}

// TestFailedCreatingCommandsLeaveNoStore: the commands that create a store
// where there is none (import, token create, actor upload, and sync and
// pull given --blobs) remove it again when they then fail, so a mistyped
// command leaves no empty store behind; a mistyped subcommand creates
// nothing at all, nor do push and reclaim-remote, which need a store.
func TestFailedCreatingCommandsLeaveNoStore(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o644))
	nowhere := "s3://wsstore/x?endpoint=http://127.0.0.1:1&region=us-east-1" // nothing listens there
	for _, args := range [][]string{
		{"--blobs", nowhere, "sync"},
		{"--blobs", nowhere, "pull"},
		{"--blobs", nowhere, "push"},
		{"--blobs", nowhere, "reclaim-remote"},
		{"token", "create", "--actor", "a/b"},
		{"token", "create", "--expires", "0d"},
		{"token", "create", "--expires="},
		{"actor", "upload", "a/b", "x.md", file},
		{"actor", "upload", "bob", "../x.md", file},
		{"actor", "uplaod", "bob", "x.md", file},
		{"import", file},
	} {
		c := newCLI(t)
		c.skipFsck = true
		_, errOut, code := c.run("", args...)
		assert.NotZero(t, code, "%v: %s", args, errOut)
		assert.NoDirExists(t, c.store, "%v", args)
	}
}

// TestNegativeGraceIsRefused: gc and reclaim-remote refuse a negative
// --grace, and reclaim-remote a --max below 1, as a usage error (status
// 2), before opening anything.
func TestNegativeGraceIsRefused(t *testing.T) {
	c := newCLI(t)
	c.ok("init")
	for _, args := range [][]string{{"gc", "--grace", "-5m"}, {"reclaim-remote", "--grace", "-5m"}} {
		assert.Contains(t, c.fails(2, args...), "--grace", "%v", args)
	}
	for _, max := range []string{"0", "-5"} {
		assert.Contains(t, c.fails(2, "reclaim-remote", "--max", max), "--max", max)
	}
}

// TestImportOfADirectoryIsAUsageError: a directory named as the archive is
// refused as export refuses one (status 2, wsctl.invalid_argument, never a
// workspace. code), not read as a damaged archive.
func TestImportOfADirectoryIsAUsageError(t *testing.T) {
	c := newCLI(t)
	c.ok("init")
	errOut := c.fails(2, "import", t.TempDir())
	assert.Contains(t, errOut, "is a directory")
	assert.Contains(t, errOut, "wsctl.invalid_argument")
	assert.NotContains(t, errOut, "workspace.")
}

// TestEmptyStoreIsRefusedNotTheDefault: --store "" (a script's unset
// variable) is a mistake, exit status 2 with nothing changed, never read
// as --store left out: it named the default store ($WSSTORE_DIR, else the
// user's data directory), so "wsctl --store "$DIR" rm RUN" deleted a run
// of the user's own store, and init, demo and import created one there.
func TestEmptyStoreIsRefusedNotTheDefault(t *testing.T) {
	c := newCLI(t)
	st := c.open()
	c.seedRun(st, "r1")
	require.NoError(t, st.Close())
	c.env["WSSTORE_DIR"] = c.store
	home := t.TempDir()
	c.env["HOME"] = home
	for _, args := range [][]string{
		{"--store", "", "rm", "r1", "--force"},
		{"--store=", "runs"},
		{"--store", "", "init"},
		{"--store", "", "demo"},
		{"--store", "", "policy", "--set", "keepCompletedRuns=0"},
	} {
		errOut := c.fails(2, args...)
		assert.Contains(t, errOut, "wsctl.invalid_argument", "%v", args)
		assert.Contains(t, errOut, "--store", "%v", args)
	}
	assert.Contains(t, c.ok("runs"), "r1", "the run is still there")
	var pol struct {
		Policy map[string]any `json:"policy"`
	}
	c.jsonOut(&pol, "policy")
	assert.Empty(t, pol.Policy, "the store's policy is as it was")
	delete(c.env, "WSSTORE_DIR")
	c.fails(2, "--store", "", "init")
	assert.NoDirExists(t, filepath.Join(home, ".local", "share", "wsstore"))
}

// TestEmptyFiltersAreRefused: an empty --chat, --status, --after or
// --stable-chat of a listing, or an empty --at (a script's unset
// variable) is a mistake, exit status 2, never read as the flag left out:
// runs --chat "" listed the runs of every chat, and cat, ls and checkout
// --at "" read the live workspace instead of a checkpoint.
func TestEmptyFiltersAreRefused(t *testing.T) {
	c := newCLI(t)
	st := c.open()
	c.seedRun(st, "r1")
	require.NoError(t, st.Close())
	co := filepath.Join(t.TempDir(), "co")
	for _, args := range [][]string{
		{"runs", "--chat", ""},
		{"runs", "--status="},
		{"runs", "--after", ""},
		{"chats", "--stable-chat", ""},
		{"chats", "--after="},
		{"cat", "r1", "output/a.md", "--at", ""},
		{"ls", "r1", "--at="},
		{"checkout", "r1", co, "--at", ""},
	} {
		errOut := c.fails(2, args...)
		assert.Contains(t, errOut, "wsctl.invalid_argument", "%v", args)
		assert.Contains(t, errOut, "is empty", "%v", args)
	}
	assert.NoDirExists(t, co)
	assert.Equal(t, "one\ntwo\n", c.ok("cat", "r1", "output/a.md", "--at", "live"))
}

// TestEmptyTargetsAreRefused: replicate --to "" (a script's unset
// variable) is a mistake, exit status 2, never read as --to left out,
// which replicates to the blob tier's default replica; export --chat ""
// is one too, as export --run "" and --actor "" are, not a chat not
// found (exit status 3).
func TestEmptyTargetsAreRefused(t *testing.T) {
	awsEnv(t)
	c := newCLI(t)
	c.ok("--blobs", "s3://wsstore/desk?endpoint=http://127.0.0.1:1&region=us-east-1", "demo")
	archive := filepath.Join(t.TempDir(), "a.wsar")
	for _, args := range [][]string{
		{"replicate", "--to", "", "--once"},
		{"replicate", "--to="},
		{"export", "--chat", "", archive},
		{"export", "--all", "--chat=", archive},
	} {
		errOut := c.fails(2, args...)
		assert.Contains(t, errOut, "wsctl.invalid_argument", "%v", args)
		assert.Contains(t, errOut, "empty", "%v", args)
	}
	assert.NoFileExists(t, archive)
}
