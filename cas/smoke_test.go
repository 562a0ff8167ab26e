package cas_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/internal/storetest"
)

func TestSmoke(t *testing.T) {
	ctx := context.Background()
	_, s := storetest.OpenCAS(t, cas.Options{InlineMax: 1 << 10})
	for _, n := range []int{0, 10, 5000, 9 << 20} {
		b := make([]byte, n)
		r := rand.New(rand.NewPCG(1, uint64(n)))
		for i := range b {
			b[i] = byte('a' + r.IntN(4))
		}
		h, err := s.Put(ctx, bytes.NewReader(b))
		require.NoError(t, err)
		require.Equal(t, cas.Sum(b), h)
		got, err := s.ReadAll(ctx, h)
		require.NoError(t, err)
		require.True(t, bytes.Equal(b, got))
		info, err := s.Stat(ctx, h)
		require.NoError(t, err)
		t.Logf("%d: %+v", n, info)
	}
}
