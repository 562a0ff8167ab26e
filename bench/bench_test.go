package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"lukechampine.com/blake3"
)

// tinyScale keeps every workload to a fraction of a second. The large file
// is above the store's 4 MiB inline limit, so it is chunked.
var tinyScale = Scale{ChatRounds: 10, ChatPromptBytes: 8 << 10, ChatWorldBytes: 16 << 10,
	ProjectFiles: 40, ProjectDirs: 4, ProjectBinaries: 1, ProjectBinBytes: 64 << 10, ProjectSteps: 6,
	LargeBytes: 6 << 20, LargeSteps: 3, RetentionRuns: 30, RetentionChats: 3, RetentionRounds: 2}

// testSystems are the systems to run: git only where it is installed.
func testSystems(t *testing.T) []string {
	if _, ok := gitAvailable(); ok {
		return systemNames
	}
	t.Log("git is not installed: skipping the git baseline")
	return []string{"wsstore", "wsctl", "dircopy"}
}

// TestChatReport runs the chat workload at a tiny scale on every system,
// checks each verifies after its rollback, and that the report carries the
// fields readers of the JSON rely on. No timing is asserted.
func TestChatReport(t *testing.T) {
	var results []Result
	for _, sys := range testSystems(t) {
		t.Run(sys, func(t *testing.T) {
			dir := t.TempDir()
			res, err := runCase(context.Background(), caseConfig{Workload: "chat", System: sys, Dir: dir, Seed: 7, Scale: tinyScale})
			require.NoError(t, err)
			assert.True(t, res.Verified)
			assert.Equal(t, 2*tinyScale.ChatRounds, res.Checkpoints)
			assert.Equal(t, 2*tinyScale.ChatRounds+2, res.Mutations, "two inputs and two mutations a round")
			assert.Equal(t, (2*tinyScale.ChatRounds-1)/2+1, res.RollbackTo, "the middle checkpoint, 1-based")
			assert.GreaterOrEqual(t, len(res.RollbackSamplesNs), minRollbacks)
			assert.Equal(t, 1, len(res.RollbackSamplesNs)%2, "rollbacks end at the middle checkpoint")
			assert.Positive(t, res.DiskBytes)
			assert.Positive(t, res.SmallWrites, "the status, summary and note writes")
			// wsctl's run takes every checkpoint in its mutation's request.
			assert.Equal(t, sys == "wsctl", res.AutoCheckpoint)
			if sys == "wsctl" {
				// its batch process's CPU profile was read and removed
				for _, n := range res.Notes {
					assert.NotContains(t, n, "no CPU profile")
				}
				assert.NoFileExists(t, caseProfile(dir))
				// and its peak heap
				assert.Positive(t, res.PeakHeapBytes)
				assert.Less(t, res.PeakHeapBytes, int64(1<<30))
				assert.NoFileExists(t, caseHeapPeak(dir))
			}
			results = append(results, res)
		})
	}

	rep := buildReport("test", 7, tinyScale, results)
	out := filepath.Join(t.TempDir(), "out", "report.json")
	require.NoError(t, writeJSON(out, rep))
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	for _, k := range []string{"mode", "date", "seed", "scale", "machine", "workloads", "results", "ratios", "targets", "notes"} {
		assert.Contains(t, m, k)
	}
	rs := m["results"].([]any)
	require.Len(t, rs, len(results))
	for _, r := range rs {
		for _, k := range []string{"workload", "system", "mutations", "checkpoints", "checkpoint_p50_ns", "checkpoint_p99_ns",
			"apply_p50_ns", "rollback_ns", "rollback_samples_ns", "wall_ns", "verified", "verified_files", "disk_bytes", "peak_rss_bytes"} {
			assert.Contains(t, r, k)
		}
		assert.Equal(t, true, r.(map[string]any)["verified"])
	}
	require.NotEmpty(t, rep.Ratios)
	assert.Equal(t, Ratio{Workload: "chat", Baseline: "dircopy"}, Ratio{Workload: rep.Ratios[0].Workload, Baseline: rep.Ratios[0].Baseline})
	assert.Positive(t, rep.Ratios[0].Disk)

	names := map[string]string{}
	for _, tg := range rep.Targets {
		names[tg.Name] = tg.Status
		assert.Contains(t, []string{"PASS", "MISS", "N/A"}, tg.Status)
	}
	assert.Contains(t, names, "peak RSS (large)")
	assert.Equal(t, "N/A", names["peak RSS (large)"], "no large case ran")
	assert.NotEqual(t, "N/A", names["bytes on disk vs dircopy (chat)"])
	assert.Contains(t, names, "bytes on disk vs git after gc (chat)")
	assert.Contains(t, names, "bytes on disk vs git after gc (project)")
	assert.NotEqual(t, "N/A", names["peak heap (every workload)"], "the wsctl case measured it")

	var md bytes.Buffer
	writeMarkdown(&md, rep)
	assert.Contains(t, md.String(), "## chat")
	assert.Contains(t, md.String(), "## Targets")
}

