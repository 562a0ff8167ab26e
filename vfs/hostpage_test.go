package vfs_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/vfs"
)

// TestHostListPage: a host directory read page by page is List's whole,
// whatever the page size; a page after a cursor reads the directories on
// the way to it and those it lists, not the ones before it.
func TestHostListPage(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for d := range 5 {
		for f := range 20 {
			p := filepath.Join(dir, fmt.Sprintf("d%d", d), fmt.Sprintf("f%02d.txt", f))
			require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
			require.NoError(t, os.WriteFile(p, []byte("x"), 0o644))
		}
	}
	h, err := vfs.OpenHost(dir, false)
	require.NoError(t, err)
	defer h.Close()
	whole, err := h.List(ctx, vfs.Root(), 2)
	require.NoError(t, err)
	require.Len(t, whole, 5+100)
	for _, limit := range []int{1, 7, 30} {
		var got []vfs.FileInfo
		page := vfs.ListPage{Limit: limit}
		for {
			infos, more, err := h.ListPage(ctx, vfs.Root(), 2, page)
			require.NoError(t, err)
			require.LessOrEqual(t, len(infos), limit)
			got = append(got, infos...)
			if !more {
				break
			}
			page.After = infos[len(infos)-1].Path
		}
		assert.Equal(t, whole, got, "limit %d", limit)
	}

	before := vfs.HostDirReads(h)
	infos, more, err := h.ListPage(ctx, vfs.Root(), 2, vfs.ListPage{After: vfs.MustPath("d3/f17.txt"), Limit: 3})
	require.NoError(t, err)
	assert.True(t, more)
	assert.Equal(t, "d3/f18.txt", infos[0].Path.String())
	assert.Equal(t, "d4", infos[2].Path.String())
	// the root, d3, and d4, where the entry past the page says more
	// remain; not d0 to d2
	assert.Equal(t, int64(3), vfs.HostDirReads(h)-before)
	before = vfs.HostDirReads(h)
	_, err = h.List(ctx, vfs.Root(), 2)
	require.NoError(t, err)
	assert.Equal(t, int64(6), vfs.HostDirReads(h)-before, "a whole listing reads every directory")
}
