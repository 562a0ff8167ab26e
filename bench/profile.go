package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/google/pprof/profile"
)

// Stage is a share of a process's CPU profile: a phase of its work (named
// by a frame on the sample's stack), and within a phase what its samples
// were running (the frame nearest the leaf that names a part).
type Stage struct {
	Name  string  `json:"name"`
	Share float64 `json:"share"` // of all the process's samples
	CPUNs int64   `json:"cpu_ns"`
	Parts []Stage `json:"parts,omitempty"`
}

// phases name a process's work by a function on the sample's stack, in
// order of priority: the first one found is the sample's phase. A
// request's compression on other cores runs in goroutines of its own.
var phases = []struct{ name, frame string }{
	{"re-encoding drained at close", "wsstore/cas.(*Store).Drain"},
	{"requests", "wsstore/runs.(*Workspace).prepare"},
	{"requests", "wsstore/protocol.(*Session).Handle"},
	{"background runner (re-encoding, training)", "wsstore/cas.(*Store).StartReencoder"},
	{"background checkpoint of the log", "wsstore/index.(*walCheckpointer).loop"},
	{"closing the store (besides the drain)", "wsstore.(*Store).Close"},
	{"opening the store", "wsstore.Open"},
	{"Go garbage collection", "runtime.gcBgMarkWorker"},
}

// parts name what a sample ran by a function prefix, checked from the
// leaf: the first one found is its part.
var parts = []struct{ name, prefix string }{
	{"Go allocation", "runtime.mallocgc"},
	{"system calls", "syscall."},
	{"system calls", "internal/runtime/syscall."},
	{"SQLite", "modernc.org/"},
	{"zstd", "github.com/klauspost/compress/"},
	{"BLAKE3", "lukechampine.com/blake3"},
	{"database/sql and sqlx", "database/sql."},
	{"database/sql and sqlx", "github.com/jmoiron/sqlx."},
	{"request and response encoding", "github.com/wsstore/wsstore/protocol."},
	{"request and response encoding", "encoding/json."},
	{"wsstore's own code", "github.com/wsstore/wsstore/"},
}

// profileStages reads a CPU profile and splits its samples into phases,
// each into parts, largest first.
func profileStages(r io.Reader) ([]Stage, error) {
	p, err := profile.Parse(r)
	if err != nil {
		return nil, err
	}
	// The value that is CPU time (nanoseconds); a CPU profile's second.
	vi := len(p.SampleType) - 1
	for i, st := range p.SampleType {
		if st.Type == "cpu" {
			vi = i
		}
	}
	if vi < 0 {
		return nil, fmt.Errorf("profile has no sample types")
	}
	type key struct{ phase, part string }
	by := map[key]int64{}
	var total int64
	for _, s := range p.Sample {
		var frames []string // leaf first
		for _, loc := range s.Location {
			// inlined functions come first in a location's lines
			for _, ln := range loc.Line {
				if ln.Function != nil {
					frames = append(frames, ln.Function.Name)
				}
			}
		}
		v := s.Value[vi]
		total += v
		by[key{phaseOf(frames), partOf(frames)}] += v
	}
	if total == 0 {
		return nil, nil
	}
	var out []Stage
	for k, v := range by {
		i := slices.IndexFunc(out, func(s Stage) bool { return s.Name == k.phase })
		if i < 0 {
			out = append(out, Stage{Name: k.phase})
			i = len(out) - 1
		}
		out[i].CPUNs += v
		out[i].Parts = append(out[i].Parts, Stage{Name: k.part, CPUNs: v})
	}
	for i := range out {
		out[i].Share = float64(out[i].CPUNs) / float64(total)
		for j := range out[i].Parts {
			out[i].Parts[j].Share = float64(out[i].Parts[j].CPUNs) / float64(total)
		}
		sortStages(out[i].Parts)
	}
	sortStages(out)
	return out, nil
}

func phaseOf(frames []string) string {
	for _, ph := range phases {
		for _, f := range frames {
			if strings.Contains(f, ph.frame) {
				return ph.name
			}
		}
	}
	return "other (scheduler, runtime)"
}

func partOf(frames []string) string {
	for _, f := range frames {
		for _, pt := range parts {
			if strings.HasPrefix(f, pt.prefix) {
				return pt.name
			}
		}
	}
	return "Go runtime"
}

func sortStages(ss []Stage) {
	slices.SortFunc(ss, func(a, b Stage) int {
		return cmp.Or(cmp.Compare(b.CPUNs, a.CPUNs), strings.Compare(a.Name, b.Name))
	})
}

// bottleneck says where a process's CPU went: its largest phases, each
// with its largest parts, from its profile; or, given a phase, that
// phase's largest parts as shares of it.
func bottleneck(system string, stages []Stage, phase string) string {
	var total int64
	for _, s := range stages {
		total += s.CPUNs
	}
	if total == 0 {
		return ""
	}
	var b strings.Builder
	if phase != "" {
		i := slices.IndexFunc(stages, func(s Stage) bool { return s.Name == phase })
		if i < 0 {
			return ""
		}
		ph := stages[i]
		fmt.Fprintf(&b, "by the %s process's CPU profile, its %s took %s of %s of CPU: ", system, phase, fmtDur(ph.CPUNs), fmtDur(total))
		writeParts(&b, ph.Parts[:min(5, len(ph.Parts))], ph.CPUNs)
		return b.String()
	}
	fmt.Fprintf(&b, "by the %s process's CPU profile (%s of CPU): ", system, fmtDur(total))
	for i, s := range stages[:min(3, len(stages))] {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s %.0f%% (", s.Name, 100*s.Share)
		writeParts(&b, s.Parts[:min(3, len(s.Parts))], total)
		b.WriteString(")")
	}
	return b.String()
}

// writeParts writes parts as percentages of whole.
func writeParts(b *strings.Builder, parts []Stage, whole int64) {
	for i, p := range parts {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(b, "%s %.0f%%", p.Name, 100*float64(p.CPUNs)/float64(whole))
	}
}