// TestWorkloadsVerify runs the project and large workloads at a tiny scale
// on every system.
func TestWorkloadsVerify(t *testing.T) {
	for _, w := range []string{"project", "large"} {
		for _, sys := range testSystems(t) {
			if skipCase(w, sys) != "" {
				continue
			}
			t.Run(w+"/"+sys, func(t *testing.T) {
				res, err := runCase(context.Background(), caseConfig{Workload: w, System: sys, Dir: t.TempDir(), Seed: 7, Scale: tinyScale})
				require.NoError(t, err)
				assert.True(t, res.Verified)
			})
		}
	}
}

// TestVerifyDetectsDifferences checks that Verify is not vacuous: a wrong
// hash, a missing file and an unexpected one all fail.
func TestVerifyDetectsDifferences(t *testing.T) {
	for _, sys := range []string{"wsstore", "dircopy"} {
		t.Run(sys, func(t *testing.T) {
			s, err := newSystem(context.Background(), sys)
			require.NoError(t, err)
			require.NoError(t, s.Setup(t.TempDir()))
			defer s.Close()
			a, b := []byte("alpha\n"), []byte("beta\n")
			require.NoError(t, s.Apply(Op{Kind: OpWrite, Path: "output/a.md", Data: a}))
			require.NoError(t, s.Apply(Op{Kind: OpWrite, Path: "output/sub/b.md", Data: b}))
			_, err = s.Checkpoint("one")
			require.NoError(t, err)
			want := map[string][32]byte{"output/a.md": blake3.Sum256(a), "output/sub/b.md": blake3.Sum256(b)}
			require.NoError(t, s.Verify(want))

			wrong := map[string][32]byte{"output/a.md": blake3.Sum256(b), "output/sub/b.md": blake3.Sum256(b)}
			assert.ErrorContains(t, s.Verify(wrong), "content differs: output/a.md")
			missing := map[string][32]byte{"output/a.md": blake3.Sum256(a)}
			assert.ErrorContains(t, s.Verify(missing), "unexpected output/sub/b.md")
			extra := map[string][32]byte{"output/a.md": blake3.Sum256(a), "output/sub/b.md": blake3.Sum256(b), "output/c.md": {}}
			assert.ErrorContains(t, s.Verify(extra), "missing output/c.md")
		})
	}
}

// TestWorkloadsDeterministic checks that a seed fixes every op, so each
// system replays the same sequence.
func TestWorkloadsDeterministic(t *testing.T) {
	digest := func(name string, seed uint64) [32]byte {
		wl, err := newWorkload(name, seed, tinyScale)
		require.NoError(t, err)
		h := blake3.New(32, nil)
		require.NoError(t, wl.Gen(func(op Op) error {
			fmt.Fprintf(h, "%s %s %q %q %q %d|", op.Kind, op.Path, op.Old, op.New, op.Label, len(op.Edits))
			h.Write(op.Data)
			for _, e := range op.Edits {
				fmt.Fprintf(h, "%d %d %x|", e.Off, e.Del, e.Ins)
			}
			if op.Sum != nil {
				sum := op.Sum.get()
				h.Write(sum[:])
			}
			return nil
		}))
		var out [32]byte
		h.Sum(out[:0])
		return out
	}
	for _, name := range workloadNames {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, digest(name, 7), digest(name, 7))
			assert.NotEqual(t, digest(name, 7), digest(name, 8))
		})
	}
}

