package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

func TestStatsAndDU(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.ok("demo")

	out := c.ok("stats")
	assert.Regexp(t, `(?m)^runs\s+1$`, out)
	assert.Regexp(t, `(?m)^checkpoints\s+7$`, out)
	assert.Regexp(t, `(?m)^blobs\s+\d+ \(`, out)
	var s wsstore.Stats
	c.jsonOut(&s, "stats")
	assert.EqualValues(t, 1, s.Runs)
	assert.EqualValues(t, 22, s.Events) // scratch_collected included

	out = c.ok("du")
	assert.Regexp(t, `CHAT\s+RUN\s+FILES\s+SIZE\s+CHECKPOINTS\s+UNIQUE`, out)
	assert.Contains(t, out, "(persist)")
	assert.Regexp(t, `demo_\S+\s+4\s+\d+ B\s+7\s+`, out)
	var us []wsstore.Usage
	c.jsonOut(&us, "du")
	require.Len(t, us, 2)
	assert.Equal(t, "", us[0].RunID)
	assert.EqualValues(t, 4, us[1].Files)
}

func TestRm(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	st := c.open()
	c.seedRun(st, "run_a")
	c.seedRun(st, "run_b")
	_, err := st.Runs.Finish(context.Background(), "run_b")
	require.NoError(t, err)

	errOut := c.fails(5, "rm", "run_a")
	assert.Contains(t, errOut, "run.invalid_transition")
	assert.Contains(t, errOut, "--force")
	run, err := st.Runs.Run(context.Background(), "run_a")
	require.NoError(t, err)
	assert.Equal(t, runs.Running, run.Status, "a refused rm changes nothing")

	assert.Equal(t, "deleted run run_b; \"wsctl gc\" frees the files no other run shares\n", c.ok("rm", "run_b"))
	out := c.ok("rm", "run_a", "--force")
	assert.Contains(t, out, "cancelled run run_a\n")
	assert.Equal(t, "[]\n", c.ok("runs", "--json"))
	c.fails(3, "rm", "run_a")
	c.fails(3, "log", "run_a")
}

func TestGCFreesDeletedRunAndVacuumShrinks(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	st := c.open()
	ctx := context.Background()
	c.seedRun(st, "keep")
	c.seedRun(st, "doomed")
	big := make([]byte, 512<<10) // incompressible: stored as it is
	_, _ = rand.Read(big)
	fi, err := st.Runs.Workspace("doomed", runs.ModelScope).Write(ctx, vfs.MustPath("output/big.bin"), big, vfs.WriteOptions{})
	require.NoError(t, err)
	c.ok("rm", "doomed", "--force")
	has := func() bool {
		ok, err := st.Blobs.Has(ctx, fi.Hash)
		require.NoError(t, err)
		return ok
	}

	// The default grace keeps what was written just now.
	var rep wsstore.GCReport
	c.jsonOut(&rep, "gc")
	assert.Zero(t, rep.Freed.Blobs)
	assert.Positive(t, rep.Kept.Blobs)
	assert.True(t, has())

	out := c.ok("gc", "--dry-run", "--grace", "0")
	assert.Regexp(t, `would free\s+\d+\s+0\s+\d+\s+5\d\d\.\d KiB`, out)
	assert.Contains(t, out, "dry run: nothing deleted")
	assert.True(t, has(), "a dry run deletes nothing")

	var before wsstore.VacuumReport
	c.jsonOut(&before, "vacuum") // the file while it holds the blob
	out = c.ok("gc", "--grace", "0")
	assert.Regexp(t, `(?m)^freed\s+[1-9]\d*\s+0\s+[1-9]\d*\s+5\d\d\.\d KiB$`, out)
	assert.Contains(t, out, "wsctl vacuum")
	assert.False(t, has(), "the deleted run's unique blob is gone")
	assert.Equal(t, "one\ntwo\n", c.ok("cat", "keep", "output/a.md"), "what other runs use stays")

	c.jsonOut(&rep, "gc", "--grace", "0")
	assert.Zero(t, rep.FreedBytes, "nothing left to free")

	var vr wsstore.VacuumReport
	c.jsonOut(&vr, "vacuum")
	// gc's Close gives the freed pages back already; vacuum finds the
	// file that small or makes it so.
	assert.Less(t, vr.AfterBytes, before.AfterBytes-400<<10, "the freed pages are given back")
	assert.LessOrEqual(t, vr.AfterBytes, vr.BeforeBytes)
	assert.Regexp(t, `^vacuum: .+ before, .+ after \(.+ freed\)\n$`, c.ok("vacuum"))
	c.ok("fsck")
}

