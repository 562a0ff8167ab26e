package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"

	"lukechampine.com/blake3"
)

// OpKind says what an Op does.
type OpKind int

// The operations every system replays.
const (
	OpWrite      OpKind = iota // create or replace Path with Data (or Src)
	OpAppend                   // append Data to Path, creating it if missing
	OpPatch                    // replace Old, which occurs exactly once in Path, with New
	OpSplice                   // apply Edits (positional patches) to Path
	OpDelete                   // remove the file Path
	OpCheckpoint               // take a checkpoint labelled Label
	// OpBatch is Batch, several OpWrites made as one step: a host
	// importing a directory of files at once.
	OpBatch
)

func (k OpKind) String() string {
	return [...]string{"write", "append", "patch", "splice", "delete", "checkpoint", "batch"}[k]
}

// Source is content too large to hold in memory: it can be streamed as
// often as needed, and gives the same bytes every time.
type Source interface {
	Size() int64
	Open() io.Reader
}

// Edit is one positional patch: Del bytes at Off replaced by Ins. An
// in-place overwrite has Del == len(Ins); an insertion has Del == 0.
type Edit struct {
	Off, Del int64
	Ins      []byte
}

// Op is one step of a workload. Systems must not keep Data or Ins after
// Apply returns: the generator reuses its buffers.
type Op struct {
	Kind  OpKind
	Path  string // workspace path, '/'-separated ("output/main.md")
	Data  []byte // OpWrite, OpAppend
	Src   Source // OpWrite of a file too large to hold: streamed instead of Data
	Old   string // OpPatch
	New   string // OpPatch
	Edits []Edit // OpSplice: sorted by Off, not overlapping, offsets before the op
	Batch []Op   // OpBatch: OpWrites with Data, each path once
	Label string // OpCheckpoint
	// Input marks an OpWrite of a materialized input (under input/): a
	// system that takes inputs when a run is created (wsstore) collects
	// them; the others write them like any file.
	Input bool
	// Sum is the expected hash of Path's content after the op; nil for
	// OpDelete and OpCheckpoint.
	Sum *Sum
}

// Sum is an expected BLAKE3-256 content hash, computed on first use: a
// large file's hash costs a pass over all its bytes, and only the
// checkpoints that are verified need it.
type Sum struct {
	once sync.Once
	f    func() [32]byte
	v    [32]byte
}

// sumOf returns the hash of b, computed now (b may change afterwards).
func sumOf(b []byte) *Sum {
	s := &Sum{v: blake3.Sum256(b)}
	s.once.Do(func() {})
	return s
}

// lazySum returns the hash of src's bytes, computed when first asked for.
func lazySum(src Source) *Sum {
	return &Sum{f: func() [32]byte {
		h := blake3.New(32, nil)
		if _, err := io.Copy(h, src.Open()); err != nil {
			panic(err) // generated sources never fail
		}
		var v [32]byte
		h.Sum(v[:0])
		return v
	}}
}

func (s *Sum) get() [32]byte {
	s.once.Do(func() { s.v = s.f() })
	return s.v
}

// Tracker records the expected workspace state at every checkpoint as the
// changes since the previous one (hashes, never contents), so memory stays
// bounded by the number of changes whatever the file sizes.
type Tracker struct {
	log     [][]change // per checkpoint
	pending []change
}

type change struct {
	path string
	sum  *Sum // nil: deleted
}

func (t *Tracker) observe(op Op) {
	switch op.Kind {
	case OpCheckpoint:
		t.log = append(t.log, t.pending)
		t.pending = nil
	case OpDelete:
		t.pending = append(t.pending, change{op.Path, nil})
	case OpBatch:
		for _, w := range op.Batch {
			t.observe(w)
		}
	default:
		t.pending = append(t.pending, change{op.Path, op.Sum})
	}
}

// state returns the expected hash of every file at checkpoint i (0-based).
func (t *Tracker) state(i int) map[string][32]byte {
	cur := map[string]*Sum{}
	for _, cs := range t.log[:i+1] {
		for _, c := range cs {
			if c.sum == nil {
				delete(cur, c.path)
			} else {
				cur[c.path] = c.sum
			}
		}
	}
	out := make(map[string][32]byte, len(cur))
	for p, s := range cur {
		out[p] = s.get()
	}
	return out
}

