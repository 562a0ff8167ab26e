package protocol

import (
	"strings"
	"testing"
)

// BenchmarkDecodeWrite reads a write line into its request: the part of
// Handle that is the protocol's own, one scan of the bytes and one walk of
// the tree.
func BenchmarkDecodeWrite(b *testing.B) {
	line := []byte(`{"op":"write","id":17,"path":"output/main.md","content":"` +
		strings.Repeat(`# Title\n\nSome text, \"quoted\", and a tab\there.\n`, 20) + `"}`)
	var s scanner
	b.ReportAllocs()
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		if err := s.scan(line); err != nil {
			b.Fatal(err)
		}
		var req writeRequest
		if err := (request{&s.tree}).decode(&req); err != nil {
			b.Fatal(err)
		}
	}
}