// TestProgressOnlyOnATerminal: long commands draw their bar on stderr
// when it is a terminal, and stdout holds only the result, --json or not.
func TestProgressOnlyOnATerminal(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.ok("demo")
	for _, args := range [][]string{{"gc"}, {"fsck"}, {"vacuum"}, {"checkout", "RUN", "DIR"},
		{"gc", "--json"}, {"fsck", "--json"}, {"vacuum", "--json"}, {"checkout", "RUN", "DIR", "--json"}} {
		run := func(term bool) (string, string) {
			c.term = term
			a := append([]string(nil), args...)
			if a[0] == "checkout" {
				var list []runs.Run
				c.jsonOut(&list, "runs")
				a[1], a[2] = list[0].ID, filepath.Join(t.TempDir(), "co")
			}
			out, errOut, code := c.run("", a...)
			require.Equal(t, 0, code, "%v: %s", a, errOut)
			return out, errOut
		}
		piped, pipedErr := run(false)
		assert.NotContains(t, piped, "\r", "%v piped", args)
		assert.Empty(t, pipedErr, "%v piped", args)
		out, onTerm := run(true)
		assert.Contains(t, onTerm, "\r", "%v on a terminal", args)
		assert.Contains(t, onTerm, "\r\x1b[K", "%v clears its bar", args)
		assert.True(t, strings.HasSuffix(onTerm, "\r\x1b[K"), "%v leaves stderr clean", args)
		assert.NotContains(t, out, "\r", "%v: no bar on stdout", args)
		assert.NotContains(t, out, "\x1b", "%v: no control codes on stdout", args)
		assert.Equal(t, strings.Count(piped, "\n"), strings.Count(out, "\n"), "%v", args)
		if args[len(args)-1] == "--json" {
			assert.True(t, json.Valid([]byte(out)), "%v: stdout is the JSON alone: %q", args, out)
		}
	}
	c.term = false
}

func TestFsck(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.ok("demo")
	out := c.ok("fsck")
	assert.Regexp(t, `^checked \d+ blobs, 0 chunks, \d+ trees, 1 runs, 7 checkpoints\nok: no problems found\n$`, out)
	var rep wsstore.FsckReport
	c.jsonOut(&rep, "fsck")
	assert.Empty(t, rep.Problems)
}

// rawDB opens the store's database file directly, read-write, to damage
// it on purpose.
func rawDB(t *testing.T, c *cli) *sql.DB {
	t.Helper()
	// The store may be open beside it, its background step writing: wait
	// for the lock as the store's own connections do.
	db, err := sql.Open("sqlite", "file:"+filepath.Join(c.store, wsstore.DBName)+"?_pragma=busy_timeout(10000)")
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}

// fsckTarget is a store with run_a seeded, not checked when the test
// ends, and the blob of its output/a.md, whose rows a test damages.
func fsckTarget(t *testing.T) (*cli, cas.Hash) {
	c := newCLI(t)
	c.skipFsck = true
	st := c.open()
	c.seedRun(st, "run_a")
	fi, err := st.Runs.Workspace("run_a", runs.HostScope).Stat(context.Background(), vfs.MustPath("output/a.md"))
	require.NoError(t, err)
	return c, fi.Hash
}

// requireOneFsckProblem: fsck exits 6 with one problem of kind about
// ref, its line matching line, and so does fsck --json.
func requireOneFsckProblem(t *testing.T, c *cli, kind, ref, line string) {
	t.Helper()
	stdout, errOut, code := c.run("", "fsck")
	assert.Equal(t, 6, code)
	assert.Regexp(t, `(?m)^`+kind+`\s+`+ref+`\s+`+line, stdout)
	assert.Equal(t, "wsctl: fsck: store.corrupt: 1 problem found\n", errOut)

	var rep wsstore.FsckReport
	jsonOut, _, code := c.run("", "fsck", "--json")
	assert.Equal(t, 6, code, "--json still exits non-zero")
	require.NoError(t, json.Unmarshal([]byte(jsonOut), &rep))
	require.Len(t, rep.Problems, 1)
	assert.Equal(t, kind, rep.Problems[0].Kind)
	assert.Equal(t, ref, rep.Problems[0].Ref)
}

