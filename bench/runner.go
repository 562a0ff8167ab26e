package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"slices"
	"time"
)

// System is a way of keeping a checkpointed workspace. Every system
// replays the same ops and is timed the same way.
type System interface {
	Name() string
	// Setup prepares an empty workspace in dir, which the system owns.
	Setup(dir string) error
	// Apply performs one mutating op.
	Apply(op Op) error
	// Checkpoint records the workspace and returns an id for Rollback.
	Checkpoint(label string) (string, error)
	// Rollback makes the workspace what it was at checkpoint id.
	Rollback(id string) error
	// Verify reads back every file of the workspace and compares its
	// BLAKE3 hash with expected, which names every file there must be.
	Verify(expected map[string][32]byte) error
	// DiskBytes returns the bytes the system holds on disk (allocated
	// blocks). It is called after Close.
	DiskBytes() (int64, error)
	Close() error
}

// collector is a System with a garbage collection to measure after the
// run (git gc).
type collector interface {
	GC() error
}

var systemNames = []string{"wsstore", "wsctl", "dircopy", "git"}

func newSystem(ctx context.Context, name string) (System, error) {
	switch name {
	case "wsstore":
		return &wsstoreSystem{ctx: ctx}, nil
	case "wsctl":
		bin, err := wsctlBinary(ctx)
		if err != nil {
			return nil, err
		}
		return &wsctlSystem{wsstoreSystem: wsstoreSystem{ctx: ctx}, bin: bin}, nil
	case "dircopy":
		return &dirCopy{}, nil
	case "git":
		return &gitRepo{}, nil
	}
	return nil, fmt.Errorf("unknown system %q (want one of wsstore, wsctl, dircopy, git)", name)
}

// autoCheckpointer is a System that can have a run take a checkpoint
// after every mutation by itself, in the mutation's own step; Checkpoint
// then returns the one the last mutation took.
type autoCheckpointer interface {
	autoCheckpoint()
}

// smallWrite is the largest whole-file write counted among the small
// ones (Result.SmallWriteP50): the status, summary and note files of the
// chat workload, a few KiB each.
const smallWrite = 8 << 10

// caseConfig names one workload on one system.
type caseConfig struct {
	Workload string
	System   string
	Dir      string // scratch directory the system owns
	Seed     uint64
	Scale    Scale
	Progress io.Writer // progress lines; nil for none
	// MeasureRSS records the process's peak RSS before gc: set in a child
	// process, where the process is the case.
	MeasureRSS bool
}

// Rollbacks timed per case: at least minRollbacks, then more (up to
// maxRollbacks) while their total stays under rollbackBudget.
const (
	minRollbacks   = 3
	maxRollbacks   = 51
	rollbackBudget = 2 * time.Second
)