// Scale sizes the workloads.
type Scale struct {
	ChatRounds      int   `json:"chat_rounds"`
	ChatPromptBytes int   `json:"chat_prompt_bytes"`
	ChatWorldBytes  int   `json:"chat_world_bytes"`
	ProjectFiles    int   `json:"project_files"`
	ProjectDirs     int   `json:"project_dirs"`
	ProjectBinaries int   `json:"project_binaries"`
	ProjectBinBytes int   `json:"project_binary_bytes"`
	ProjectSteps    int   `json:"project_steps"`
	LargeBytes      int64 `json:"large_bytes"`
	LargeSteps      int   `json:"large_steps"`
	RetentionRuns   int   `json:"retention_runs"`
	RetentionChats  int   `json:"retention_chats"`
	RetentionRounds int   `json:"retention_rounds"`
}

// FullScale is the scale the issue fixes; QuickScale is for smoke runs.
var (
	FullScale = Scale{ChatRounds: 300, ChatPromptBytes: 150 << 10, ChatWorldBytes: 300 << 10,
		ProjectFiles: 5000, ProjectDirs: 250, ProjectBinaries: 4, ProjectBinBytes: 1 << 20, ProjectSteps: 100,
		LargeBytes: 256 << 20, LargeSteps: 20, RetentionRuns: 200, RetentionChats: 20, RetentionRounds: 6}
	QuickScale = Scale{ChatRounds: 60, ChatPromptBytes: 150 << 10, ChatWorldBytes: 300 << 10,
		ProjectFiles: 500, ProjectDirs: 25, ProjectBinaries: 4, ProjectBinBytes: 1 << 20, ProjectSteps: 20,
		LargeBytes: 16 << 20, LargeSteps: 5, RetentionRuns: 200, RetentionChats: 20, RetentionRounds: 3}
)

// Workload is a named, deterministic sequence of ops.
type Workload struct {
	Name string
	// Desc says what the workload does at this scale, for the report.
	Desc string
	// Gen calls emit with every op in order; the sequence depends only on
	// the seed and the scale. An error from emit stops it and is returned.
	Gen func(emit func(Op) error) error
	// EveryMutation says a checkpoint follows every mutation, as a run
	// with automatic checkpoints takes them: a system that can take
	// them so (autoCheckpointer) takes each in its mutation's request.
	EveryMutation bool
}

var workloadNames = []string{"chat", "project", "large", retentionWorkload}

// newWorkload returns the named workload.
func newWorkload(name string, seed uint64, sc Scale) (Workload, error) {
	switch name {
	case "chat":
		return Workload{Name: name,
			Desc: fmt.Sprintf("one run, %d rounds, %d checkpoints (one after every mutation); inputs of %s and %s written once",
				sc.ChatRounds, 2*sc.ChatRounds, fmtBytes(int64(sc.ChatPromptBytes)), fmtBytes(int64(sc.ChatWorldBytes))),
			Gen: func(emit func(Op) error) error { return chatOps(seed, sc, emit) }, EveryMutation: true}, nil
	case "project":
		return Workload{Name: name,
			Desc: fmt.Sprintf("%d text files in %d directories plus %d × %s binaries, imported one directory per batch, then %d checkpoints after editing 3 files each (plus the import checkpoint)",
				sc.ProjectFiles, sc.ProjectDirs, sc.ProjectBinaries, fmtBytes(int64(sc.ProjectBinBytes)), sc.ProjectSteps),
			Gen: func(emit func(Op) error) error { return projectOps(seed, sc, emit) }}, nil
	case "large":
		return Workload{Name: name,
			Desc: fmt.Sprintf("one %s text file, then %d checkpoints after a few small in-place edits each (and an occasional insertion), plus the initial checkpoint",
				fmtBytes(sc.LargeBytes), sc.LargeSteps),
			Gen: func(emit func(Op) error) error { return largeOps(seed, sc, emit) }}, nil
	case retentionWorkload:
		return Workload{Name: name, Desc: retentionDesc(sc),
			Gen: func(emit func(Op) error) error { return retentionOps(seed, sc, emit) }}, nil
	}
	return Workload{}, fmt.Errorf("unknown workload %q (want one of %s)", name, strings.Join(workloadNames, ", "))
}

