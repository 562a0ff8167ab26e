package main

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cpuProfile builds a CPU profile of the given stacks (leaf first), each
// with its CPU time.
func cpuProfile(t *testing.T, stacks map[time.Duration][]string) []byte {
	t.Helper()
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		PeriodType: &profile.ValueType{Type: "cpu", Unit: "nanoseconds"},
		Period:     int64(10 * time.Millisecond),
	}
	funcs := map[string]*profile.Function{}
	for d, stack := range stacks {
		s := &profile.Sample{Value: []int64{int64(d / (10 * time.Millisecond)), int64(d)}}
		for _, name := range stack {
			f := funcs[name]
			if f == nil {
				f = &profile.Function{ID: uint64(len(funcs) + 1), Name: name}
				funcs[name] = f
				p.Function = append(p.Function, f)
			}
			loc := &profile.Location{ID: uint64(len(p.Location) + 1), Line: []profile.Line{{Function: f}}}
			p.Location = append(p.Location, loc)
			s.Location = append(s.Location, loc)
		}
		p.Sample = append(p.Sample, s)
	}
	var buf bytes.Buffer
	require.NoError(t, p.Write(&buf))
	return buf.Bytes()
}

// TestProfileStages: a sample's phase is the first of the phases its stack
// holds (the drain before the Close it runs in), its part the frame
// nearest its leaf that names one; a request's compression on another
// core counts as the request's.
func TestProfileStages(t *testing.T) {
	prof := cpuProfile(t, map[time.Duration][]string{
		300 * time.Millisecond: {"modernc.org/sqlite/lib._sqlite3VdbeExec", "github.com/wsstore/wsstore/runs.(*Workspace).Write",
			"github.com/wsstore/wsstore/protocol.(*Session).Handle", "main.runBatch", "main.main"},
		100 * time.Millisecond: {"github.com/klauspost/compress/zstd.(*Encoder).EncodeAll", "github.com/wsstore/wsstore/cas.(*Store).Prepare",
			"github.com/wsstore/wsstore/runs.(*Workspace).prepare.func2"},
		50 * time.Millisecond: {"runtime.mallocgc", "modernc.org/sqlite/lib._sqlite3VdbeExec", "github.com/wsstore/wsstore/protocol.(*Session).Handle"},
		200 * time.Millisecond: {"github.com/klauspost/compress/zstd.(*Encoder).EncodeAll", "github.com/wsstore/wsstore/cas.(*Store).runJob",
			"github.com/wsstore/wsstore/cas.(*Store).Drain", "github.com/wsstore/wsstore.(*Store).Close", "main.main"},
		40 * time.Millisecond:  {"runtime.futex", "runtime.schedule", "runtime.mcall"},
		310 * time.Millisecond: {"syscall.Syscall6", "os.(*File).Write", "github.com/wsstore/wsstore/protocol.(*Session).respond", "github.com/wsstore/wsstore/protocol.(*Session).Handle"},
	})
	st, err := profileStages(bytes.NewReader(prof))
	require.NoError(t, err)
	require.Len(t, st, 3)

	assert.Equal(t, "requests", st[0].Name)
	assert.Equal(t, int64(760*time.Millisecond), st[0].CPUNs)
	assert.InDelta(t, 0.76, st[0].Share, 1e-9)
	var names []string
	for _, p := range st[0].Parts {
		names = append(names, p.Name)
	}
	assert.Equal(t, []string{"system calls", "SQLite", "zstd", "Go allocation"}, names, "largest first")

	assert.Equal(t, "re-encoding drained at close", st[1].Name)
	assert.Equal(t, []Stage{{Name: "zstd", Share: 0.2, CPUNs: int64(200 * time.Millisecond)}}, st[1].Parts)
	assert.Equal(t, "other (scheduler, runtime)", st[2].Name)
	assert.Equal(t, "Go runtime", st[2].Parts[0].Name)

	assert.Equal(t, "by the wsctl process's CPU profile (1 s of CPU): requests 76% (system calls 31%, SQLite 30%, zstd 10%); "+
		"re-encoding drained at close 20% (zstd 20%); other (scheduler, runtime) 4% (Go runtime 4%)", bottleneck("wsctl", st, ""))
	assert.Equal(t, "by the wsctl process's CPU profile, its requests took 760 ms of 1 s of CPU: system calls 41%, SQLite 39%, zstd 13%, Go allocation 7%",
		bottleneck("wsctl", st, "requests"))
	assert.Empty(t, bottleneck("wsctl", st, "opening the store"), "a phase with no samples")
	assert.Empty(t, bottleneck("wsctl", nil, ""), "no samples, nothing to name")
}

func TestProfileStagesRejectsWhatIsNoProfile(t *testing.T) {
	_, err := profileStages(bytes.NewReader([]byte("not a profile")))
	assert.Error(t, err)
}

// The profile flags may name a directory that does not exist yet: the
// bench creates it before any case's process writes there.
func TestProfileDirsMade(t *testing.T) {
	dir := t.TempDir()
	o := options{cpuprofile: filepath.Join(dir, "a", "cpu.prof"), memprofile: filepath.Join(dir, "b", "c", "mem.prof")}
	require.NoError(t, o.makeProfileDirs())
	assert.DirExists(t, filepath.Join(dir, "a"))
	assert.DirExists(t, filepath.Join(dir, "b", "c"))
	assert.NoError(t, options{}.makeProfileDirs(), "no profile asked for")
}
