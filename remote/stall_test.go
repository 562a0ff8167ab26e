package remote_test

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/remote"
	"github.com/wsstore/wsstore/remote/s3fake"
	"github.com/wsstore/wsstore/wserr"
)

// TestStalledServerIsUnavailable: an object store that takes the
// connection and then answers nothing (stopped, or behind a link that
// drops everything) fails a push, and a read, with store.busy wrapping
// ErrUnavailable once the retries are spent, as one that refuses the
// connection does; nothing is recorded as pushed, and the next push, the
// server answering again, uploads everything.
func TestStalledServerIsUnavailable(t *testing.T) {
	srv := fakeBucket(t)
	ctx := context.Background()
	opts := remote.Options{IdleTimeout: 200 * time.Millisecond}
	a := newDevice(t, srv.URL, "bkt", opts)
	files := contents(5)
	hs := a.put(t, files)
	pending, err := a.st.Pending(ctx, a.db)
	require.NoError(t, err)
	require.Positive(t, pending)

	srv.SetStall(func(r *http.Request) bool { return strings.Contains(r.URL.Path, "/data/") })
	err = s3fake.Within(t, "push", func() error { _, err := a.st.Push(ctx, a.db); return err })
	require.Error(t, err)
	assert.Equal(t, wserr.Busy, wserr.CodeOf(err), "%v", err)
	assert.ErrorIs(t, err, remote.ErrUnavailable)
	n, err := a.st.Pending(ctx, a.db)
	require.NoError(t, err)
	assert.Equal(t, pending, n, "nothing recorded as pushed")

	srv.SetStall(nil)
	_, err = a.st.Push(ctx, a.db)
	require.NoError(t, err)
	n, err = a.st.Pending(ctx, a.db)
	require.NoError(t, err)
	assert.Zero(t, n)

	// A device reading the packs from a server that stopped answering.
	b := newDevice(t, srv.URL, "bkt", opts)
	_, err = b.st.Pull(ctx, b.db)
	require.NoError(t, err)
	srv.SetStall(func(r *http.Request) bool {
		return r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/data/")
	})
	err = s3fake.Within(t, "read", func() error { _, err := b.blobs.ReadAll(ctx, hs[0]); return err })
	require.Error(t, err)
	assert.Equal(t, wserr.Busy, wserr.CodeOf(err), "%v", err)
	assert.ErrorIs(t, err, remote.ErrUnavailable)
	srv.SetStall(nil)
	b.requireAll(t, hs, files)
}

// TestInterruptedPushIsNotHeldByItsLock: a push interrupted while the
// object store has stopped answering returns once its lock's removal has
// had a few seconds, not after every attempt of that removal: the lock,
// left behind, only expires. The next push, the server answering again,
// uploads everything.
func TestInterruptedPushIsNotHeldByItsLock(t *testing.T) {
	srv := fakeBucket(t)
	// Attempts that would each wait ten minutes for a byte.
	a := newDevice(t, srv.URL, "bkt", remote.Options{IdleTimeout: 10 * time.Minute})
	files := contents(5)
	hs := a.put(t, files)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv.SetStall(func(r *http.Request) bool {
		switch {
		case strings.Contains(r.URL.Path, "/data/"):
			cancel() // the command is interrupted while the pack is in flight
			return true
		case r.Method == http.MethodDelete:
			return true
		}
		return false
	})
	err := s3fake.Within(t, "interrupted push", func() error { _, err := a.st.Push(ctx, a.db); return err })
	require.ErrorIs(t, err, context.Canceled)
	assert.Len(t, srv.Keys("bkt", "store/locks/push/"), 1, "the lock is left to expire")

	srv.SetStall(nil)
	_, err = a.st.Push(context.Background(), a.db)
	require.NoError(t, err)
	b := newDevice(t, srv.URL, "bkt", remote.Options{})
	_, err = b.st.Pull(context.Background(), b.db)
	require.NoError(t, err)
	b.requireAll(t, hs, files)
}

// TestCABundleIsTaken: the client that bounds each attempt still takes
// the certificates AWS_CA_BUNDLE names, so a tier over TLS signed by
// them is reached (before it was a plain client, every store opened with
// a tier failed with store.invalid_options while AWS_CA_BUNDLE was set).
func TestCABundleIsTaken(t *testing.T) {
	testEnv(t)
	fake := s3fake.New("bkt")
	t.Cleanup(fake.Close)
	ts := httptest.NewTLSServer(fake)
	t.Cleanup(ts.Close)
	bundle := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(bundle, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw}), 0o600))
	t.Setenv("AWS_CA_BUNDLE", bundle)
	a := newDevice(t, ts.URL, "bkt", remote.Options{})
	files := contents(3)
	hs := a.put(t, files)
	_, err := a.st.Push(context.Background(), a.db)
	require.NoError(t, err)
	b := newDevice(t, ts.URL, "bkt", remote.Options{})
	_, err = b.st.Pull(context.Background(), b.db)
	require.NoError(t, err)
	b.requireAll(t, hs, files)
}