// chatOps is a long chat run: output/main.md grows by appends and is
// patched in the middle, output/status.md is rewritten, scratch notes are
// added, the summary and persist memory are updated; a checkpoint follows
// every mutation.
func chatOps(seed uint64, sc Scale, emit func(Op) error) error {
	g := newTextGen(seed, 1)
	r := g.r
	prompt := promptSnapshot(g, sc.ChatPromptBytes)
	if err := emit(Op{Kind: OpWrite, Path: "input/prompt_snapshot.json", Data: prompt, Input: true, Sum: sumOf(prompt)}); err != nil {
		return err
	}
	world := worldInfo(g, sc.ChatWorldBytes)
	if err := emit(Op{Kind: OpWrite, Path: "input/world/activated.md", Data: world, Input: true, Sum: sumOf(world)}); err != nil {
		return err
	}
	const mainPath = "output/main.md"
	var main, memory []byte
	var bullets []string
	notes := 0
	cp := func(label string) error { return emit(Op{Kind: OpCheckpoint, Label: label}) }
	for round := 1; round <= sc.ChatRounds; round++ {
		part := append(fmt.Appendf(nil, "\n## Part %d\n\n", round), g.paragraph(200+r.IntN(400))...)
		op := Op{Kind: OpAppend, Path: mainPath, Data: part}
		if main == nil {
			part = append([]byte("# The story so far\n"), part...)
			op = Op{Kind: OpWrite, Path: mainPath, Data: part}
		}
		main = append(main, part...)
		op.Sum = sumOf(main)
		if err := emit(op); err != nil {
			return err
		}
		if err := cp(fmt.Sprintf("round %d: append", round)); err != nil {
			return err
		}

		op = Op{}
		switch k := r.IntN(100); {
		case k < 35 && round >= 3:
			if old, new, ok := pickPatch(g, main, len(main)/3, 2*len(main)/3); ok {
				main = bytes.Replace(main, []byte(old), []byte(new), 1)
				op = Op{Kind: OpPatch, Path: mainPath, Old: old, New: new, Sum: sumOf(main)}
			}
		case k < 55:
			// handled below: status is also the fallback
		case k < 75:
			notes++
			b := append(fmt.Appendf(nil, "# Note %d\n\n", notes), g.paragraph(300+r.IntN(1700))...)
			op = Op{Kind: OpWrite, Path: fmt.Sprintf("scratch/note-%04d.md", notes), Data: b, Sum: sumOf(b)}
		case k < 90:
			bullets = append(bullets, fmt.Sprintf("- Part %d: %s", round, g.sentence(8+r.IntN(12))))
			if len(bullets) > 40 {
				bullets = bullets[1:]
			}
			b := []byte("# Summary\n\n" + strings.Join(bullets, "\n") + "\n")
			op = Op{Kind: OpWrite, Path: "summaries/summary.md", Data: b, Sum: sumOf(b)}
		default:
			line := []byte("- " + g.sentence(6+r.IntN(10)) + "\n")
			op = Op{Kind: OpAppend, Path: "persist/memory.md", Data: line}
			if memory == nil {
				line = append([]byte("# Memory\n\n"), line...)
				op = Op{Kind: OpWrite, Path: "persist/memory.md", Data: line}
			}
			memory = append(memory, line...)
			op.Sum = sumOf(memory)
		}
		if op.Path == "" {
			b := append(fmt.Appendf(nil, "# Status\n\nRound: %d\nPhase: %s\nParts written: %d\nBytes: %d\n\n", round, g.word(), round, len(main)),
				g.paragraph(600+r.IntN(900))...)
			op = Op{Kind: OpWrite, Path: "output/status.md", Data: b, Sum: sumOf(b)}
		}
		if err := emit(op); err != nil {
			return err
		}
		if err := cp(fmt.Sprintf("round %d: %s %s", round, op.Kind, op.Path)); err != nil {
			return err
		}
	}
	return nil
}

