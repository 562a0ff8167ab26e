package storetest

import (
	"context"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/cas"
)

// GCAfterPut is a content store that runs a gc with no grace through GC
// as each Put returns: the moment before the caller's transaction
// references what the Put stored. GC is the store itself (a gc in the
// writer's process) or another handle on it (as another process's).
// GCs counts the collections run.
type GCAfterPut struct {
	*cas.Store
	TB  testing.TB
	GC  *wsstore.Store
	GCs int
}

// Put stores r as cas.Store.Put does, then collects.
func (b *GCAfterPut) Put(ctx context.Context, r io.Reader) (cas.Hash, error) {
	h, err := b.Store.Put(ctx, r)
	if err == nil {
		_, gcErr := b.GC.GC(ctx, wsstore.GCOptions{Grace: -1})
		require.NoError(b.TB, gcErr)
		b.GCs++
	}
	return h, err
}
