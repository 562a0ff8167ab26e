package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Result is one workload on one system. Durations are nanoseconds.
type Result struct {
	Workload string `json:"workload"`
	System   string `json:"system"`
	// Skipped says why the case did not run; Error why it failed.
	Skipped string `json:"skipped,omitempty"`
	Error   string `json:"error,omitempty"`

	Mutations     int   `json:"mutations"`
	Checkpoints   int   `json:"checkpoints"`
	CheckpointP50 int64 `json:"checkpoint_p50_ns"`
	CheckpointP99 int64 `json:"checkpoint_p99_ns"`
	CheckpointMax int64 `json:"checkpoint_max_ns"`
	ApplyP50      int64 `json:"apply_p50_ns"`
	ApplyP99      int64 `json:"apply_p99_ns"`
	// AutoCheckpoint says each checkpoint was taken by its mutation's
	// request (a run with automatic checkpoints), so ApplyP50 is a
	// mutation with its checkpoint and CheckpointP50 only hands over the
	// id.
	AutoCheckpoint bool `json:"auto_checkpoint,omitempty"`
	// SmallWrites counts the whole-file writes of at most smallWrite
	// bytes; SmallWriteP50 and P99 are their percentiles.
	SmallWrites   int   `json:"small_writes,omitempty"`
	SmallWriteP50 int64 `json:"small_write_p50_ns,omitempty"`
	SmallWriteP99 int64 `json:"small_write_p99_ns,omitempty"`
	// RollbackNs is the median of 3 to 51 rollbacks alternating between
	// the middle checkpoint and the last, ending at the middle; all are
	// in the samples.
	RollbackNs        int64   `json:"rollback_ns"`
	RollbackSamplesNs []int64 `json:"rollback_samples_ns"`
	RollbackTo        int     `json:"rollback_to_checkpoint"`
	SetupNs           int64   `json:"setup_ns"`
	CloseNs           int64   `json:"close_ns"`
	// WallNs is the time spent in the system: setup, every apply and
	// checkpoint, one rollback (the median) and close. Generating the
	// workload is not included.
	WallNs        int64 `json:"wall_ns"`
	Verified      bool  `json:"verified"`
	VerifiedFiles int   `json:"verified_files"`
	VerifyNs      int64 `json:"verify_ns"`
	// DiskBytes is allocated bytes (st_blocks) of everything the system
	// keeps: live workspace and history.
	DiskBytes         int64 `json:"disk_bytes"`
	DiskApparentBytes int64 `json:"disk_apparent_bytes"`
	DiskAfterGCBytes  int64 `json:"disk_after_gc_bytes,omitempty"`
	GCNs              int64 `json:"gc_ns,omitempty"`
	// PeakRSSBytes is the child process's peak resident set up to the
	// end of the workload (rollbacks, verify and close included, gc
	// not); PeakRSSWithGCBytes includes the gc. Both are 0 when the case
	// ran in process, as in tests.
	PeakRSSBytes       int64 `json:"peak_rss_bytes"`
	PeakRSSWithGCBytes int64 `json:"peak_rss_with_gc_bytes"`
	// PeakRSSWorkloadBytes is what the child measured itself before gc;
	// the parent moves it to PeakRSSBytes.
	PeakRSSWorkloadBytes int64 `json:"-"`
	// ElapsedNs is the whole case, generation and verification included.
	ElapsedNs int64    `json:"elapsed_ns"`
	Notes     []string `json:"notes,omitempty"`
	// Retention holds the retention workload's stores, without and with
	// the policy.
	Retention []RetentionResult `json:"retention,omitempty"`
	// Profile is where the CPU of the process the system drives went
	// (wsctl's batch process), by phase and part.
	Profile []Stage `json:"profile,omitempty"`
	// PeakHeapBytes is the largest heap the store's process held: the
	// bytes of its heap objects, live and not yet swept, sampled every
	// millisecond (internal/heappeak). For wsctl it is the batch
	// process's; for wsstore the child's that runs the store in process,
	// the workload's generator and the gc after it included.
	PeakHeapBytes int64 `json:"peak_heap_bytes,omitempty"`
}

