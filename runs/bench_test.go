package runs_test

import (
	"fmt"
	"testing"

	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

// benchWrite measures one workspace write as an agent tool makes it: a
// small file among 100 in output/, its blob, the trees on its path, the
// root swap and the journal event, plus the automatic checkpoint (row and
// event) when the profile takes one, all in one transaction.
func benchWrite(b *testing.B, autoCheckpoint bool) {
	e := newWSEnv(b, runs.Options{})
	e.newRun("run_bench", runs.CreateRequest{Profile: &runs.Profile{AutoCheckpoint: &autoCheckpoint}})
	ws := e.model("run_bench")
	paths := make([]vfs.Path, 100)
	for i := range paths {
		paths[i] = vfs.MustPath(fmt.Sprintf("output/chapter%02d/draft.md", i%10))
		if i >= 10 {
			paths[i] = vfs.MustPath(fmt.Sprintf("output/chapter%02d/notes%02d.md", i%10, i))
		}
	}
	content := make([]byte, 0, 2048)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		content = fmt.Appendf(content[:0], "# Draft %d\n\nThe knight rode north at dawn, version %d.\n", i, i)
		if _, err := ws.Write(e.ctx, paths[i%len(paths)], content, vfs.WriteOptions{}); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkWrite is a write with its journal event and automatic
// checkpoint.
func BenchmarkWrite(b *testing.B) { benchWrite(b, true) }

// BenchmarkWriteNoCheckpoint is the same write without the checkpoint.
func BenchmarkWriteNoCheckpoint(b *testing.B) { benchWrite(b, false) }

// BenchmarkCheckpoint measures a manual checkpoint: one checkpoint row and
// its event, whatever the workspace holds.
func BenchmarkCheckpoint(b *testing.B) {
	e := newLifecycleEnvB(b)
	r, err := e.svc.CreateRun(e.ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "bench"}})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := e.svc.Checkpoint(e.ctx, r.ID, "bench"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRollback measures a rollback: one pointer swap and its event.
func BenchmarkRollback(b *testing.B) {
	e := newLifecycleEnvB(b)
	r, err := e.svc.CreateRun(e.ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "bench"}})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := e.svc.Rollback(e.ctx, r.ID, 1, runs.RollbackOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// benchWrite4K measures a change to a 4 KB Markdown file that an agent
// keeps rewriting, with its automatic checkpoint: a replace that edits a
// line, or an append of a line (which reads the previous version).
func benchWrite4K(b *testing.B, mode vfs.WriteMode) {
	e := newWSEnv(b, runs.Options{})
	e.newRun("run_bench", runs.CreateRequest{})
	ws := e.model("run_bench")
	p := vfs.MustPath("output/main.md")
	doc := make([]byte, 0, 1<<20)
	for i := 0; len(doc) < 4096; i++ {
		doc = fmt.Appendf(doc, "Paragraph %d: the keeper lit the lamp at dusk and watched the ships.\n", i)
	}
	if _, err := ws.Write(e.ctx, p, doc, vfs.WriteOptions{}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		var err error
		if mode == vfs.Append {
			_, err = ws.Write(e.ctx, p, fmt.Appendf(nil, "Round %d adds a line.\n", i), vfs.WriteOptions{Mode: vfs.Append})
		} else {
			line := fmt.Appendf(nil, "Paragraph %d: round %d", i%50, i)
			copy(doc[(i%50)*70:], line)
			_, err = ws.Write(e.ctx, p, doc, vfs.WriteOptions{})
		}
		if err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkWrite4K replaces a 4 KB file with a one-line edit.
func BenchmarkWrite4K(b *testing.B) { benchWrite4K(b, vfs.Replace) }

// BenchmarkAppend4K appends a line to a file of 4 KB and growing.
func BenchmarkAppend4K(b *testing.B) { benchWrite4K(b, vfs.Append) }