// pickPatch chooses a line of text starting in [from, to) that occurs once
// in text and returns it with a changed version, as an edit tool would.
func pickPatch(g textGen, text []byte, from, to int) (old, new string, ok bool) {
	if to <= from {
		return "", "", false
	}
	for range 50 {
		at := from + g.r.IntN(to-from)
		start := bytes.LastIndexByte(text[:at], '\n') + 1
		end := bytes.IndexByte(text[at:], '\n')
		if end < 0 {
			continue
		}
		line := string(text[start : at+end])
		if len(line) < 20 || strings.HasPrefix(line, "#") || bytes.Count(text, []byte(line)) != 1 {
			continue
		}
		ws := strings.Fields(line)
		ws[g.r.IntN(len(ws))] = g.word()
		i := g.r.IntN(len(ws))
		ws = slices.Insert(ws, i, g.word(), g.word())
		lead := line[:len(line)-len(strings.TrimLeft(line, " \t"))]
		changed := lead + strings.Join(ws, " ")
		if changed != line {
			return line, changed, true
		}
	}
	return "", "", false
}

// promptSnapshot returns a JSON prompt of about size bytes.
func promptSnapshot(g textGen, size int) []byte {
	type msg struct {
		Role    string `json:"role"`
		Name    string `json:"name"`
		Content string `json:"content"`
	}
	var snap struct {
		Model    string `json:"model"`
		Messages []msg  `json:"messages"`
	}
	snap.Model = "bench-model"
	n := 0
	for n < size {
		m := msg{Role: []string{"user", "assistant"}[len(snap.Messages)%2], Name: g.word(), Content: string(g.paragraph(300 + g.r.IntN(1500)))}
		snap.Messages = append(snap.Messages, m)
		n += len(m.Content) + 60
	}
	b, _ := json.MarshalIndent(snap, "", "  ") // plain strings always marshal
	return b
}