func TestFsckNamesAlteredBlob(t *testing.T) {
	t.Parallel()
	c, h := fsckTarget(t)
	db := rawDB(t, c)
	var data []byte
	require.NoError(t, db.QueryRow(`SELECT data FROM blobs WHERE hash = ?`, h[:]).Scan(&data))
	data[len(data)-1] ^= 0x20 // one byte altered
	_, err := db.Exec(`UPDATE blobs SET data = ? WHERE hash = ?`, data, h[:])
	require.NoError(t, err)
	requireOneFsckProblem(t, c, "blob", h.String(), `\S`)
}

func TestFsckNamesAWrongSize(t *testing.T) {
	t.Parallel()
	c, h := fsckTarget(t)
	_, err := rawDB(t, c).Exec(`UPDATE blobs SET stored = stored + 1000 WHERE hash = ?`, h[:])
	require.NoError(t, err)
	requireOneFsckProblem(t, c, "size", h.String(), `blob records stored size \d+; its row holds \d+ bytes$`)
}

func TestFsckNamesDanglingTree(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.skipFsck = true
	st := c.open()
	c.seedRun(st, "run_a")
	cp, err := st.Checkpoints.Get(context.Background(), nil, "run_a", 2)
	require.NoError(t, err)
	// The tree of output/ at cp_000002: only that checkpoint reaches it.
	e, err := st.Trees.Lookup(context.Background(), nil, cp.Root, vfs.MustPath("output"))
	require.NoError(t, err)

	_, err = rawDB(t, c).Exec(`DELETE FROM trees WHERE hash = ?`, e.Hash[:])
	require.NoError(t, err)

	stdout, _, code := c.run("", "fsck")
	assert.Equal(t, 6, code)
	assert.Regexp(t, `(?m)^reference\s+`+e.Hash.String()+`\s+\S`, stdout, "the missing tree is named:\n%s", stdout)
}

func TestCheckout(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.seedRun(c.open(), "run_a")
	read := func(dir, name string) string {
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
		require.NoError(t, err)
		return string(b)
	}

	dir := filepath.Join(t.TempDir(), "new", "co")
	out := c.ok("checkout", "run_a", dir)
	assert.Contains(t, out, "checked out 3 files")
	assert.Equal(t, "one\ntwo\n", read(dir, "output/a.md"))
	assert.NoDirExists(t, filepath.Join(dir, "scratch"), "the scratch domain is never exported")
	assert.Equal(t, `{"messages":[]}`, read(dir, "input/prompt_snapshot.json"))
	assert.FileExists(t, filepath.Join(dir, "input", "persist_snapshot.json"))

	t.Run("At", func(t *testing.T) {
		dir := t.TempDir() // exists, empty: fine
		var res checkoutResult
		c.jsonOut(&res, "checkout", "run_a", dir, "--at", "cp_000002")
		assert.Equal(t, "cp_000002", res.Checkpoint)
		assert.Equal(t, 3, res.Files)
		assert.Equal(t, "one\n", read(dir, "output/a.md"))
		assert.NoFileExists(t, filepath.Join(dir, "scratch", "b.bin"))
	})
	t.Run("ErrNotEmpty", func(t *testing.T) {
		errOut := c.fails(5, "checkout", "run_a", dir)
		assert.Contains(t, errOut, "not empty")
		assert.Equal(t, "one\ntwo\n", read(dir, "output/a.md"))
	})
	t.Run("ErrFile", func(t *testing.T) {
		f := filepath.Join(t.TempDir(), "file")
		require.NoError(t, os.WriteFile(f, []byte("x"), 0o644))
		c.fails(5, "checkout", "run_a", f)
		assert.Equal(t, "x", read(filepath.Dir(f), "file"))
	})
	t.Run("ErrNoRun", func(t *testing.T) {
		d := filepath.Join(t.TempDir(), "x")
		c.fails(3, "checkout", "nope", d)
		assert.NoDirExists(t, d, "nothing is created for a run that does not exist")
	})
	t.Run("ErrMidwayLeavesNothing", func(t *testing.T) {
		// A blob that no longer reads stops the checkout after the files
		// before it were written: they are removed again.
		c := newCLI(t)
		c.seedRun(c.open(), "run_a")
		_, err := rawDB(t, c).Exec(`UPDATE blobs SET data = CAST('damaged' AS BLOB) WHERE hash = ?`, cas.Sum([]byte("one\ntwo\n")))
		require.NoError(t, err)
		c.skipFsck = true
		dir := t.TempDir()
		errOut := c.fails(6, "checkout", "run_a", dir)
		assert.Contains(t, errOut, "store.corrupt")
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		assert.Empty(t, entries, "a failed checkout leaves the directory as it found it")
	})
}

