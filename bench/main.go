package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/wsstore/wsstore/internal/heappeak"
)

// defaultSeed fixes the workloads; change it with --seed.
const defaultSeed = 20250101

type options struct {
	quick      bool
	workloads  string
	systems    string
	dir        string
	out        string
	seed       uint64
	keep       bool
	cpuprofile string
	memprofile string
	// child and childOut are the hidden flags of a child process.
	child    string
	childOut string
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	var o options
	fl := flag.NewFlagSet("bench", flag.ContinueOnError)
	fl.SetOutput(stderr)
	fl.BoolVar(&o.quick, "quick", false, "scaled-down workloads for a smoke run (well under a minute)")
	fl.StringVar(&o.workloads, "workloads", strings.Join(workloadNames, ","), "workloads to run, comma-separated")
	fl.StringVar(&o.systems, "systems", strings.Join(systemNames, ","), "systems to run, comma-separated")
	fl.StringVar(&o.dir, "dir", "", "scratch directory (default: a temporary directory, removed afterwards)")
	fl.StringVar(&o.out, "out", filepath.Join("bench", "out", "report.json"), "JSON report file (directories are created)")
	fl.Uint64Var(&o.seed, "seed", defaultSeed, "workload seed")
	fl.BoolVar(&o.keep, "keep", false, "keep each system's scratch directory instead of removing it after measuring")
	fl.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of each wsstore child (and of each wsctl batch process) to this file, suffixed with the workload name")
	fl.StringVar(&o.memprofile, "memprofile", "", "write a heap profile of each wsstore child to this file, suffixed with the workload name")
	fl.StringVar(&o.child, "child", "", "internal: run one workload/system and write its result to -child-out")
	fl.StringVar(&o.childOut, "child-out", "", "internal: result file of a child")
	fl.Usage = func() {
		fmt.Fprintf(stderr, "usage: go run ./bench [flags]\n\n")
		fl.VisitAll(func(f *flag.Flag) {
			if !strings.HasPrefix(f.Name, "child") {
				fmt.Fprintf(stderr, "  --%s\n    \t%s (default %q)\n", f.Name, f.Usage, f.DefValue)
			}
		})
	}
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if o.child != "" {
		return runChild(ctx, o, stderr)
	}
	if err := runParent(ctx, o, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	return 0
}

func (o options) scale() (string, Scale) {
	if o.quick {
		return "quick", QuickScale
	}
	return "full", FullScale
}

// parseList splits a comma-separated list and checks every name is known.
func parseList(s string, known []string, what string) ([]string, error) {
	var out []string
	for _, n := range strings.Split(s, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if !slices.Contains(known, n) {
			return nil, fmt.Errorf("unknown %s %q (want some of %s)", what, n, strings.Join(known, ","))
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no %s selected", what)
	}
	return out, nil
}

// runParent runs every selected case in a child process and reports.
func runParent(ctx context.Context, o options, stdout, stderr io.Writer) error {
	workloads, err := parseList(o.workloads, workloadNames, "workload")
	if err != nil {
		return err
	}
	systems, err := parseList(o.systems, systemNames, "system")
	if err != nil {
		return err
	}
	mode, sc := o.scale()
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	scratch := o.dir
	if scratch == "" {
		if scratch, err = os.MkdirTemp("", "wsstore-bench-"); err != nil {
			return err
		}
		if !o.keep {
			defer os.RemoveAll(scratch)
		}
	} else if err := os.MkdirAll(scratch, 0o755); err != nil {
		return err
	}
	if err := o.makeProfileDirs(); err != nil {
		return err
	}
	_, haveGit := gitAvailable()
	if slices.Contains(systems, "wsctl") && os.Getenv(wsctlBinEnv) == "" {
		// Built once, here: a build in the case's process would count
		// the compiler's memory as the case's peak RSS. A binary named
		// by the environment is used as it is, to compare two builds.
		bin, err := buildWsctl(ctx, scratch)
		if err != nil {
			return err
		}
		os.Setenv(wsctlBinEnv, bin)
	}

	var results []Result
	failed := 0
	for _, w := range workloads {
		for _, s := range systems {
			if why := skipCase(w, s); why != "" {
				results = append(results, Result{Workload: w, System: s, Skipped: why})
				continue
			}
			if s == "git" && !haveGit {
				results = append(results, Result{Workload: w, System: s, Skipped: "git not found on PATH"})
				continue
			}
			fmt.Fprintf(stderr, "bench: %s on %s ...\n", w, s)
			res := runChildProcess(ctx, exe, o, w, s, filepath.Join(scratch, w+"-"+s))
			if res.Error != "" {
				failed++
				fmt.Fprintf(stderr, "bench: %s on %s FAILED: %s\n", w, s, res.Error)
			} else {
				fmt.Fprintf(stderr, "bench: %s on %s done in %s (peak RSS %s)\n", w, s, fmtDur(res.ElapsedNs), fmtRSS(res.PeakRSSBytes))
			}
			results = append(results, res)
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
	}
	rep := buildReport(mode, o.seed, sc, results)
	writeMarkdown(stdout, rep)
	if err := writeJSON(o.out, rep); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "bench: JSON report in %s\n", o.out)
	if failed > 0 {
		return fmt.Errorf("%d case(s) failed", failed)
	}
	return nil
}

// runChildProcess runs one case in a child process and reads back its
// result, adding the child's peak RSS.
func runChildProcess(ctx context.Context, exe string, o options, w, s, dir string) Result {
	res := Result{Workload: w, System: s}
	if err := os.RemoveAll(dir); err != nil {
		res.Error = err.Error()
		return res
	}
	out := dir + ".json"
	args := []string{"-child", w + "/" + s, "-child-out", out, "-dir", dir, "-seed", fmt.Sprint(o.seed)}
	if o.quick {
		args = append(args, "-quick")
	}
	if s == "wsstore" && o.cpuprofile != "" {
		args = append(args, "-cpuprofile", suffixed(o.cpuprofile, w))
	}
	if s == "wsstore" && o.memprofile != "" {
		args = append(args, "-memprofile", suffixed(o.memprofile, w))
	}
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if s == "wsctl" && o.cpuprofile != "" {
		// the wsctl batch child the case runs profiles itself
		cmd.Env = append(os.Environ(), wsctlProfileEnv+"="+suffixed(o.cpuprofile, w+"-wsctl"))
	}
	start := time.Now()
	runErr := cmd.Run()
	if b, err := os.ReadFile(out); err == nil {
		if err := json.Unmarshal(b, &res); err != nil {
			res.Error = fmt.Sprintf("child result: %v", err)
		}
	} else if runErr == nil {
		res.Error = fmt.Sprintf("child result: %v", err)
	}
	if runErr != nil && res.Error == "" {
		res.Error = fmt.Sprintf("child process: %v", runErr)
	}
	if cmd.ProcessState != nil {
		res.PeakRSSWithGCBytes = peakRSS(cmd.ProcessState)
	}
	if res.ElapsedNs == 0 {
		res.ElapsedNs = int64(time.Since(start))
	}
	if !o.keep {
		os.RemoveAll(dir)
		os.Remove(out)
		// what a case that failed did not read
		os.Remove(caseProfile(dir))
		os.Remove(caseHeapPeak(dir))
	}
	return res
}

// makeProfileDirs creates the directories --cpuprofile and --memprofile
// name: each case's child, and each wsctl batch process, writes its
// profile beside that name and cannot create them itself.
func (o options) makeProfileDirs() error {
	for _, f := range []string{o.cpuprofile, o.memprofile} {
		if f == "" {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			return fmt.Errorf("profile directory: %w", err)
		}
	}
	return nil
}

// suffixed inserts "-suffix" before name's extension.
func suffixed(name, suffix string) string {
	ext := filepath.Ext(name)
	return strings.TrimSuffix(name, ext) + "-" + suffix + ext
}

// runChild runs the one case named by -child and writes its result, even
// a failed one, to -child-out.
func runChild(ctx context.Context, o options, stderr io.Writer) int {
	w, s, ok := strings.Cut(o.child, "/")
	if !ok || o.childOut == "" || o.dir == "" {
		fmt.Fprintln(stderr, "bench: -child needs workload/system, -child-out and -dir")
		return 2
	}
	if o.cpuprofile != "" {
		f, err := os.Create(o.cpuprofile)
		if err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return 1
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return 1
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
	}
	_, sc := o.scale()
	var stopHeap func() uint64
	if s == "wsstore" {
		// the store runs in this process; wsctl's reports its own
		stopHeap = heappeak.Start()
	}
	res, err := runCase(ctx, caseConfig{Workload: w, System: s, Dir: o.dir, Seed: o.seed, Scale: sc, Progress: stderr, MeasureRSS: true})
	if stopHeap != nil {
		res.PeakHeapBytes = int64(stopHeap())
	}
	if err != nil {
		res.Error = err.Error()
	}
	res.PeakRSSBytes = res.PeakRSSWorkloadBytes
	if o.memprofile != "" {
		if err := writeHeapProfile(o.memprofile); err != nil {
			fmt.Fprintln(stderr, "bench:", err)
		}
	}
	b, _ := json.Marshal(res) // a Result always marshals
	if err := os.WriteFile(o.childOut, b, 0o644); err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	if err != nil {
		return 1
	}
	return 0
}

func writeHeapProfile(name string) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