// worldInfo returns Markdown world entries of about size bytes.
func worldInfo(g textGen, size int) []byte {
	b := bytes.NewBufferString("# Activated world info\n\n")
	for b.Len() < size {
		fmt.Fprintf(b, "## %s %s\n\nKeys: %s, %s, %s\n\n", g.word(), g.word(), g.word(), g.word(), g.word())
		b.Write(g.paragraph(500 + g.r.IntN(1500)))
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// projectOps is a source tree: sc.ProjectFiles pseudo-source files in
// sc.ProjectDirs directories and a few random binaries, one checkpoint
// after the import, then sc.ProjectSteps checkpoints after editing three
// files each, adding or deleting a file now and then. File contents are
// regenerated from the seed when needed; only edited files are held.
func projectOps(seed uint64, sc Scale, emit func(Op) error) error {
	r := rand.New(rand.NewPCG(seed, 3))
	g := textGen{r: r}
	type file struct {
		path     string
		id, size int
	}
	var live []file
	edited := map[string][]byte{}
	content := func(f file) []byte {
		if b, ok := edited[f.path]; ok {
			return b
		}
		return sourceFile(seed, f.id, f.size)
	}
	dirName := func(d int) string { return fmt.Sprintf("output/src/%s%03d", words[48+d%208], d) }
	nextID := 0
	newFile := func(d int) file {
		id := nextID
		nextID++
		return file{path: fmt.Sprintf("%s/%s_%05d.txt", dirName(d), words[r.IntN(256)], id), id: id, size: 2048 + r.IntN(12<<10)}
	}
	// The import is one batch per directory, as a host copying a project
	// in would make it; the edits after it are single-file ops, as an
	// agent's tools make them.
	perDir := max(1, sc.ProjectFiles/max(1, sc.ProjectDirs))
	var batch []Op
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		op := Op{Kind: OpBatch, Path: batch[0].Path[:strings.LastIndexByte(batch[0].Path, '/')], Batch: batch}
		batch = nil
		return emit(op)
	}
	for i := range sc.ProjectFiles {
		if i%perDir == 0 && i/perDir < sc.ProjectDirs {
			if err := flush(); err != nil {
				return err
			}
		}
		f := newFile(min(i/perDir, sc.ProjectDirs-1))
		b := sourceFile(seed, f.id, f.size)
		live = append(live, f)
		batch = append(batch, Op{Kind: OpWrite, Path: f.path, Data: b, Sum: sumOf(b)})
	}
	if err := flush(); err != nil {
		return err
	}
	for i := range sc.ProjectBinaries {
		b := randomBytes(r, sc.ProjectBinBytes)
		batch = append(batch, Op{Kind: OpWrite, Path: fmt.Sprintf("output/assets/blob%d.bin", i), Data: b, Sum: sumOf(b)})
	}
	if err := flush(); err != nil {
		return err
	}
	if err := emit(Op{Kind: OpCheckpoint, Label: "import"}); err != nil {
		return err
	}
	for step := 1; step <= sc.ProjectSteps; step++ {
		touched := map[string]bool{}
		for range 3 {
			if len(live) == 0 {
				break
			}
			f := live[r.IntN(len(live))]
			touched[f.path] = true
			cur := content(f)
			var op Op
			if r.IntN(10) < 7 {
				if old, new, ok := pickPatch(g, cur, 0, len(cur)); ok {
					next := bytes.Replace(cur, []byte(old), []byte(new), 1)
					edited[f.path] = next
					op = Op{Kind: OpPatch, Path: f.path, Old: old, New: new, Sum: sumOf(next)}
				}
			}
			if op.Path == "" {
				add := g.function()
				next := append(slices.Clip(cur), add...)
				edited[f.path] = next
				op = Op{Kind: OpAppend, Path: f.path, Data: add, Sum: sumOf(next)}
			}
			if err := emit(op); err != nil {
				return err
			}
		}
		switch k := r.IntN(100); {
		case k < 15:
			f := newFile(r.IntN(sc.ProjectDirs))
			b := sourceFile(seed, f.id, f.size)
			live = append(live, f)
			if err := emit(Op{Kind: OpWrite, Path: f.path, Data: b, Sum: sumOf(b)}); err != nil {
				return err
			}
		case k < 25 && len(live) > 1:
			i := r.IntN(len(live))
			if f := live[i]; !touched[f.path] {
				live[i] = live[len(live)-1]
				live = live[:len(live)-1]
				delete(edited, f.path)
				if err := emit(Op{Kind: OpDelete, Path: f.path}); err != nil {
					return err
				}
			}
		}
		if err := emit(Op{Kind: OpCheckpoint, Label: fmt.Sprintf("step %d", step)}); err != nil {
			return err
		}
	}
	return nil
}

// largeOps is one large text file: written once (streamed), checkpointed,
// then sc.LargeSteps times a few small in-place overwrites at random
// offsets, sometimes with a small insertion, applied as one op, and a
// checkpoint.
func largeOps(seed uint64, sc Scale, emit func(Op) error) error {
	const path = "output/large.txt"
	r := rand.New(rand.NewPCG(seed, 4))
	doc := newLargeDoc(seed, sc.LargeBytes)
	if err := emit(Op{Kind: OpWrite, Path: path, Src: doc, Sum: lazySum(doc)}); err != nil {
		return err
	}
	if err := emit(Op{Kind: OpCheckpoint, Label: "initial"}); err != nil {
		return err
	}
	for step := 1; step <= sc.LargeSteps; step++ {
		var edits []Edit
		for range 4 + r.IntN(5) {
			n := 1 + r.IntN(16)
			edits = append(edits, Edit{Off: r.Int64N(doc.size - int64(n)), Del: int64(n), Ins: lowerBytes(r, n)})
		}
		if r.IntN(10) < 3 {
			ins := append([]byte(" "), textGen{r: r}.paragraph(16+r.IntN(184))...)
			edits = append(edits, Edit{Off: r.Int64N(doc.size), Ins: ins})
		}
		slices.SortStableFunc(edits, func(a, b Edit) int { return cmp.Compare(a.Off, b.Off) })
		// Drop edits that overlap the one before, so offsets stay those of
		// the file before the op.
		kept := edits[:0]
		end := int64(-1)
		for _, e := range edits {
			if e.Off < end {
				continue
			}
			kept = append(kept, e)
			end = e.Off + e.Del
		}
		doc = doc.apply(kept)
		if err := emit(Op{Kind: OpSplice, Path: path, Edits: kept, Sum: lazySum(doc)}); err != nil {
			return err
		}
		if err := emit(Op{Kind: OpCheckpoint, Label: fmt.Sprintf("step %d", step)}); err != nil {
			return err
		}
	}
	return nil
}