// runCase replays the workload on the system, rolls back to the middle
// checkpoint (alternating with the last, to time several rollbacks),
// verifies the workspace byte for byte against the expected
// state at the middle checkpoint, closes the system and measures its disk.
// Only the system's own calls are timed; generating ops and expected
// hashes is not.
func runCase(ctx context.Context, cfg caseConfig) (Result, error) {
	if cfg.Workload == retentionWorkload {
		return runRetention(ctx, cfg)
	}
	start := time.Now()
	res := Result{Workload: cfg.Workload, System: cfg.System}
	wl, err := newWorkload(cfg.Workload, cfg.Seed, cfg.Scale)
	if err != nil {
		return res, err
	}
	sys, err := newSystem(ctx, cfg.System)
	if err != nil {
		return res, err
	}
	t := time.Now()
	if err := sys.Setup(cfg.Dir); err != nil {
		return res, fmt.Errorf("%s setup: %w", cfg.System, err)
	}
	res.SetupNs = int64(time.Since(t))
	closed := false
	defer func() {
		if !closed {
			sys.Close()
		}
	}()

	if a, ok := sys.(autoCheckpointer); ok && wl.EveryMutation {
		a.autoCheckpoint()
		res.AutoCheckpoint = true
	}
	var tr Tracker
	var ids []string
	var applyNs, cpNs, smallNs []int64
	err = wl.Gen(func(op Op) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		tr.observe(op)
		t := time.Now()
		if op.Kind == OpCheckpoint {
			id, err := sys.Checkpoint(op.Label)
			cpNs = append(cpNs, int64(time.Since(t)))
			if err != nil {
				return fmt.Errorf("checkpoint %q: %w", op.Label, err)
			}
			ids = append(ids, id)
			if cfg.Progress != nil && len(ids)%100 == 0 {
				fmt.Fprintf(cfg.Progress, "  %s/%s: %d checkpoints, %s\n", cfg.Workload, cfg.System, len(ids), fmtDur(int64(time.Since(start))))
			}
			return nil
		}
		err := sys.Apply(op)
		applyNs = append(applyNs, int64(time.Since(t)))
		if op.Kind == OpWrite && !op.Input && op.Src == nil && len(op.Data) <= smallWrite {
			smallNs = append(smallNs, applyNs[len(applyNs)-1])
		}
		if err != nil {
			return fmt.Errorf("%s %s: %w", op.Kind, op.Path, err)
		}
		return nil
	})
	if err != nil {
		return res, fmt.Errorf("%s on %s: %w", cfg.Workload, cfg.System, err)
	}
	if len(ids) < 2 {
		return res, fmt.Errorf("%s: %d checkpoints; need at least 2 to roll back", cfg.Workload, len(ids))
	}
	res.Mutations, res.Checkpoints = len(applyNs), len(ids)
	res.CheckpointP50, res.CheckpointP99 = percentile(cpNs, 50), percentile(cpNs, 99)
	res.CheckpointMax = slices.Max(cpNs)
	res.ApplyP50, res.ApplyP99 = percentile(applyNs, 50), percentile(applyNs, 99)
	if len(smallNs) > 0 {
		res.SmallWrites, res.SmallWriteP50, res.SmallWriteP99 = len(smallNs), percentile(smallNs, 50), percentile(smallNs, 99)
	}
	res.RollbackTo = (len(ids)-1)/2 + 1

	// Roll back to the middle, the last and the middle checkpoint again,
	// and on alternately while the budget lasts: one sample of a
	// sub-millisecond operation says little. An odd count ends at the
	// middle checkpoint, which is then verified.
	// The generator's garbage is the bench's, not the system's: collect it
	// now rather than during the rollbacks.
	runtime.GC()
	mid, last := ids[(len(ids)-1)/2], ids[len(ids)-1]
	var spent time.Duration
	for i := 0; i < maxRollbacks && (i < minRollbacks || i%2 == 0 || spent < rollbackBudget); i++ {
		id := mid
		if i%2 == 1 {
			id = last
		}
		t := time.Now()
		if err := sys.Rollback(id); err != nil {
			return res, fmt.Errorf("rollback to %s: %w", id, err)
		}
		d := time.Since(t)
		spent += d
		res.RollbackSamplesNs = append(res.RollbackSamplesNs, int64(d))
	}
	res.RollbackNs = percentile(res.RollbackSamplesNs, 50)

	want := tr.state((len(ids) - 1) / 2)
	res.VerifiedFiles = len(want)
	t = time.Now()
	if err := sys.Verify(want); err != nil {
		return res, fmt.Errorf("%s on %s after rollback to checkpoint %d: %w", cfg.Workload, cfg.System, res.RollbackTo, err)
	}
	res.VerifyNs = int64(time.Since(t))
	res.Verified = true

	t = time.Now()
	closed = true
	if err := sys.Close(); err != nil {
		return res, fmt.Errorf("%s close: %w", cfg.System, err)
	}
	res.CloseNs = int64(time.Since(t))
	if p, ok := sys.(profiler); ok {
		if res.Profile, err = p.Profile(); err != nil {
			res.Notes = append(res.Notes, fmt.Sprintf("no CPU profile: %v", err))
		}
	}
	if h, ok := sys.(heapMeter); ok {
		if res.PeakHeapBytes, err = h.PeakHeap(); err != nil {
			res.Notes = append(res.Notes, fmt.Sprintf("no peak heap: %v", err))
		}
	}
	res.WallNs = res.SetupNs + sum(applyNs) + sum(cpNs) + res.RollbackNs + res.CloseNs
	if res.DiskBytes, err = sys.DiskBytes(); err != nil {
		return res, fmt.Errorf("%s disk: %w", cfg.System, err)
	}
	if res.DiskApparentBytes, _, err = diskUsage(cfg.Dir); err != nil {
		return res, err
	}
	if cfg.MeasureRSS {
		res.PeakRSSWorkloadBytes = selfPeakRSS()
	}
	if c, ok := sys.(collector); ok {
		t := time.Now()
		if err := c.GC(); err != nil {
			return res, fmt.Errorf("%s gc: %w", cfg.System, err)
		}
		res.GCNs = int64(time.Since(t))
		if res.DiskAfterGCBytes, err = sys.DiskBytes(); err != nil {
			return res, err
		}
	}
	if n, ok := sys.(noter); ok {
		res.Notes = append(res.Notes, n.Notes()...)
	}
	res.ElapsedNs = int64(time.Since(start))
	return res, nil
}

// profiler is a System that profiles the process it drives, read once
// the system is closed.
type profiler interface {
	Profile() ([]Stage, error)
}

// heapMeter is a System that measures the peak heap of the process it
// drives, read once the system is closed.
type heapMeter interface {
	PeakHeap() (int64, error)
}

// noter is a System with remarks for the report.
type noter interface {
	Notes() []string
}

// percentile returns the nearest-rank p-th percentile of xs.
func percentile(xs []int64, p float64) int64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	rank := int(p/100*float64(len(s))+0.999999) - 1
	return s[min(max(rank, 0), len(s)-1)]
}

func sum(xs []int64) int64 {
	var n int64
	for _, x := range xs {
		n += x
	}
	return n
}
