package index_test

import (
	"context"
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/index"
)

func TestScratchMap(t *testing.T) {
	ctx := context.Background()
	s, err := index.OpenScratch(ctx)
	require.NoError(t, err)
	defer s.Close()
	m, err := s.NewMap(ctx)
	require.NoError(t, err)
	other, err := s.NewMap(ctx)
	require.NoError(t, err)
	key := func(i int) []byte { return binary.BigEndian.AppendUint32(nil, uint32(i)) }
	const n = 3000 // more than a page of Each
	for i := n - 1; i >= 0; i-- {
		added, err := m.Add(ctx, key(i), int64(i))
		require.NoError(t, err)
		require.True(t, added)
	}
	added, err := m.Add(ctx, key(7), 70)
	require.NoError(t, err)
	assert.False(t, added, "a key there already")
	require.NoError(t, m.Set(ctx, key(8), 80))
	v, ok, err := m.Get(ctx, key(7))
	require.NoError(t, err)
	assert.True(t, ok)
	assert.EqualValues(t, 7, v)
	v, _, err = m.Get(ctx, key(8))
	require.NoError(t, err)
	assert.EqualValues(t, 80, v)
	_, ok, err = other.Get(ctx, key(7))
	require.NoError(t, err)
	assert.False(t, ok, "maps are apart")
	l, err := m.Len(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, n, l)

	next := 0
	require.NoError(t, m.Each(ctx, func(k []byte, v int64) error {
		assert.Equal(t, key(next), k)
		next++
		return nil
	}))
	assert.Equal(t, n, next, "in key order, each once")
}

func TestScratchList(t *testing.T) {
	ctx := context.Background()
	s, err := index.OpenScratch(ctx)
	require.NoError(t, err)
	defer s.Close()
	l, err := s.NewList(ctx)
	require.NoError(t, err)
	for i := range 100 {
		require.NoError(t, l.Push(ctx, []byte{byte(i), 1}))
	}
	assert.EqualValues(t, 100, l.Len())
	b, err := l.At(ctx, 42)
	require.NoError(t, err)
	assert.Equal(t, []byte{42, 1}, b)
	_, err = l.At(ctx, 100)
	assert.Error(t, err)
}
