package wsstore_test

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/wserr"
)

// endsAfterCtx is a context that ends at its n-th check (Err), calling
// at once, if set, before it ends: the caller giving up at any point of
// an Open.
type endsAfterCtx struct {
	context.Context
	n, checks atomic.Int64
	done      chan struct{}
	at        func()
}

func newEndsAfterCtx(n int64, at func()) *endsAfterCtx {
	c := &endsAfterCtx{Context: context.Background(), done: make(chan struct{}), at: at}
	c.n.Store(n)
	return c
}

func (c *endsAfterCtx) Err() error {
	k := c.checks.Add(1)
	if k == c.n.Load() {
		if c.at != nil {
			c.at()
		}
		close(c.done)
	}
	if k >= c.n.Load() {
		return context.Canceled
	}
	return nil
}

func (c *endsAfterCtx) Done() <-chan struct{} { return c.done }

// TestOpenCancelledLeavesNothingItCreated: an Open that created the store
// and then failed, at whichever point its context ended, leaves nothing
// of it: no directory where there was none, nor the parents it made for
// it, an empty directory where there was an empty one.
func TestOpenCancelledLeavesNothingItCreated(t *testing.T) {
	for _, premade := range []bool{false, true} {
		for n := int64(1); ; n++ {
			top := t.TempDir()
			dir := filepath.Join(top, "store")
			if !premade {
				dir = filepath.Join(top, "a", "b", "store")
			}
			if premade {
				require.NoError(t, os.Mkdir(dir, 0o755))
			}
			st, err := wsstore.Open(newEndsAfterCtx(n, nil), dir, wsstore.Options{})
			if err == nil {
				require.NoError(t, st.Close())
				require.Greater(t, n, int64(3), "Open checks its context more than this")
				break
			}
			require.Equal(t, wserr.Canceled, wserr.CodeOf(err), "check %d: %v", n, err)
			entries, err := os.ReadDir(dir)
			if premade {
				require.NoError(t, err)
				assert.Empty(t, entries, "check %d: left in the directory", n)
			} else {
				assert.True(t, os.IsNotExist(err), "check %d: the store directory was left: %v", n, entries)
				left, err := os.ReadDir(top)
				require.NoError(t, err)
				assert.Empty(t, left, "check %d: the parents it made were left", n)
			}
		}
	}
}
