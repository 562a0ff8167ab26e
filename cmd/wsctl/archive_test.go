package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/archive"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

// TestExportImport moves a store to another one the way the README shows:
// export --all to a file, import it, and again through a pipe.
func TestExportImport(t *testing.T) {
	desk := newCLI(t)
	st := desk.open()
	desk.seedRun(st, "r1")
	_, err := st.Actors.Upload(context.Background(), "alice", "reports/weekly.md", strings.NewReader("week"))
	require.NoError(t, err)
	require.NoError(t, st.Close())

	file := filepath.Join(t.TempDir(), "store.wsar")
	var exp archive.Summary
	desk.jsonOut(&exp, "export", "--all", file)
	assert.Equal(t, 1, exp.Runs)
	assert.Equal(t, 1, exp.Actors)
	_, err = os.Stat(file)
	require.NoError(t, err)

	phone := newCLI(t)
	var imp archive.Summary
	phone.jsonOut(&imp, "import", file)
	assert.Equal(t, exp.Objects, imp.Objects)
	assert.Contains(t, imp.Added, "run r1")
	assert.Contains(t, phone.ok("cat", "r1", "output/a.md"), "one\ntwo")
	assert.Contains(t, phone.ok("import", file), "added 0, unchanged 3, conflicts 0", "a second import says it added nothing")
	assert.NotContains(t, phone.ok("ls", "r1", "-R"), "scratch/raw.bin", "scratch is never exported")
	var scratch []vfs.FileInfo
	phone.jsonOut(&scratch, "ls", "r1", "scratch")
	assert.Empty(t, scratch, "scratch/ stands empty, as a visible root does")

	// Through a pipe: export - | import -. Importing again adds nothing.
	out, errOut, code := desk.run("", "export", "--run", "r1", "-")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, errOut, "exported 1 chats, 1 runs")
	var outBuf, errBuf bytes.Buffer
	code = execute(context.Background(), phone.app(), []string{"--store", phone.store, "import", "-", "--json"}, strings.NewReader(out), &outBuf, &errBuf)
	require.Equal(t, 0, code, errBuf.String())
	assert.Contains(t, outBuf.String(), `"added": []`, "an empty list, never left out")

	t.Run("ChatByIDOrKey", func(t *testing.T) {
		id := runs.ChatWorkspaceID(runs.ChatKey{Kind: "character", StableChatID: "chat-r1"})
		for _, ref := range []string{id, "character:chat-r1"} {
			var sum archive.Summary
			desk.jsonOut(&sum, "export", "--chat", ref, filepath.Join(t.TempDir(), "chat.wsar"))
			assert.Equal(t, 1, sum.Chats, ref)
			assert.Equal(t, 1, sum.Runs, ref)
		}
		assert.Contains(t, desk.fails(3, "export", "--chat", "character:nobody", filepath.Join(t.TempDir(), "x.wsar")), "not_found")
		assert.Contains(t, desk.fails(2, "export", "--chat", ":chat-r1", filepath.Join(t.TempDir(), "x.wsar")), "KIND:STABLE_CHAT_ID")
	})
	t.Run("RunByPrefixOrLatest", func(t *testing.T) {
		for _, ref := range []string{"latest", "r"} {
			var sum archive.Summary
			desk.jsonOut(&sum, "export", "--run", ref, filepath.Join(t.TempDir(), "run.wsar"))
			assert.Equal(t, 1, sum.Runs, ref)
		}
		assert.Contains(t, desk.fails(3, "export", "--run", "zz", filepath.Join(t.TempDir(), "x.wsar")), "run.not_found")
	})
	t.Run("Batch", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "batch.wsar")
		out, errOut, code := desk.run(`{"op":"export","path":"`+path+`","runs":["r1"]}`+"\n", "batch")
		require.Equal(t, 0, code, errOut)
		assert.Contains(t, out, `"ok":true`)
		other := newCLI(t)
		out, errOut, code = other.run(`{"op":"import","path":"`+path+`"}`+"\n", "batch")
		require.Equal(t, 0, code, errOut)
		assert.Contains(t, out, `"added":["chat `)
	})

	t.Run("StoreCap", func(t *testing.T) {
		// An import keeps to the store's cap as writes do, refused
		// before anything is written.
		small := newCLI(t)
		small.ok("init")
		small.ok("policy", "--set", "maxStoreBytes=2000")
		out, errOut, code := small.run("", "import", file)
		assert.NotZero(t, code, "%s", out)
		assert.Contains(t, errOut, "workspace.size_limit_exceeded")
		assert.NotContains(t, small.ok("runs"), "r1", "nothing imported")
		big := newCLI(t)
		big.ok("init")
		big.ok("policy", "--set", "maxStoreBytes=100000000")
		big.ok("import", file)
	})
	t.Run("Refusals", func(t *testing.T) {
		// Command-line mistakes, coded as such (never workspace.*).
		assert.Contains(t, desk.fails(2, "export", "--actor", "alice", "--skip-workspace", file), "wsctl.invalid_argument")
		assert.Contains(t, desk.fails(2, "export", file), "wsctl.invalid_argument")
		assert.Contains(t, desk.fails(2, "export", "--all", filepath.Join(t.TempDir(), "nodir", "x.wsar")), "wsctl.invalid_argument")
		assert.Contains(t, desk.fails(2, "export", "--all", t.TempDir()), "is a directory")
		bad := filepath.Join(t.TempDir(), "bad.wsar")
		b, err := os.ReadFile(file)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(bad, b[:len(b)/2], 0o644))
		other := newCLI(t)
		assert.Contains(t, other.fails(6, "import", bad), "archive.corrupt")
	})
}

