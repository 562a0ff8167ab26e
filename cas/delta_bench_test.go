package cas_test

import (
	"context"
	"testing"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/internal/storetest"
)

// BenchmarkReadVersion reads versions of a 200-version draft history:
// "plain" from a store without deltas, "newest" (the live version, stored
// whole) and "oldest" (a full chain away) from a store with them. The
// newest must read as fast as a plain blob.
func BenchmarkReadVersion(b *testing.B) {
	ctx := context.Background()
	versions := draftHistory(200)
	put := func(b *testing.B, opts cas.Options) (*cas.Store, []cas.Hash) {
		_, s := storetest.OpenCAS(b, opts)
		var prev cas.Hash
		hashes := make([]cas.Hash, len(versions))
		for i, v := range versions {
			h, err := s.PutVersion(ctx, nil, v, prev)
			if err != nil {
				b.Fatal(err)
			}
			hashes[i], prev = h, h
		}
		return s, hashes
	}
	read := func(b *testing.B, s *cas.Store, h cas.Hash, size int) {
		b.SetBytes(int64(size))
		for b.Loop() {
			if _, err := s.ReadAll(ctx, h); err != nil {
				b.Fatal(err)
			}
		}
	}
	plain, ph := put(b, cas.Options{DeltaMax: -1})
	deltas, dh := put(b, cas.Options{})
	last := len(versions) - 1
	b.Run("plain", func(b *testing.B) { read(b, plain, ph[last], len(versions[last])) })
	b.Run("newest", func(b *testing.B) { read(b, deltas, dh[last], len(versions[last])) })
	deepest, depth := 0, -1
	for i, h := range dh {
		if info, err := deltas.Stat(ctx, h); err == nil && info.Depth > depth {
			deepest, depth = i, info.Depth
		}
	}
	b.Run("deepest", func(b *testing.B) {
		b.ReportMetric(float64(depth), "applications")
		read(b, deltas, dh[deepest], len(versions[deepest]))
	})
}

// BenchmarkPutVersion saves a 16 KiB text over and over, each version a
// small edit of the one before, as an agent's writes to one file are: every
// version is stored whole and the ones before it re-encoded as deltas.
func BenchmarkPutVersion(b *testing.B) { benchVersions(b, 16<<10, false) }

// BenchmarkPutVersionQueued saves a 4 KiB text the same way, with each
// write's queued re-encoding run after it: the write plus the background
// work it leaves.
func BenchmarkPutVersionQueued(b *testing.B) { benchVersions(b, 4<<10, true) }

// benchVersions writes versions of a text of size bytes, each an 8-byte
// edit of the one before, running the queued re-encodings after each
// write when drain is set.
func benchVersions(b *testing.B, size int, drain bool) {
	ctx := context.Background()
	_, s := storetest.OpenCAS(b, cas.Options{})
	doc := textBytes(size, 1)
	b.SetBytes(int64(len(doc)))
	var prev cas.Hash
	var i uint64
	for b.Loop() {
		i++
		off := int(i*4099) % (len(doc) - 8)
		for k, v := 0, i; k < 8; k, v = k+1, v/26 {
			doc[off+k] = 'a' + byte(v%26)
		}
		h, err := s.PutVersion(ctx, nil, doc, prev)
		if err != nil {
			b.Fatal(err)
		}
		if drain {
			if _, err := s.Reencode(ctx, 0); err != nil {
				b.Fatal(err)
			}
		}
		prev = h
	}
}
