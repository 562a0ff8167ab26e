package journal_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/journal"
)

// bigEvents is the length of the run the position benchmarks compare: an
// append or a page at its end must cost what it costs at its start.
const bigEvents = 1_000_000

// bigStore holds a run "run_big" of bigEvents events. Building it takes
// seconds, so it is built once per test binary, on first use, and removed
// by TestMain; storetest.OpenDB would tie it to one benchmark's lifetime.
var bigStore struct {
	once sync.Once
	dir  string
	db   *index.DB
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if bigStore.db != nil {
		_ = bigStore.db.Close()
	}
	if bigStore.dir != "" {
		_ = os.RemoveAll(bigStore.dir)
	}
	os.Exit(code)
}

func openBigStore(b *testing.B) *index.DB {
	b.Helper()
	bigStore.once.Do(func() {
		ctx := context.Background()
		bigStore.dir, bigStore.err = os.MkdirTemp("", "journal-bench-")
		if bigStore.err != nil {
			return
		}
		bigStore.db, bigStore.err = index.Open(ctx, filepath.Join(bigStore.dir, "store.db"), index.Options{})
		if bigStore.err != nil {
			return
		}
		// One INSERT … SELECT over a recursive CTE, in one transaction:
		// rows arrive in key order, so SQLite appends to the B-tree
		// instead of inserting a million times through the Go driver.
		bigStore.err = bigStore.db.Update(ctx, func(tx *index.Tx) error {
			_, err := tx.ExecContext(ctx, `WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < ?)
				INSERT INTO events (run_id, seq, type, level, at, payload)
				SELECT 'run_big', n, 'tool_call_completed', 'info', 1767225600000000000 + n * 1000000,
					'{"callId":"call_' || n || '","tool":"workspace.read_file","ok":true}'
				FROM c`, bigEvents)
			return err
		})
	})
	require.NoError(b, bigStore.err, "build the big run")
	return bigStore.db
}

var errRollback = errors.New("benchmark: roll back")

func BenchmarkAppend(b *testing.B) {
	ctx := context.Background()
	payload := journal.FileWritten{Path: "output/main.md", Hash: "9f2c0a7b1e3d4c5b6a7988776655443322110ffeeddccbbaa99887766554433", Bytes: 4096, Mode: "overwrite"}

	// One committed event per Update on a growing run: the cost a caller
	// pays per journaled step, commit included.
	b.Run("commit", func(b *testing.B) {
		db := storetest.OpenDB(b, index.Options{})
		j := journal.New(db, nil)
		b.ReportAllocs()
		for b.Loop() {
			err := db.Update(ctx, func(tx *index.Tx) error {
				_, err := j.Append(ctx, tx, "run_bench", journal.WorkspaceFileWritten, journal.Info, payload)
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})

	// The same append at seq 1 and at seq 1,000,001 of one store, rolled
	// back each time so the position stays put; equal figures show the
	// seq lookup does not depend on the run's length.
	for _, bc := range []struct {
		name  string
		runID string
		want  int64
	}{
		{"seq1", "run_empty", 1},
		{"seq1000001", "run_big", bigEvents + 1},
	} {
		b.Run(bc.name, func(b *testing.B) {
			db := openBigStore(b)
			j := journal.New(db, nil)
			b.ReportAllocs()
			for b.Loop() {
				err := db.Update(ctx, func(tx *index.Tx) error {
					e, err := j.Append(ctx, tx, bc.runID, journal.WorkspaceFileWritten, journal.Info, payload)
					if err != nil {
						return err
					}
					if e.Seq != bc.want {
						b.Fatalf("seq %d, want %d", e.Seq, bc.want)
					}
					return errRollback
				})
				if !errors.Is(err, errRollback) {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkPage(b *testing.B) {
	ctx := context.Background()
	for _, bc := range []struct {
		name string
		q    journal.PageQuery
	}{
		{"seq0", journal.PageQuery{AfterSeq: 0, Limit: 100}},
		{"seq999900", journal.PageQuery{AfterSeq: bigEvents - 100, Limit: 100}},
		{"newest", journal.PageQuery{BeforeSeq: bigEvents + 1, Limit: 100}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			j := journal.New(openBigStore(b), nil)
			b.ReportAllocs()
			for b.Loop() {
				page, err := j.Page(ctx, "run_big", bc.q)
				if err != nil {
					b.Fatal(err)
				}
				if len(page) != 100 {
					b.Fatalf("page of %d events, want 100", len(page))
				}
			}
		})
	}
}