// hashFile returns the content address of a file, to prove it unchanged.
func hashFile(t *testing.T, path string) cas.Hash {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return cas.Sum(b)
}

func TestNewerFormatExits7(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.ok("demo")
	_, err := rawDB(t, c).Exec(`INSERT INTO goose_db_version (version_id, is_applied) VALUES (9999, 1)`)
	require.NoError(t, err)
	c.skipFsck = true // this build cannot open the store any more
	for _, args := range [][]string{{"runs"}, {"gc"}, {"demo"}, {"fsck"}} {
		assert.Contains(t, c.fails(7, args...), "store.newer_format", "%v", args)
	}
}

// TestDryRunsLeaveTheStoreAsItWas: gc --dry-run and prune --dry-run only
// read, so they leave the database file as it was (free pages included),
// as batch answers them on a store it may not write.
func TestDryRunsLeaveTheStoreAsItWas(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	ctx := context.Background()
	st, err := wsstore.Open(ctx, c.store, wsstore.Options{})
	require.NoError(t, err)
	c.seedRun(st, "r")
	require.NoError(t, st.Close())
	// Free pages, which a writing open gives back as it closes.
	db := filepath.Join(c.store, "wsstore.db")
	raw, err := sql.Open("sqlite", "file:"+db)
	require.NoError(t, err)
	for _, q := range []string{
		`CREATE TABLE padding AS WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 64)
			SELECT randomblob(4096) AS b FROM n`,
		`DROP TABLE padding`,
	} {
		_, err := raw.ExecContext(ctx, q)
		require.NoError(t, err)
	}
	var free int
	require.NoError(t, raw.QueryRowContext(ctx, `PRAGMA freelist_count`).Scan(&free))
	require.Positive(t, free)
	require.NoError(t, raw.Close())
	before, err := os.ReadFile(db)
	require.NoError(t, err)

	for _, args := range [][]string{{"gc", "--dry-run", "--grace", "0"}, {"prune", "--dry-run"}} {
		c.ok(args...)
		after, err := os.ReadFile(db)
		require.NoError(t, err)
		assert.True(t, bytes.Equal(before, after), "%v changed the database file", args)
	}
}

// TestVacuumBesideAnOpenRead: a read another process holds open keeps the
// pages a vacuum gives back in the write-ahead log, so the file does not
// shrink yet. vacuum says so, never that it freed a negative size, and
// the next vacuum after the read ends gives the space back.
func TestVacuumBesideAnOpenRead(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	ctx := context.Background()
	st := c.open()
	c.seedRun(st, "r")
	// Free pages: a deleted table's, which nothing gives back by itself.
	require.NoError(t, st.DB.Update(ctx, func(tx *index.Tx) error {
		_, err := tx.ExecContext(ctx, `CREATE TABLE padding AS WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 512)
			SELECT randomblob(4096) AS b FROM n`)
		return err
	}))
	require.NoError(t, st.DB.Update(ctx, func(tx *index.Tx) error {
		_, err := tx.ExecContext(ctx, `DROP TABLE padding`)
		return err
	}))

	reading, release, done := make(chan struct{}), make(chan struct{}), make(chan error)
	go func() {
		done <- st.DB.View(ctx, func(tx *index.Tx) error {
			var n int
			if err := tx.GetContext(ctx, &n, `SELECT count(*) FROM runs`); err != nil {
				return err
			}
			close(reading)
			<-release
			return nil
		})
	}()
	<-reading
	var held wsstore.VacuumReport
	c.jsonOut(&held, "vacuum")
	assert.Greater(t, held.LogBytes, int64(1<<20), "the pages given back wait in the log: %+v", held)
	out := c.ok("vacuum")
	assert.NotContains(t, out, "(-")
	assert.Contains(t, out, "write-ahead log")
	close(release)
	require.NoError(t, <-done)

	var vr wsstore.VacuumReport
	c.jsonOut(&vr, "vacuum")
	assert.Zero(t, vr.LogBytes, "%+v", vr)
	assert.Less(t, vr.AfterBytes, held.AfterBytes-1<<20, "the space comes back once the read ends")
	assert.Regexp(t, `^vacuum: .+ before, .+ after \(.+ freed\)\n$`, c.ok("vacuum"))
}
