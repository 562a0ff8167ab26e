package index_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/index"
)

// TestSpill: a map and a list answer the same whether they stay in
// memory, move to disk while filled, or sit on disk from the first entry;
// a map's Each goes in key order either way.
func TestSpill(t *testing.T) {
	key := func(i int) []byte { return binary.BigEndian.AppendUint32(nil, uint32(i)) }
	const n = 2500 // more than a page of the scratch map's Each
	for _, after := range []int{n + 1, 1000, 0} {
		t.Run(fmt.Sprintf("after=%d", after), func(t *testing.T) {
			sp := index.NewSpill(context.Background(), after)
			defer func() { require.NoError(t, sp.Close()) }()
			m, l := sp.NewMap(), sp.NewList()
			for i := n - 1; i >= 0; i-- {
				added, err := m.Add(key(i), int64(i))
				require.NoError(t, err)
				require.True(t, added, "key %d", i)
				require.NoError(t, l.Push(key(i)))
			}
			added, err := m.Add(key(7), 70)
			require.NoError(t, err)
			assert.False(t, added, "a key there already")
			require.NoError(t, m.Set(key(8), 80))
			require.NoError(t, m.Set(key(n), int64(n)), "a new key")
			size, err := m.Len()
			require.NoError(t, err)
			assert.EqualValues(t, n+1, size)
			for k, want := range map[int]int64{7: 7, 8: 80, n: n, 0: 0} {
				v, ok, err := m.Get(key(k))
				require.NoError(t, err)
				assert.True(t, ok, "key %d", k)
				assert.Equal(t, want, v, "key %d", k)
			}
			_, ok, err := m.Get(key(n + 1))
			require.NoError(t, err)
			assert.False(t, ok)

			next := 0
			require.NoError(t, m.Each(func(k []byte, v int64) error {
				require.Equal(t, key(next), k, "key order")
				next++
				return nil
			}))
			assert.Equal(t, n+1, next)

			assert.EqualValues(t, n, l.Len())
			for _, i := range []int64{0, 1, n / 2, n - 1} {
				b, err := l.At(i)
				require.NoError(t, err)
				assert.Equal(t, key(n-1-int(i)), b, "at %d", i)
			}
		})
	}
}
