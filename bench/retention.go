package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"lukechampine.com/blake3"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

// retentionWorkload is many runs over many chats, replayed on two stores:
// one that keeps everything and one with a retention policy.
const retentionWorkload = "retention"

// retentionRun is one run of the retention workload: its chat, the inputs
// it is created with, its ops (each mutation takes an automatic
// checkpoint) and how it ends.
type retentionRun struct {
	ID     string
	Chat   string
	Inputs map[string][]byte
	Ops    []Op
	Failed bool
	// Main is the expected content of output/main.md at the end.
	Main [32]byte
}

// retentionRuns generates the workload's runs in order: run i belongs to
// chat i mod RetentionChats; each writes a prompt snapshot, a growing
// output/main.md (appends and a patch), scratch notes and a persist/
// memory line; every seventh run fails, the others complete.
func retentionRuns(seed uint64, sc Scale, fn func(retentionRun) error) error {
	g := newTextGen(seed, 7)
	r := g.r
	for i := range sc.RetentionRuns {
		run := retentionRun{ID: fmt.Sprintf("run_%04d", i), Chat: fmt.Sprintf("chat-%02d", i%max(sc.RetentionChats, 1)),
			Inputs: map[string][]byte{"prompt_snapshot.json": promptSnapshot(g, 12<<10+r.IntN(8<<10))}, Failed: i%7 == 6}
		var main []byte
		for round := range max(sc.RetentionRounds, 1) {
			part := append(fmt.Appendf(nil, "\n## Part %d\n\n", round+1), g.paragraph(600+r.IntN(900))...)
			kind := OpAppend
			if main == nil {
				kind = OpWrite
			}
			main = append(main, part...)
			run.Ops = append(run.Ops, Op{Kind: kind, Path: "output/main.md", Data: part, Sum: sumOf(main)})
			note := g.paragraph(300 + r.IntN(500))
			run.Ops = append(run.Ops, Op{Kind: OpWrite, Path: fmt.Sprintf("scratch/note-%d.md", round), Data: note, Sum: sumOf(note)})
		}
		// A patch in the middle, as an agent's edit tool makes.
		if old, new, ok := pickPatch(g, main, len(main)/4, len(main)/2); ok {
			main = []byte(strings.Replace(string(main), old, new, 1))
			run.Ops = append(run.Ops, Op{Kind: OpPatch, Path: "output/main.md", Old: old, New: new, Sum: sumOf(main)})
		}
		mem := fmt.Appendf(nil, "- run %d: %s\n", i, g.sentence(12))
		run.Ops = append(run.Ops, Op{Kind: OpAppend, Path: "persist/memory.md", Data: mem})
		run.Main = blake3.Sum256(main)
		if err := fn(run); err != nil {
			return err
		}
	}
	return nil
}

// retentionOps is the workload's ops, every run's in order, for
// Workload.Gen (the determinism test); runRetention replays the runs
// themselves.
func retentionOps(seed uint64, sc Scale, emit func(Op) error) error {
	return retentionRuns(seed, sc, func(run retentionRun) error {
		for _, op := range run.Ops {
			if err := emit(op); err != nil {
				return err
			}
		}
		return nil
	})
}

func retentionDesc(sc Scale) string {
	return fmt.Sprintf("%d runs over %d chats (a ~16 KiB prompt snapshot each, %d rounds of appends to output/main.md and a scratch note, a patch, a persist/ line; a checkpoint after every mutation; every seventh run fails), on a store that keeps everything and on one with the policy %s",
		sc.RetentionRuns, sc.RetentionChats, sc.RetentionRounds, retentionPolicyText)
}

// The policy of the retention workload's second store.
const retentionPolicyText = "keepCompletedRuns 3, keepFailedRuns 1, maxCheckpointBytesPerRun 16 KiB, pruned after every run"

func retentionPolicy() runs.Policy {
	completed, failed, cp := 3, 1, int64(16<<10)
	return runs.Policy{KeepCompletedRuns: &completed, KeepFailedRuns: &failed, MaxCheckpointBytesPerRun: &cp}
}

