package remote_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/remote"
	"github.com/wsstore/wsstore/wserr"
)

// within runs fn and returns its error, failing the test if fn has not
// returned after a minute: a request the object store never answers must
// end, not hold the command for good.
func within(t *testing.T, what string, fn func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		t.Fatalf("%s still waits on an object store that stopped answering", what)
		return nil
	}
}

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
	err = within(t, "push", func() error { _, err := a.st.Push(ctx, a.db); return err })
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
	err = within(t, "read", func() error { _, err := b.blobs.ReadAll(ctx, hs[0]); return err })
	require.Error(t, err)
	assert.Equal(t, wserr.Busy, wserr.CodeOf(err), "%v", err)
	assert.ErrorIs(t, err, remote.ErrUnavailable)
	srv.SetStall(nil)
	b.requireAll(t, hs, files)
}
