package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/wsstore/wsstore/runs"
)

// BenchmarkBatchWrite4K measures, through a `wsctl batch` child as a host
// drives it, a write of a 4 KB Markdown file with a one-line edit and its
// automatic checkpoint: one request line, answered before the next is
// sent. It reports the p50 and p99 of the round trip as well as the mean.
func BenchmarkBatchWrite4K(b *testing.B) {
	ctx := context.Background()
	bin, err := wsctlBinary(ctx)
	if err != nil {
		b.Fatal(err)
	}
	s := &wsctlSystem{wsstoreSystem: wsstoreSystem{ctx: ctx}, bin: bin}
	if err := s.Setup(b.TempDir()); err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if _, err := s.ask(map[string]any{"op": "run.create", "runId": benchRunID,
		"chat": runs.ChatKey{Kind: "bench", StableChatID: "bench-chat"}}); err != nil {
		b.Fatal(err)
	}
	doc := make([]byte, 0, 8192)
	for i := 0; len(doc) < 4096; i++ {
		doc = fmt.Appendf(doc, "Paragraph %d: the keeper lit the lamp at dusk and watched the ships.\n", i)
	}
	path := filepath.ToSlash(filepath.Join("output", "main.md"))
	write := func() error {
		_, err := s.ask(content(map[string]any{"op": "write", "path": path}, doc))
		return err
	}
	if err := write(); err != nil {
		b.Fatal(err)
	}
	var took []time.Duration
	i := 0
	for b.Loop() {
		copy(doc[(i%50)*70:], fmt.Appendf(nil, "Paragraph %d: round %d", i%50, i))
		start := time.Now()
		if err := write(); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(start))
		i++
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(took[len(took)*99/100].Microseconds()), "p99-µs")
}