// RetentionResult is one store of the retention workload.
type RetentionResult struct {
	// Variant is "no policy" or "policy".
	Variant string `json:"variant"`
	Runs    int    `json:"runs"`
	// RunsKept and CheckpointsKept are what the store holds at the end.
	RunsKept        int `json:"runs_kept"`
	CheckpointsKept int `json:"checkpoints_kept"`
	// Checkpoints is how many the runs took: one when created, one
	// after every mutation.
	Checkpoints int `json:"checkpoints_taken"`
	// StoredBytes is the pages holding data at the end (index.DB.UsedBytes);
	// PeakStoredBytes the most after any run.
	StoredBytes     int64 `json:"stored_bytes"`
	PeakStoredBytes int64 `json:"peak_stored_bytes"`
	// FileBytes is the database file and its log before close; DiskBytes
	// the allocated bytes of the store directory after close.
	FileBytes int64 `json:"file_bytes"`
	DiskBytes int64 `json:"disk_bytes"`
	// Deletions is the deletion log's entries; BytesFreed what the
	// reclaims after them swept.
	Deletions  int   `json:"deletions"`
	BytesFreed int64 `json:"bytes_freed"`
	ElapsedNs  int64 `json:"elapsed_ns"`
	// CPUNs is the process's CPU time (user plus system) over the same
	// span as ElapsedNs: on a loaded machine wall time measures the
	// machine more than the store.
	CPUNs int64 `json:"cpu_ns"`
}

// runRetention replays the retention workload on wsstore twice, without
// and with the policy, and verifies every run the store kept. The
// baselines have no runs, chats or retention to compare: they are skipped.
func runRetention(ctx context.Context, cfg caseConfig) (Result, error) {
	res := Result{Workload: cfg.Workload, System: cfg.System}
	if cfg.System != "wsstore" {
		res.Skipped = "runs, chats and a retention policy are wsstore's; a directory copy or a git repository has neither"
		return res, nil
	}
	start := time.Now()
	for _, variant := range []string{"no policy", "policy"} {
		rr, muts, err := retentionStore(ctx, cfg, variant)
		if err != nil {
			return res, fmt.Errorf("retention (%s): %w", variant, err)
		}
		res.Retention = append(res.Retention, rr)
		res.Mutations, res.Checkpoints = muts, rr.Checkpoints
		res.DiskBytes = rr.DiskBytes
	}
	res.Verified = true
	res.ElapsedNs = int64(time.Since(start))
	res.WallNs = res.ElapsedNs
	if cfg.MeasureRSS {
		res.PeakRSSWorkloadBytes = selfPeakRSS()
	}
	res.Notes = []string{"the policy store reclaims with no grace (Options.ReclaimGrace < 0): the bench is its only writer, so nothing written is about to be referenced"}
	return res, nil
}

func retentionStore(ctx context.Context, cfg caseConfig, variant string) (RetentionResult, int, error) {
	rr := RetentionResult{Variant: variant}
	dir := filepath.Join(cfg.Dir, strings.ReplaceAll(variant, " ", "-"))
	opts := wsstore.Options{}
	if variant == "policy" {
		on := true
		opts.Runs.AutoPrune = &on
		opts.ReclaimGrace = -1
	}
	st, err := wsstore.Open(ctx, dir, opts)
	if err != nil {
		return rr, 0, err
	}
	defer st.Close()
	if variant == "policy" {
		if err := st.Runs.SetPolicy(ctx, runs.StoreScope, retentionPolicy()); err != nil {
			return rr, 0, err
		}
	}
	start, cpu := time.Now(), selfCPU()
	want := map[string][32]byte{}
	muts := 0
	err = retentionRuns(cfg.Seed, cfg.Scale, func(run retentionRun) error {
		if _, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: run.Chat},
			RunID: run.ID, Inputs: run.Inputs}); err != nil {
			return err
		}
		ws := st.Runs.Workspace(run.ID, runs.HostScope)
		for _, op := range run.Ops {
			p, err := vfs.ParsePath(op.Path)
			if err != nil {
				return err
			}
			switch op.Kind {
			case OpWrite:
				_, err = ws.Write(ctx, p, op.Data, vfs.WriteOptions{})
			case OpAppend:
				_, err = ws.Write(ctx, p, op.Data, vfs.WriteOptions{Mode: vfs.Append})
			case OpPatch:
				_, err = ws.Patch(ctx, p, op.Old, op.New, vfs.PatchOptions{})
			default:
				err = fmt.Errorf("cannot apply %s", op.Kind)
			}
			if err != nil {
				return fmt.Errorf("%s %s %s: %w", run.ID, op.Kind, op.Path, err)
			}
			muts++
		}
		if run.Failed {
			err = st.Runs.SetStatus(ctx, run.ID, runs.Failed, "bench")
		} else {
			_, err = st.Runs.Finish(ctx, run.ID)
		}
		if err != nil {
			return err
		}
		want[run.ID] = run.Main
		rr.Runs++
		used, err := st.DB.UsedBytes(ctx)
		if err != nil {
			return err
		}
		rr.PeakStoredBytes = max(rr.PeakStoredBytes, used)
		if cfg.Progress != nil && rr.Runs%50 == 0 {
			fmt.Fprintf(cfg.Progress, "  retention/%s: %d runs, %s stored\n", variant, rr.Runs, fmtBytes(used))
		}
		return ctx.Err()
	})
	if err != nil {
		return rr, 0, err
	}
	rr.ElapsedNs, rr.CPUNs = int64(time.Since(start)), selfCPU()-cpu
	kept, err := st.Runs.Runs(ctx, runs.ListQuery{})
	if err != nil {
		return rr, 0, err
	}
	rr.RunsKept = len(kept)
	for _, run := range kept {
		cps, err := st.Checkpoints.List(ctx, run.ID)
		if err != nil {
			return rr, 0, err
		}
		rr.CheckpointsKept += len(cps)
		got, err := st.Runs.Workspace(run.ID, runs.HostScope).Read(ctx, vfs.MustPath("output/main.md"), vfs.ReadOptions{})
		if err != nil {
			return rr, 0, fmt.Errorf("verify %s: %w", run.ID, err)
		}
		if blake3.Sum256(got.Content) != want[run.ID] {
			return rr, 0, fmt.Errorf("verify %s: output/main.md differs", run.ID)
		}
	}
	rr.Checkpoints = rr.Runs + muts // one when the run is created, one after every mutation
	for after, more := int64(0), true; more; {
		var ds []runs.Deletion
		if ds, more, err = st.Runs.Deletions(ctx, after, 0); err != nil {
			return rr, 0, err
		}
		rr.Deletions += len(ds)
		for _, d := range ds {
			if d.Kind == runs.Reclaimed {
				rr.BytesFreed += d.BytesFreed
			}
			after = d.ID
		}
	}
	if rr.StoredBytes, err = st.DB.UsedBytes(ctx); err != nil {
		return rr, 0, err
	}
	if rr.FileBytes, err = st.DB.FileBytes(); err != nil {
		return rr, 0, err
	}
	if err := st.Close(); err != nil {
		return rr, 0, err
	}
	if _, rr.DiskBytes, err = diskUsage(dir); err != nil {
		return rr, 0, err
	}
	return rr, muts, nil
}

