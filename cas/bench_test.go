package cas_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/internal/storetest"
)

// Benchmarks for Put and Get over text-like and random content of four
// sizes; b.SetBytes makes them report MB/s of plain content, and "ratio" is
// plain over stored size. A quick run:
//
//	go test ./cas -run XXX -bench . -benchtime 2x
//
// The figures in docs/figures-cas.md come from steadier settings:
//
//	go test ./cas -run XXX -bench '.*/.*/(4KiB|64KiB|1MiB)$' -benchtime 1s -count 3
//	go test ./cas -run XXX -bench '.*/.*/64MiB$' -benchtime 5x -count 2

var benchSizes = []struct {
	name string
	n    int
}{
	{"4KiB", 4 << 10},
	{"64KiB", 64 << 10},
	{"1MiB", 1 << 20},
	{"64MiB", 64 << 20},
}

var benchKinds = []struct {
	name string
	gen  func(n int, seed uint64) []byte
}{
	{"Text", textBytes},
	{"Random", randomBytes},
}

// benchStride is how far apart Put benchmarks stamp the iteration number
// into the content: every 4 KiB, so every chunk of a chunked blob changes
// too and nothing dedups against an earlier iteration.
const benchStride = 4 << 10

// stamp writes i into b every benchStride bytes as eight letters, which
// keeps text text.
func stamp(b []byte, i uint64) {
	for off := 0; off < len(b); off += benchStride {
		v := i
		for k := 0; k < 8 && off+k < len(b); k++ {
			b[off+k] = 'a' + byte(v%26)
			v /= 26
		}
	}
}

func BenchmarkPut(b *testing.B) {
	ctx := context.Background()
	for _, kind := range benchKinds {
		for _, size := range benchSizes {
			b.Run(kind.name+"/"+size.name, func(b *testing.B) {
				s := openBench(b)
				data := kind.gen(size.n, 1)
				b.SetBytes(int64(size.n))
				var i uint64
				for b.Loop() {
					i++
					stamp(data, i)
					if _, err := s.Put(ctx, bytes.NewReader(data)); err != nil {
						b.Fatal(err)
					}
				}
				reportRatio(b, s, data)
			})
		}
	}
}

func BenchmarkGet(b *testing.B) {
	ctx := context.Background()
	for _, kind := range benchKinds {
		for _, size := range benchSizes {
			b.Run(kind.name+"/"+size.name, func(b *testing.B) {
				s := openBench(b)
				data := kind.gen(size.n, 1)
				h, err := s.Put(ctx, bytes.NewReader(data))
				require.NoError(b, err)
				b.SetBytes(int64(size.n))
				buf := make([]byte, 64<<10)
				for b.Loop() {
					rc, err := s.Get(ctx, h)
					if err != nil {
						b.Fatal(err)
					}
					n, err := io.CopyBuffer(io.Discard, rc, buf)
					if err != nil || n != int64(size.n) {
						b.Fatal(n, err)
					}
					rc.Close()
				}
				reportRatio(b, s, data)
			})
		}
	}
}

func openBench(b *testing.B) *cas.Store {
	_, s := storetest.OpenCAS(b, cas.Options{})
	return s
}

// reportRatio reports how many plain bytes each stored byte holds for the
// last content put.
func reportRatio(b *testing.B, s *cas.Store, data []byte) {
	b.Helper()
	info, err := s.Stat(context.Background(), cas.Sum(data))
	if err != nil {
		b.Fatal(fmt.Errorf("stat: %w", err))
	}
	if info.Stored > 0 {
		b.ReportMetric(float64(info.Size)/float64(info.Stored), "ratio")
	}
}