// TestLargeDocSplice compares the piece table and spliceFile with edits
// applied to a plain byte slice.
func TestLargeDocSplice(t *testing.T) {
	const size = 3*baseBlock + 1234
	doc := newLargeDoc(9, size)
	want, err := io.ReadAll(doc.Open())
	require.NoError(t, err)
	require.Len(t, want, size)
	name := filepath.Join(t.TempDir(), "f.txt")
	require.NoError(t, os.WriteFile(name, want, 0o644))

	r := rand.New(rand.NewPCG(1, 2))
	for step := range 20 {
		var edits []Edit
		var end int64
		for off := int64(r.IntN(5000)); off < doc.size; off += int64(1 + r.IntN(40000)) {
			if off < end {
				continue
			}
			n := 1 + r.IntN(16)
			e := Edit{Off: off, Del: int64(min(n, int(doc.size-off))), Ins: lowerBytes(r, n)}
			if step%2 == 1 && r.IntN(3) == 0 {
				e.Del = 0 // an insertion
			}
			edits = append(edits, e)
			end = e.Off + e.Del
		}
		next := slices.Clone(want[:0])
		var pos int64
		for _, e := range edits {
			next = append(next, want[pos:e.Off]...)
			next = append(next, e.Ins...)
			pos = e.Off + e.Del
		}
		want = append(next, want[pos:]...)
		doc = doc.apply(edits)
		require.NoError(t, spliceFile(name, edits))

		got, err := io.ReadAll(doc.Open())
		require.NoError(t, err)
		require.Equal(t, len(want), int(doc.Size()))
		require.True(t, bytes.Equal(want, got), "piece table differs after step %d", step)
		onDisk, err := os.ReadFile(name)
		require.NoError(t, err)
		require.True(t, bytes.Equal(want, onDisk), "spliced file differs after step %d", step)
	}
	assert.True(t, strings.Contains(string(want[:200]), " "), "the base text is words")
}

func TestFmtBytes(t *testing.T) {
	for n, want := range map[int64]string{
		512:         "512 B",
		1536:        "1.5 KiB",
		1004 * 1024: "1004 KiB",
		1023 * 1024: "1023 KiB",
		1024 * 1024: "1 MiB",
		1100 * 1024: "1.07 MiB",
		5 << 30:     "5 GiB",
	} {
		assert.Equal(t, want, fmtBytes(n), "%d", n)
	}
}

// TestRetentionWorkload runs the retention workload at a tiny scale: on
// wsstore both stores replay every run and verify the runs they kept, the
// policy store keeps fewer runs and less than the store that keeps
// everything, and the report carries both; the baselines are skipped.
func TestRetentionWorkload(t *testing.T) {
	res, err := runCase(context.Background(), caseConfig{Workload: retentionWorkload, System: "wsstore", Dir: t.TempDir(), Seed: 7, Scale: tinyScale})
	require.NoError(t, err)
	require.True(t, res.Verified)
	require.Len(t, res.Retention, 2)
	none, pol := res.Retention[0], res.Retention[1]
	assert.Equal(t, "no policy", none.Variant)
	assert.Equal(t, tinyScale.RetentionRuns, none.Runs)
	assert.Equal(t, tinyScale.RetentionRuns, none.RunsKept, "nothing is deleted without a policy")
	assert.Zero(t, none.BytesFreed, "nothing is reclaimed without a policy: its deletion log holds only the completed runs' scratch collections")
	assert.Equal(t, tinyScale.RetentionRuns, pol.Runs)
	assert.LessOrEqual(t, pol.RunsKept, tinyScale.RetentionChats*(3+1), "keepCompletedRuns 3 and keepFailedRuns 1 per chat")
	assert.Positive(t, pol.Deletions)
	assert.Positive(t, pol.BytesFreed)
	assert.Less(t, pol.StoredBytes, none.StoredBytes)

	skipped, err := runCase(context.Background(), caseConfig{Workload: retentionWorkload, System: "dircopy", Dir: t.TempDir(), Seed: 7, Scale: tinyScale})
	require.NoError(t, err)
	assert.NotEmpty(t, skipped.Skipped)

	rep := buildReport("test", 7, tinyScale, []Result{res, skipped})
	var md bytes.Buffer
	writeMarkdown(&md, rep)
	assert.Contains(t, md.String(), "## retention")
	assert.Contains(t, md.String(), "| wsstore | policy | 30 |")
	assert.Contains(t, md.String(), "stored bytes with the retention policy vs without (retention)")
}

// TestFmtDur: three significant digits in the unit the rounded value
// fits.
func TestFmtDur(t *testing.T) {
	for ns, want := range map[int64]string{
		999:               "999 ns",
		1_000:             "1 µs",
		868_000:           "868 µs",
		999_400:           "999 µs",
		999_600:           "1 ms",
		1_004_000:         "1 ms",
		4_870_000:         "4.87 ms",
		999_700_000:       "1 s",
		1_210_000_000:     "1.21 s",
		1_234_000_000_000: "1234 s",
	} {
		assert.Equal(t, want, fmtDur(ns), "%d ns", ns)
	}
}
