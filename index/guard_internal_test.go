package index

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestConcurrentUpdatesKeepTheGuard: an Update that commits hands the
// write connection to a waiting one, which may begin before the first
// has returned; the guard stays on for the whole of the second's
// function.
func TestConcurrentUpdatesKeepTheGuard(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(t.TempDir(), "g.db"), Options{})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })

	committed, secondIn, firstDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
	testHookCommitted = func() {
		testHookCommitted = nil
		close(committed)
		<-secondIn // the first stays between its commit and its return
	}
	t.Cleanup(func() { testHookCommitted = nil })
	second := make(chan bool)
	go func() {
		<-committed
		var on bool
		assert.NoError(t, db.Update(ctx, func(tx *Tx) error {
			close(secondIn)
			<-firstDone
			on = db.guard.open.Load()
			return nil
		}))
		second <- on
	}()
	require.NoError(t, db.Update(ctx, func(tx *Tx) error { return nil }))
	close(firstDone)
	assert.True(t, <-second, "the guard is on in the second Update's function after the first returned")
}
