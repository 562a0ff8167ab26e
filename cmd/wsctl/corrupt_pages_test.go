package main

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// chunkPages returns the numbers of the database pages of type kind
// ("overflow", "leaf") that hold the chunks table, and the page size.
func chunkPages(t *testing.T, dbPath, kind string) ([]int64, int64) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+dbPath+"?mode=ro")
	require.NoError(t, err)
	defer db.Close()
	var size int64
	require.NoError(t, db.QueryRow(`PRAGMA page_size`).Scan(&size))
	rows, err := db.Query(`SELECT pageno FROM dbstat WHERE name = 'chunks' AND pagetype = ? ORDER BY pageno`, kind)
	require.NoError(t, err)
	defer rows.Close()
	var pages []int64
	for rows.Next() {
		var p int64
		require.NoError(t, rows.Scan(&p))
		pages = append(pages, p)
	}
	require.NoError(t, rows.Err())
	require.NotEmpty(t, pages, "chunks has %s pages", kind)
	return pages, size
}

// TestDamagedPagesUnderAChunkedFileAreCorrupt: pages under a file stored
// in chunks that are zeroed, overwritten with noise, or cut off the end
// of the database file make every path that reads them fail with
// store.corrupt (exit status 6): cat, checkout, batch's read and fsck;
// never a raw driver error with status 1.
func TestDamagedPagesUnderAChunkedFileAreCorrupt(t *testing.T) {
	bin := wsctlBinary(t)
	rng := rand.New(rand.NewPCG(3, 4))
	big := make([]byte, 6<<20)
	for i := range big {
		big[i] = "abcdefghij \n"[rng.IntN(12)]
	}
	damages := []struct {
		name   string
		damage func(t *testing.T, f *os.File, dbPath string)
	}{
		{"ZeroedOverflowPages", func(t *testing.T, f *os.File, dbPath string) {
			pages, size := chunkPages(t, dbPath, "overflow")
			for _, p := range pages[len(pages)/2 : len(pages)/2+4] {
				_, err := f.WriteAt(make([]byte, size), (p-1)*size)
				require.NoError(t, err)
			}
		}},
		{"OverwrittenOverflowPages", func(t *testing.T, f *os.File, dbPath string) {
			pages, size := chunkPages(t, dbPath, "overflow")
			noise := make([]byte, size)
			for _, p := range pages[len(pages)/3 : len(pages)/3+4] {
				for i := range noise {
					noise[i] = byte(rng.Uint32())
				}
				_, err := f.WriteAt(noise, (p-1)*size)
				require.NoError(t, err)
			}
		}},
		{"ZeroedLeafPage", func(t *testing.T, f *os.File, dbPath string) {
			pages, size := chunkPages(t, dbPath, "leaf")
			_, err := f.WriteAt(make([]byte, size), (pages[len(pages)/2]-1)*size)
			require.NoError(t, err)
		}},
		{"OverwrittenLeafPage", func(t *testing.T, f *os.File, dbPath string) {
			pages, size := chunkPages(t, dbPath, "leaf")
			noise := make([]byte, size)
			for i := range noise {
				noise[i] = byte(rng.Uint32())
			}
			_, err := f.WriteAt(noise, (pages[len(pages)/2]-1)*size)
			require.NoError(t, err)
		}},
		{"Truncated", func(t *testing.T, f *os.File, dbPath string) {
			fi, err := f.Stat()
			require.NoError(t, err)
			require.NoError(t, f.Truncate(fi.Size()*3/5))
		}},
	}
	for _, d := range damages {
		t.Run(d.name, func(t *testing.T) {
			c := binCLI{t: t, bin: bin, store: filepath.Join(t.TempDir(), "store")}
			b, _ := json.Marshal(map[string]any{"op": "write", "runId": "r", "path": "output/big.md", "content": string(big)})
			require.Equal(t, []string{"", ""}, c.batch(createLine, string(b)))
			dbPath := filepath.Join(c.store, "wsstore.db")
			f, err := os.OpenFile(dbPath, os.O_RDWR, 0)
			require.NoError(t, err)
			d.damage(t, f, dbPath)
			require.NoError(t, f.Close())

			for _, args := range [][]string{
				{"cat", "r", "output/big.md"},
				{"checkout", "r", filepath.Join(t.TempDir(), "out")},
				{"fsck"},
			} {
				_, errOut, status := c.run("", args...)
				assert.Equal(t, 6, status, "%v: %s", args, errOut)
				assert.Contains(t, errOut, "store.corrupt", "%v", args)
			}
			out, errOut, status := c.run(`{"op":"read","runId":"r","path":"output/big.md"}`+"\n", "batch")
			if status == 0 {
				var r struct {
					Error struct{ Code string } `json:"error"`
				}
				require.NoError(t, json.Unmarshal([]byte(out), &r), out)
				assert.Equal(t, "store.corrupt", r.Error.Code, out)
			} else {
				assert.Equal(t, 6, status, "batch: %s", errOut)
				assert.Contains(t, errOut, "store.corrupt")
			}
		})
	}
}