func (r Result) ok() bool { return r.Skipped == "" && r.Error == "" }

// Ratio is wsstore's figure divided by a baseline's, per workload: below 1
// means wsstore is faster or smaller.
type Ratio struct {
	Workload      string  `json:"workload"`
	Baseline      string  `json:"baseline"`
	CheckpointP50 float64 `json:"checkpoint_p50"`
	CheckpointP99 float64 `json:"checkpoint_p99"`
	Rollback      float64 `json:"rollback"`
	Wall          float64 `json:"wall"`
	Disk          float64 `json:"disk"`
	PeakRSS       float64 `json:"peak_rss"`
}

// Target is one goal of the issue, with what was measured.
type Target struct {
	Name     string  `json:"name"`
	Goal     string  `json:"goal"`
	Measured string  `json:"measured"`
	Value    float64 `json:"value"`
	// Status is PASS, MISS, or N/A when a case it needs did not run.
	Status string `json:"status"`
	// Bottleneck says, for a speed target missed, where the measured
	// process's CPU went, from its profile.
	Bottleneck string `json:"bottleneck,omitempty"`
}

// Machine describes where the bench ran.
type Machine struct {
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpu_model"`
	OS        string `json:"os"`
	Kernel    string `json:"kernel,omitempty"`
	GoVersion string `json:"go_version"`
	Git       string `json:"git,omitempty"`
	MemTotal  string `json:"mem_total,omitempty"`
	// Tree is the source tree measured: `git describe --always --dirty`
	// of the working directory.
	Tree string `json:"tree,omitempty"`
	// LoadAvg is /proc/loadavg when the report was built: other work on
	// the machine shows in the timings.
	LoadAvg string `json:"load_avg,omitempty"`
}

// Report is the whole run, as written to the JSON file.
type Report struct {
	Mode      string            `json:"mode"`
	Date      string            `json:"date"`
	Seed      uint64            `json:"seed"`
	Scale     Scale             `json:"scale"`
	Machine   Machine           `json:"machine"`
	Workloads map[string]string `json:"workloads"`
	Results   []Result          `json:"results"`
	Ratios    []Ratio           `json:"ratios"`
	Targets   []Target          `json:"targets"`
	Notes     []string          `json:"notes"`
}

func machine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), OS: runtime.GOOS + "/" + runtime.GOARCH, GoVersion: runtime.Version()}
	m.CPUModel = procField("/proc/cpuinfo", "model name")
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if kb, err := strconv.ParseInt(strings.TrimSuffix(procField("/proc/meminfo", "MemTotal"), " kB"), 10, 64); err == nil {
		m.MemTotal = fmtBytes(kb<<10) + " RAM"
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		m.LoadAvg = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	if v, ok := gitAvailable(); ok {
		m.Git = v
		if out, err := exec.Command("git", "describe", "--always", "--dirty").Output(); err == nil {
			m.Tree = strings.TrimSpace(string(out))
		}
	}
	return m
}