// writeRetentionMarkdown writes the retention workload's section.
func writeRetentionMarkdown(w io.Writer, desc string, rs []Result) {
	fmt.Fprintf(w, "## %s\n\n%s.\n\n", retentionWorkload, desc)
	fmt.Fprintln(w, "| system | store | runs | runs kept | checkpoints taken | checkpoints kept | stored at end | peak stored | file at end | disk after close | deletions | reclaimed | time | CPU time |")
	fmt.Fprintln(w, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	for _, r := range rs {
		switch {
		case r.Skipped != "":
			fmt.Fprintf(w, "| %s | skipped: %s |||||||||||||\n", r.System, r.Skipped)
			continue
		case r.Error != "":
			fmt.Fprintf(w, "| %s | FAILED: %s |||||||||||||\n", r.System, strings.ReplaceAll(r.Error, "|", "\\|"))
			continue
		}
		for _, x := range r.Retention {
			fmt.Fprintf(w, "| %s | %s | %d | %d | %d | %d | %s | %s | %s | %s | %d | %s | %s | %s |\n", r.System, x.Variant, x.Runs, x.RunsKept,
				x.Checkpoints, x.CheckpointsKept, fmtBytes(x.StoredBytes), fmtBytes(x.PeakStoredBytes), fmtBytes(x.FileBytes),
				fmtBytes(x.DiskBytes), x.Deletions, fmtBytes(x.BytesFreed), fmtDur(x.ElapsedNs), fmtDur(x.CPUNs))
		}
	}
	fmt.Fprintln(w)
	for _, r := range rs {
		for _, n := range r.Notes {
			fmt.Fprintf(w, "- %s: %s\n", r.System, n)
		}
	}
	fmt.Fprintln(w)
}

// retentionTarget compares the retention workload's two stores: the
// policy must keep the store to a fraction of what keeping everything
// takes, and the store must have given space back by itself.
func retentionTarget(find func(w, s string) (Result, bool)) Target {
	t := Target{Name: "stored bytes with the retention policy vs without (retention)",
		Goal: "the policy store at most 1/2 of the store that keeps everything, with space reclaimed by itself", Measured: "not measured", Status: "N/A"}
	r, ok := find(retentionWorkload, "wsstore")
	if !ok || len(r.Retention) != 2 {
		return t
	}
	none, pol := r.Retention[0], r.Retention[1]
	t.Value = div(pol.StoredBytes, none.StoredBytes)
	t.Measured = fmt.Sprintf("%.2f× (%s vs %s stored; peak %s; %s reclaimed)", t.Value, fmtBytes(pol.StoredBytes), fmtBytes(none.StoredBytes),
		fmtBytes(pol.PeakStoredBytes), fmtBytes(pol.BytesFreed))
	t.Status = "MISS"
	if t.Value <= 0.5 && pol.BytesFreed > 0 {
		t.Status = "PASS"
	}
	return t
}
