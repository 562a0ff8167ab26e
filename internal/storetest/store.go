package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
)

// This file imports the root package, which imports every other package of
// the module. So only external test packages (package x_test) may use
// storetest: a package's internal test that imported it would be an import
// cycle.

// OpenStore opens a new store in a temporary directory with default
// options. When the test ends it runs a full Fsck (blobs, trees,
// references, SQLite) that must find nothing, then closes the store. Tests
// that corrupt a store on purpose open it with wsstore.Open instead.
func OpenStore(tb testing.TB) *wsstore.Store {
	tb.Helper()
	return OpenStoreWith(tb, wsstore.Options{})
}

// OpenStoreWith is OpenStore with options (a fake clock, small chunks).
// Unless opts sets ReclaimIdle, the store collects no gc candidates in the
// background: its queue stays as the test's operations leave it, however
// long a step of the test pauses. Unless opts sets CAS.ReencodeIdle, a
// store whose statements are traced (Index.Trace) re-encodes nothing in
// the background either.
func OpenStoreWith(tb testing.TB, opts wsstore.Options) *wsstore.Store {
	tb.Helper()
	if opts.ReclaimIdle == 0 {
		opts.ReclaimIdle = -1
	}
	if opts.Index.Trace != nil && opts.CAS.ReencodeIdle == 0 {
		// A test that counts statements counts its own: the background
		// re-encoder, which runs after 30 ms without a write, would add
		// its statements whenever a loaded machine leaves such a gap.
		opts.CAS.ReencodeIdle = time.Hour
	}
	s, err := wsstore.Open(context.Background(), tb.TempDir(), opts)
	require.NoError(tb, err)
	tb.Cleanup(func() {
		defer func() { require.NoError(tb, s.Close()) }()
		RequireSound(tb, s)
	})
	return s
}

// RequireSound fails the test unless Fsck finds the store sound.
func RequireSound(tb testing.TB, s *wsstore.Store) {
	tb.Helper()
	rep, err := s.Fsck(context.Background(), nil)
	require.NoError(tb, err, "fsck")
	require.Empty(tb, rep.Problems, "fsck")
}