// TestDamagedRemoteRecordsAreCorrupt: a damaged page that makes the
// remote tier's empty object table seem to hold a row reads as damage,
// store.corrupt (exit status 6) with fsck too, not as a store that wants
// its tier's URL (store.invalid_options).
func TestDamagedRemoteRecordsAreCorrupt(t *testing.T) {
	bin := wsctlBinary(t)
	c := binCLI{t: t, bin: bin, store: filepath.Join(t.TempDir(), "s")}
	require.Equal(t, []string{"", ""}, c.batch(createLine, writeLine("r", "output/a.md", "hi\n")))
	dbPath := filepath.Join(c.store, "wsstore.db")
	db, err := sql.Open("sqlite", "file:"+dbPath)
	require.NoError(t, err)
	var size, root int64
	require.NoError(t, db.QueryRow(`PRAGMA page_size`).Scan(&size))
	require.NoError(t, db.QueryRow(`SELECT rootpage FROM sqlite_master WHERE name = 'remote_objects'`).Scan(&root))
	_, err = db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	f, err := os.OpenFile(dbPath, os.O_RDWR, 0)
	require.NoError(t, err)
	// The low byte of the root page's cell count: one cell, pointing
	// nowhere sensible.
	_, err = f.WriteAt([]byte{1}, (root-1)*size+4)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	for _, args := range [][]string{{"fsck"}, {"runs"}} {
		_, errOut, status := c.run("", args...)
		assert.Equal(t, 6, status, "%v: %s", args, errOut)
		assert.Contains(t, errOut, "store.corrupt", "%v", args)
	}
}

// TestVacuumFullLeavesADamagedStoreAsItWas: `vacuum --full` on a store
// whose events table has a damaged page fails with store.corrupt (exit
// status 6) and leaves the database file byte for byte as it was.
func TestVacuumFullLeavesADamagedStoreAsItWas(t *testing.T) {
	bin := wsctlBinary(t)
	c := binCLI{t: t, bin: bin, store: filepath.Join(t.TempDir(), "s")}
	lines := []string{createLine}
	for i := range 40 {
		lines = append(lines, writeLine("r", fmt.Sprintf("output/f%02d.md", i), strings.Repeat("line\n", 30)))
	}
	c.batch(lines...)
	dbPath := filepath.Join(c.store, "wsstore.db")
	db, err := sql.Open("sqlite", "file:"+dbPath)
	require.NoError(t, err)
	var size, page int64
	require.NoError(t, db.QueryRow(`PRAGMA page_size`).Scan(&size))
	require.NoError(t, db.QueryRow(`SELECT pageno FROM dbstat WHERE name = 'events' AND pagetype = 'leaf' ORDER BY pageno LIMIT 1`).Scan(&page))
	_, err = db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	f, err := os.OpenFile(dbPath, os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(make([]byte, size), (page-1)*size)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	before, err := os.ReadFile(dbPath)
	require.NoError(t, err)

	_, errOut, status := c.run("", "vacuum", "--full")
	assert.Equal(t, 6, status, errOut)
	assert.Contains(t, errOut, "store.corrupt")
	after, err := os.ReadFile(dbPath)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(before, after), "vacuum --full changed the damaged file")
}