// TestWritesNeverOverTheStore: export and actor download refuse to write
// over the store's own database file, however it is named, and import
// refuses to read it, leaving it as it was.
func TestWritesNeverOverTheStore(t *testing.T) {
	c := newCLI(t)
	st := c.open()
	c.seedRun(st, "r1")
	_, err := st.Actors.Upload(context.Background(), "bob", "a.md", strings.NewReader("hello"))
	require.NoError(t, err)
	require.NoError(t, st.Close())
	db := filepath.Join(c.store, "wsstore.db")
	link := filepath.Join(t.TempDir(), "link")
	require.NoError(t, os.Symlink(c.store, link))
	for _, target := range []string{
		db,
		filepath.Join(c.store, "..", filepath.Base(c.store), "wsstore.db"),
		filepath.Join(link, "wsstore.db"),
		db + "-wal",
	} {
		before, err := os.ReadFile(db)
		require.NoError(t, err)
		errOut := c.fails(2, "export", "--all", target)
		assert.Contains(t, errOut, "wsctl.invalid_argument", target)
		assert.Contains(t, errOut, "the store's own database file", target)
		errOut = c.fails(2, "actor", "download", "bob", "a.md", target)
		assert.Contains(t, errOut, "the store's own database file", target)
		errOut = c.fails(2, "import", target)
		assert.Contains(t, errOut, "the store's own database file", target)
		after, err := os.ReadFile(db)
		require.NoError(t, err)
		assert.True(t, bytes.Equal(before, after), "%s: the database is as it was", target)
	}
	assert.Contains(t, c.ok("runs"), "r1")
}

// TestFailedImportLeavesNoNewStore: an import that fails into a store it
// had to create removes that store again, whether it made the directory
// or only the database in an empty one; a store that was there stays.
func TestFailedImportLeavesNoNewStore(t *testing.T) {
	bin := wsctlBinary(t)
	junk := filepath.Join(t.TempDir(), "junk.wsar")
	require.NoError(t, os.WriteFile(junk, bytes.Repeat([]byte("not an archive "), 100), 0o644))

	missing := filepath.Join(t.TempDir(), "new")
	_, errOut, status := binCLI{t: t, bin: bin, store: missing}.run("", "import", junk)
	assert.Equal(t, 6, status, errOut)
	assert.NoDirExists(t, missing)

	emptyDir := t.TempDir()
	_, errOut, status = binCLI{t: t, bin: bin, store: emptyDir}.run("", "import", junk)
	assert.Equal(t, 6, status, errOut)
	entries, err := os.ReadDir(emptyDir)
	require.NoError(t, err)
	assert.Empty(t, entries)

	c := binCLI{t: t, bin: bin, store: filepath.Join(t.TempDir(), "s")}
	require.Equal(t, []string{""}, c.batch(createLine))
	_, errOut, status = c.run("", "import", junk)
	assert.Equal(t, 6, status, errOut)
	_, errOut, status = c.run("", "show", "r")
	assert.Equal(t, 0, status, "a store that was there stays: %s", errOut)
}

// TestImportOfAFileItCannotOpenIsNotNotFound: an archive named on the
// command line that is there but cannot be opened (no permission to read
// it, a name too long for the file system) or no name at all is the
// command line's mistake, wsctl.invalid_argument (exit status 2), as
// export and actor upload say of a file they cannot open; it was
// store.not_found (exit status 3), which says the file is not there. A
// file that is not there stays store.not_found. No store is made.
func TestImportOfAFileItCannotOpenIsNotNotFound(t *testing.T) {
	c := newCLI(t)
	dir := t.TempDir()
	cases := [][]string{
		{"import", ""},
		{"import", filepath.Join(dir, strings.Repeat("a", 300)+".wsar")},
	}
	if os.Geteuid() != 0 { // root reads whatever the permissions say
		locked := filepath.Join(dir, "locked.wsar")
		require.NoError(t, os.WriteFile(locked, []byte("x"), 0o000))
		cases = append(cases, []string{"import", locked})
	}
	for _, args := range cases {
		errOut := c.fails(2, args...)
		assert.Contains(t, errOut, "wsctl.invalid_argument", "%q", args)
		assert.NoDirExists(t, c.store, "%q", args)
	}
	errOut := c.fails(3, "import", filepath.Join(dir, "missing.wsar"))
	assert.Contains(t, errOut, "store.not_found")
	assert.NoDirExists(t, c.store)
}

// TestImportPrintsCounts: wsctl import prints how many objects it added,
// however many its summary names: the first archive.MaxNames.
func TestImportPrintsCounts(t *testing.T) {
	desk := newCLI(t)
	st := desk.open()
	n := archive.MaxNames + 2
	for i := range n {
		_, err := st.Runs.CreateRun(context.Background(), runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "c"},
			RunID: fmt.Sprintf("r-%06d", i)})
		require.NoError(t, err)
	}
	require.NoError(t, st.Close())
	file := filepath.Join(t.TempDir(), "store.wsar")
	desk.ok("export", "--all", file)

	phone := newCLI(t)
	assert.Contains(t, phone.ok("import", file), fmt.Sprintf("added %d, unchanged 0, conflicts 0", n+1))
	var imp archive.Summary
	phone.jsonOut(&imp, "import", file)
	assert.Equal(t, n+1, imp.UnchangedCount)
	assert.Len(t, imp.Unchanged, archive.MaxNames)
}