// procField returns the value of the first "key : value" line of a /proc
// file, or "".
func procField(name, key string) string {
	f, err := os.Open(name)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// buildReport derives ratios and targets from the results.
func buildReport(mode string, seed uint64, sc Scale, results []Result) Report {
	rep := Report{Mode: mode, Date: time.Now().UTC().Format(time.RFC3339), Seed: seed, Scale: sc,
		Machine: machine(), Workloads: map[string]string{}, Results: results}
	for _, name := range workloadNames {
		if wl, err := newWorkload(name, seed, sc); err == nil {
			rep.Workloads[name] = wl.Desc
		}
	}
	find := func(w, s string) (Result, bool) {
		for _, r := range results {
			if r.Workload == w && r.System == s && r.ok() {
				return r, true
			}
		}
		return Result{}, false
	}
	for _, w := range workloadNames {
		ws, ok := find(w, "wsstore")
		if !ok {
			continue
		}
		for _, b := range []string{"dircopy", "git"} {
			base, ok := find(w, b)
			if !ok {
				continue
			}
			rep.Ratios = append(rep.Ratios, Ratio{Workload: w, Baseline: b,
				CheckpointP50: div(ws.CheckpointP50, base.CheckpointP50), CheckpointP99: div(ws.CheckpointP99, base.CheckpointP99),
				Rollback: div(ws.RollbackNs, base.RollbackNs), Wall: div(ws.WallNs, base.WallNs),
				Disk: div(ws.DiskBytes, base.DiskBytes), PeakRSS: div(ws.PeakRSSBytes, base.PeakRSSBytes)})
		}
	}

	na := func(name, goal string) Target {
		return Target{Name: name, Goal: goal, Measured: "not measured", Status: "N/A"}
	}
	for _, w := range []string{"chat", "project"} {
		name, goal := "checkpoint p50 vs git ("+w+")", "wsstore at least 20× faster than the shadow git repository"
		ws, ok1 := find(w, "wsstore")
		g, ok2 := find(w, "git")
		if !ok1 || !ok2 {
			rep.Targets = append(rep.Targets, na(name, goal))
			continue
		}
		x := div(g.CheckpointP50, ws.CheckpointP50)
		rep.Targets = append(rep.Targets, Target{Name: name, Goal: goal, Value: x, Status: status(x >= 20),
			Measured: fmt.Sprintf("%.0f× faster (%s vs %s)", x, fmtDur(ws.CheckpointP50), fmtDur(g.CheckpointP50))})
	}
	{
		name, goal := "rollback independent of workspace size", "wsstore rollback on project within 2× of chat"
		c, ok1 := find("chat", "wsstore")
		p, ok2 := find("project", "wsstore")
		if ok1 && ok2 {
			x := div(p.RollbackNs, c.RollbackNs)
			m := fmt.Sprintf("project/chat = %.2f (%s vs %s)", x, fmtDur(p.RollbackNs), fmtDur(c.RollbackNs))
			if l, ok := find("large", "wsstore"); ok {
				m += fmt.Sprintf("; large: %s", fmtDur(l.RollbackNs))
			}
			rep.Targets = append(rep.Targets, Target{Name: name, Goal: goal, Value: x, Status: status(x <= 2), Measured: m})
		} else {
			rep.Targets = append(rep.Targets, na(name, goal))
		}
	}
	for _, w := range workloadNames {
		if w == retentionWorkload {
			continue // wsstore only: its target compares its two stores
		}
		ws, ok := find(w, "wsstore")
		name, goal := "bytes on disk vs dircopy ("+w+")", "wsstore at most 1/100 of the directory copy"
		if d, ok2 := find(w, "dircopy"); ok && ok2 {
			x := div(ws.DiskBytes, d.DiskBytes)
			rep.Targets = append(rep.Targets, Target{Name: name, Goal: goal, Value: x, Status: status(x <= 0.01),
				Measured: fmt.Sprintf("1/%.0f (%s vs %s)", 1/x, fmtBytes(ws.DiskBytes), fmtBytes(d.DiskBytes))})
		} else {
			rep.Targets = append(rep.Targets, na(name, goal))
		}
		name, goal = "bytes on disk vs git before gc ("+w+")", "wsstore below the shadow git repository without gc"
		if g, ok2 := find(w, "git"); ok && ok2 {
			x := div(ws.DiskBytes, g.DiskBytes)
			rep.Targets = append(rep.Targets, Target{Name: name, Goal: goal, Value: x, Status: status(x < 1),
				Measured: fmt.Sprintf("%.2f× (%s vs %s; git after gc %s)", x, fmtBytes(ws.DiskBytes), fmtBytes(g.DiskBytes), fmtBytes(g.DiskAfterGCBytes))})
		} else {
			rep.Targets = append(rep.Targets, na(name, goal))
		}
	}
	rep.Targets = append(rep.Targets, retentionTarget(find))
	// The delta storage issue's goals: the store as it lives (before its
	// own gc) against git's repository and checkout after `git gc`.
	for _, d := range []struct {
		w, goal string
		max     float64
	}{
		{"chat", "wsstore at most half of the shadow git repository after git gc", 0.5},
		{"project", "wsstore below the shadow git repository after git gc", 1},
	} {
		name := "bytes on disk vs git after gc (" + d.w + ")"
		ws, ok1 := find(d.w, "wsstore")
		g, ok2 := find(d.w, "git")
		if !ok1 || !ok2 || g.DiskAfterGCBytes == 0 {
			rep.Targets = append(rep.Targets, na(name, d.goal))
			continue
		}
		x := div(ws.DiskBytes, g.DiskAfterGCBytes)
		pass := x <= d.max
		if d.max == 1 {
			pass = x < 1
		}
		rep.Targets = append(rep.Targets, Target{Name: name, Goal: d.goal, Value: x, Status: status(pass),
			Measured: fmt.Sprintf("%.2f× (%s vs %s; wsstore after its gc %s)", x, fmtBytes(ws.DiskBytes), fmtBytes(g.DiskAfterGCBytes), fmtBytes(ws.DiskAfterGCBytes))})
	}
	// Through `wsctl batch`, as a host drives the store: the whole
	// session's wall against git, and a write's p50 on chat.
	for _, d := range []struct {
		w   string
		min float64
	}{{"chat", 25}, {"project", 10}} {
		name, goal := "whole session through wsctl batch vs git ("+d.w+")", fmt.Sprintf("wsctl batch at least %.0f× faster than the shadow git repository", d.min)
		c, ok1 := find(d.w, "wsctl")
		g, ok2 := find(d.w, "git")
		if !ok1 || !ok2 {
			rep.Targets = append(rep.Targets, na(name, goal))
			continue
		}
		x := div(g.WallNs, c.WallNs)
		rep.Targets = append(rep.Targets, withBottleneck(Target{Name: name, Goal: goal, Value: x, Status: status(x >= d.min),
			Measured: fmt.Sprintf("%.1f× faster (%s vs %s)", x, fmtDur(c.WallNs), fmtDur(g.WallNs))}, c, ""))
	}
	{
		name, goal := "write plus checkpoint p50 through wsctl batch (chat)", "at most 0.3 ms for a small file"
		if c, ok := find("chat", "wsctl"); ok {
			rep.Targets = append(rep.Targets, withBottleneck(writeTarget(name, goal, c), c, "requests"))
		} else {
			rep.Targets = append(rep.Targets, na(name, goal))
		}
	}
	for _, w := range []string{"chat", "project"} {
		name, goal := "bytes on disk vs git after gc, no gc of ours ("+w+", wsctl)", "the store at most git's repository and checkout after git gc"
		c, ok1 := find(w, "wsctl")
		g, ok2 := find(w, "git")
		if !ok1 || !ok2 || g.DiskAfterGCBytes == 0 {
			rep.Targets = append(rep.Targets, na(name, goal))
			continue
		}
		x := div(c.DiskBytes, g.DiskAfterGCBytes)
		rep.Targets = append(rep.Targets, Target{Name: name, Goal: goal, Value: x, Status: status(x <= 1),
			Measured: fmt.Sprintf("%.2f× (%s vs %s)", x, fmtBytes(c.DiskBytes), fmtBytes(g.DiskAfterGCBytes))})
	}
	{
		name, goal := "peak heap (every workload)", "no operation above 64 MiB of heap"
		var parts []string
		var most int64
		for _, d := range []struct{ sys, label string }{{"wsctl", "the wsctl batch process"}, {"wsstore", "the bench child running the store, its generator included"}} {
			var ps []string
			for _, w := range workloadNames {
				if c, ok := find(w, d.sys); ok && c.PeakHeapBytes > 0 {
					ps = append(ps, fmt.Sprintf("%s %s", w, fmtBytes(c.PeakHeapBytes)))
					most = max(most, c.PeakHeapBytes)
				}
			}
			if len(ps) > 0 {
				parts = append(parts, d.label+": "+strings.Join(ps, ", "))
			}
		}
		if most > 0 {
			rep.Targets = append(rep.Targets, Target{Name: name, Goal: goal, Value: float64(most), Status: status(most < 64<<20),
				Measured: "largest heap of " + strings.Join(parts, "; ")})
		} else {
			rep.Targets = append(rep.Targets, na(name, goal))
		}
	}
	{
		name, goal := "peak RSS (large)", "wsstore under 128 MiB on the large-file workload"
		if l, ok := find("large", "wsstore"); ok && l.PeakRSSBytes > 0 {
			rep.Targets = append(rep.Targets, Target{Name: name, Goal: goal, Value: float64(l.PeakRSSBytes), Status: status(l.PeakRSSBytes < 128<<20),
				Measured: fmtBytes(l.PeakRSSBytes)})
		} else {
			rep.Targets = append(rep.Targets, na(name, goal))
		}
	}
	rep.Notes = []string{
		"Each workload × system ran in its own child process; peak RSS is that process's ru_maxrss, the larger of its own and that of any process it ran (git), up to the end of the workload and before gc (the JSON has the figure with gc too).",
		"Only the system's own calls are timed: generating the ops and the expected hashes is not. Wall = setup + every apply + every checkpoint + one rollback + close.",
		"Rollback is the median of 3 to 51 rollbacks (more while they take under 2 s in all; a Go GC runs first so that the generator's garbage is not collected during them) alternating between the middle checkpoint and the last, ending at the middle; the verify that follows reads every file back and compares BLAKE3 hashes with the generator's expected state at the middle checkpoint.",
		"Disk is allocated bytes (st_blocks × 512) of everything each system keeps, live workspace included: wsstore's store directory after Close (wsstore.db, the WAL checkpointed into it), dircopy's workspace and snapshots/, git's workspace and repository. Apparent sizes are in the JSON.",
		"wsstore runs with its defaults (SQLite WAL, synchronous=NORMAL, zstd level 3); git with its defaults except gc.auto=0; dircopy copies with io.Copy (copy_file_range). None of them fsyncs per checkpoint.",
		"\"Disk after gc\" is measured after the run: for git a plain `git gc -q` (not --aggressive), for wsstore Store.GC with no grace followed by Store.Vacuum. The disk targets use the figures before gc.",
		"The peak heap is the largest of the bytes of heap objects (live and not yet swept, runtime/metrics) sampled every millisecond in the process that runs the store: the `wsctl batch` process, or the bench child that runs wsstore in process, whose figure also holds the workload's generator and so bounds the store's from above. A whole session's peak bounds every operation's.",
		"The `wsctl batch` process writes a CPU profile (Go's sampler, 100 samples a second) in every case; a missed speed target names its largest phases (the requests, the re-encoding drained at close, the background runner) and what each ran (SQLite, zstd, system calls, allocation), as shares of that process's CPU, which is not its wall time. The JSON has the whole split per case.",
	}
	return rep
}

func div(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// writeJSON writes the report to name, creating its directory.
func writeJSON(name string, rep Report) error {
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(name, append(b, '\n'), 0o644)
}

// writeMarkdown renders the report.
func writeMarkdown(w io.Writer, rep Report) {
	fmt.Fprintf(w, "# wsstore bench (%s)\n\n", rep.Mode)
	m := rep.Machine
	fmt.Fprintf(w, "- Date: %s\n- Machine: %d CPUs (%s), %s, %s, kernel %s; %s\n- %s\n- Source tree: %s\n- Load average at the end: %s\n- Seed: %d\n\n",
		rep.Date, m.CPUs, orDash(m.CPUModel), orDash(m.MemTotal), m.OS, orDash(m.Kernel), m.GoVersion, orDash(m.Git), orDash(m.Tree), orDash(m.LoadAvg), rep.Seed)
	for _, wname := range workloadNames {
		var rs []Result
		for _, r := range rep.Results {
			if r.Workload == wname {
				rs = append(rs, r)
			}
		}
		if len(rs) == 0 {
			continue
		}
		if wname == retentionWorkload {
			writeRetentionMarkdown(w, rep.Workloads[wname], rs)
			continue
		}
		fmt.Fprintf(w, "## %s\n\n%s.\n\n", wname, rep.Workloads[wname])
		fmt.Fprintln(w, "| system | mutations | checkpoints | checkpoint p50 | checkpoint p99 | apply p50 | rollback | wall | disk | disk after gc | peak RSS | verify |")
		fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|")
		for _, r := range rs {
			switch {
			case r.Skipped != "":
				fmt.Fprintf(w, "| %s | skipped: %s |||||||||||\n", r.System, r.Skipped)
				continue
			case r.Error != "":
				fmt.Fprintf(w, "| %s | FAILED: %s |||||||||||\n", r.System, strings.ReplaceAll(r.Error, "|", "\\|"))
				continue
			}
			gc := "—"
			if r.DiskAfterGCBytes > 0 {
				gc = fmt.Sprintf("%s (gc %s)", fmtBytes(r.DiskAfterGCBytes), fmtDur(r.GCNs))
			}
			verify := "FAILED"
			if r.Verified {
				verify = fmt.Sprintf("ok, %d file%s at cp %d", r.VerifiedFiles, plural(r.VerifiedFiles), r.RollbackTo)
			}
			cp50, cp99 := fmtDur(r.CheckpointP50), fmtDur(r.CheckpointP99)
			if r.AutoCheckpoint {
				cp50, cp99 = "in the write", "in the write"
			}
			fmt.Fprintf(w, "| %s | %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.System, r.Mutations, r.Checkpoints,
				cp50, cp99, fmtDur(r.ApplyP50), fmtDur(r.RollbackNs), fmtDur(r.WallNs),
				fmtBytes(r.DiskBytes), gc, fmtRSS(r.PeakRSSBytes), verify)
		}
		fmt.Fprintln(w)
		var ratios []Ratio
		for _, x := range rep.Ratios {
			if x.Workload == wname {
				ratios = append(ratios, x)
			}
		}
		if len(ratios) > 0 {
			fmt.Fprintln(w, "wsstore / baseline (below 1: wsstore faster or smaller):")
			fmt.Fprintln(w)
			fmt.Fprintln(w, "| baseline | checkpoint p50 | checkpoint p99 | rollback | wall | disk | peak RSS |")
			fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|--:|")
			for _, x := range ratios {
				fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s |\n", x.Baseline, fmtRatio(x.CheckpointP50), fmtRatio(x.CheckpointP99),
					fmtRatio(x.Rollback), fmtRatio(x.Wall), fmtRatio(x.Disk), fmtRatio(x.PeakRSS))
			}
			fmt.Fprintln(w)
		}
		for _, r := range rs {
			for _, n := range r.Notes {
				fmt.Fprintf(w, "- %s: %s\n", r.System, n)
			}
		}
		if slices.ContainsFunc(rs, func(r Result) bool { return len(r.Notes) > 0 }) {
			fmt.Fprintln(w)
		}
	}
	fmt.Fprintln(w, "## Targets")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| target | goal | measured | result |")
	fmt.Fprintln(w, "|---|---|---|---|")
	var missed []string
	measured := 0
	for _, t := range rep.Targets {
		fmt.Fprintf(w, "| %s | %s | %s | **%s** |\n", t.Name, t.Goal, t.Measured, t.Status)
		if t.Status == "MISS" {
			missed = append(missed, t.Name)
		}
		if t.Status != "N/A" {
			measured++
		}
	}
	fmt.Fprintln(w)
	for _, t := range rep.Targets {
		if t.Bottleneck != "" {
			fmt.Fprintf(w, "- %s, missed: %s.\n", t.Name, t.Bottleneck)
		}
	}
	if slices.ContainsFunc(rep.Targets, func(t Target) bool { return t.Bottleneck != "" }) {
		fmt.Fprintln(w)
	}
	switch {
	case len(missed) > 0:
		fmt.Fprintf(w, "**Missed %d of %d measured targets:** %s.\n\n", len(missed), measured, strings.Join(missed, "; "))
	case measured > 0:
		fmt.Fprintf(w, "All %d measured targets passed.\n\n", measured)
	}
	fmt.Fprintln(w, "## How it was measured")
	fmt.Fprintln(w)
	for _, n := range rep.Notes {
		fmt.Fprintf(w, "- %s\n", n)
	}
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

func fmtRatio(x float64) string {
	switch {
	case x == 0:
		return "—"
	case x < 1:
		return fmt.Sprintf("%.3g (1/%.0f)", x, 1/x)
	}
	return fmt.Sprintf("%.3g", x)
}

func fmtRSS(n int64) string {
	if n == 0 {
		return "—"
	}
	return fmtBytes(n)
}

// fmtDur formats nanoseconds with three significant digits.
func fmtDur(ns int64) string {
	if ns < 1e3 {
		return fmt.Sprintf("%d ns", ns)
	}
	// The unit is chosen after rounding to three digits, so 999.6 µs
	// is 1 ms, not 1e+03 µs.
	v := float64(ns) / 1e3
	for _, u := range []string{"µs", "ms"} {
		if v < 999.5 {
			return fmt.Sprintf("%.3g %s", v, u)
		}
		v /= 1e3
	}
	if v >= 999.5 {
		return fmt.Sprintf("%.0f s", v)
	}
	return fmt.Sprintf("%.3g s", v)
}

// fmtBytes formats a byte count in binary units.
func fmtBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, u := float64(n), 0
	for v >= unit && u < 4 {
		v /= unit
		u++
	}
	if v >= 999.5 {
		// %.3g would print 1.00e+03: show whole units instead.
		return fmt.Sprintf("%.0f %s", v, []string{"B", "KiB", "MiB", "GiB", "TiB"}[u])
	}
	return fmt.Sprintf("%.3g %s", v, []string{"B", "KiB", "MiB", "GiB", "TiB"}[u])
}

// writeTarget is the target on a write and its checkpoint through wsctl
// batch: the small files' p50 when the run took its checkpoints in the
// writes' requests, the sum of the two requests' p50s when it did not.
func writeTarget(name, goal string, c Result) Target {
	all := fmt.Sprintf("every mutation: p50 %s, p99 %s", fmtDur(c.ApplyP50), fmtDur(c.ApplyP99))
	if !c.AutoCheckpoint || c.SmallWrites == 0 {
		v := c.ApplyP50 + c.CheckpointP50
		return Target{Name: name, Goal: goal, Value: float64(v), Status: status(v <= 300_000),
			Measured: fmt.Sprintf("%s (%s; checkpoint p50 %s, p99 %s)", fmtDur(v), all, fmtDur(c.CheckpointP50), fmtDur(c.CheckpointP99))}
	}
	v := c.SmallWriteP50
	return Target{Name: name, Goal: goal, Value: float64(v), Status: status(v <= 300_000),
		Measured: fmt.Sprintf("%s, p99 %s over %d writes of files up to %s, each with its automatic checkpoint (%s)",
			fmtDur(v), fmtDur(c.SmallWriteP99), c.SmallWrites, fmtBytes(smallWrite), all)}
}

// withBottleneck names, in a missed target, where the CPU of r's process
// (or of its phase, if one is given) went.
func withBottleneck(t Target, r Result, phase string) Target {
	if t.Status == "MISS" {
		t.Bottleneck = bottleneck(r.System, r.Profile, phase)
	}
	return t
}

// status is a target's result.
func status(pass bool) string {
	if pass {
		return "PASS"
	}
	return "MISS"
}
