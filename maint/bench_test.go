package maint_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/cas/storagetest"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/maint"
)

// benchStore opens a store holding n blobs that no root reaches, of a
// few KiB each, through st (the SQLite storage if nil).
func benchStore(b *testing.B, st cas.Storage, n int) *maint.Maintainer {
	b.Helper()
	s := storetest.OpenStoreWith(b, wsstore.Options{CAS: cas.Options{Storage: st}})
	ctx := context.Background()
	require.NoError(b, s.DB.Update(ctx, func(tx *index.Tx) error {
		for i := range n {
			data := fmt.Appendf(nil, "blob %d %0*d", i, 2000+i%3000, i)
			if _, err := s.Blobs.PutBytes(ctx, tx, data); err != nil {
				return err
			}
		}
		return nil
	}))
	return newMaintainer(s)
}

// BenchmarkStats compares stats over the SQLite storage's totals with
// stats over Iterate (a wrapped storage without the UsageStorage ability).
func BenchmarkStats(b *testing.B) {
	for _, tc := range []struct {
		name string
		st   func() cas.Storage
	}{
		{"SQLite", func() cas.Storage { return nil }},
		{"Iterate", func() cas.Storage { st, _ := storagetest.NewFaulty(cas.NewSQLiteStorage()); return st }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			m := benchStore(b, tc.st(), 5000)
			ctx := context.Background()
			b.ResetTimer()
			for range b.N {
				if _, err := m.Stats(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkGCDryRun measures gc's mark phase, which inventories every
// blob.
func BenchmarkGCDryRun(b *testing.B) {
	m := benchStore(b, nil, 5000)
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		if _, err := m.GC(ctx, maint.GCOptions{DryRun: true}); err != nil {
			b.Fatal(err)
		}
	}
}