// TestDamagedCellPointerIsCorrupt: a damaged cell pointer on the first
// leaf page of blobs, or of checkpoints, lets rows through whose values
// do not scan (a NULL codec, a NULL run id). fsck reports it with its
// report and status 6, and stats, du and gc fail with store.corrupt
// (status 6), never a raw scan error with status 1.
func TestDamagedCellPointerIsCorrupt(t *testing.T) {
	bin := wsctlBinary(t)
	src := t.TempDir()
	c := binCLI{t: t, bin: bin, store: src}
	_, stderr, status := c.run("", "demo")
	require.Equal(t, 0, status, stderr)
	_, stderr, status = c.run("", "vacuum") // the log folded into the file
	require.Equal(t, 0, status, stderr)
	for _, table := range []string{"blobs", "checkpoints"} {
		t.Run(table, func(t *testing.T) {
			dir := t.TempDir()
			b, err := os.ReadFile(filepath.Join(src, "wsstore.db"))
			require.NoError(t, err)
			dbPath := filepath.Join(dir, "wsstore.db")
			require.NoError(t, os.WriteFile(dbPath, b, 0o600))
			db, err := sql.Open("sqlite", "file:"+dbPath+"?mode=ro")
			require.NoError(t, err)
			var page, size int64
			require.NoError(t, db.QueryRow(`SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf' ORDER BY pageno`, table).Scan(&page))
			require.NoError(t, db.QueryRow(`PRAGMA page_size`).Scan(&size))
			require.NoError(t, db.Close())
			at := (page-1)*size + 8 // the page's first cell pointer
			for i := range int64(4) {
				b[at+i] ^= 0xa5
			}
			require.NoError(t, os.WriteFile(dbPath, b, 0o600))

			bad := binCLI{t: t, bin: bin, store: dir}
			out, stderr, status := bad.run("", "--json", "fsck")
			assert.Equal(t, 6, status, stderr)
			assert.Contains(t, out, `"problems"`, "the report is printed")
			for _, args := range [][]string{{"stats"}, {"du"}, {"gc", "--grace", "0"}} {
				_, stderr, status := bad.run("", args...)
				assert.Equal(t, 6, status, "%v: %s", args, stderr)
				assert.Contains(t, stderr, "store.corrupt", args)
			}
		})
	}
}

// TestMissingContentIsCorrupt: a file whose content row is gone from the
// store (fsck: a missing blob) makes cat, checkout and export fail with
// store.corrupt (status 6), not not_found (3, which a script reads as "no
// such run or file").
func TestMissingContentIsCorrupt(t *testing.T) {
	bin := wsctlBinary(t)
	c := binCLI{t: t, bin: bin, store: t.TempDir()}
	out, stderr, status := c.run(`{"op":"run.create","runId":"r","chat":{"kind":"k","stableChatId":"s"}}`+"\n"+
		`{"op":"write","path":"output/main.md","content":"the content that goes missing\n"}`+"\n", "batch")
	require.Equal(t, 0, status, stderr)
	var resp struct {
		Result struct {
			Hash string `json:"hash"`
		} `json:"result"`
	}
	require.NoError(t, json.Unmarshal([]byte(strings.Split(strings.TrimSpace(out), "\n")[1]), &resp))
	require.NotEmpty(t, resp.Result.Hash)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(c.store, "wsstore.db"))
	require.NoError(t, err)
	res, err := db.Exec(`DELETE FROM blobs WHERE hex(hash) = upper(?)`, resp.Result.Hash)
	require.NoError(t, err)
	n, err := res.RowsAffected()
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	require.NoError(t, db.Close())

	_, stderr, status = c.run("", "fsck")
	require.Equal(t, 6, status, stderr)
	for _, args := range [][]string{
		{"cat", "r", "output/main.md"},
		{"checkout", "r", filepath.Join(t.TempDir(), "out")},
		{"export", "--run", "r", filepath.Join(t.TempDir(), "a.wsar")},
	} {
		_, stderr, status := c.run("", args...)
		assert.Equal(t, 6, status, "%v: %s", args, stderr)
		assert.Contains(t, stderr, "store.corrupt", args)
	}
}
