package runs_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

// TestListPage: read page by page, a listing is List's whole, whatever the
// page size, where stored files, host directories, the run's records and
// virtual mounts meet at the root, in both scopes, and below host/; a page
// after a cursor starts after it.
func TestListPage(t *testing.T) {
	var reads atomic.Int64
	e := newWSEnv(t, runs.Options{Virtual: mountTestVirtual(t, &reads)})
	proj := filepath.Join(t.TempDir(), "proj")
	for _, d := range []string{"a", "b/c", "z"} {
		require.NoError(t, os.MkdirAll(filepath.Join(proj, d), 0o755))
		for i := range 3 {
			require.NoError(t, os.WriteFile(filepath.Join(proj, d, fmt.Sprintf("f%d.txt", i)), []byte(d), 0o644))
		}
	}
	prof := runs.DefaultProfile()
	prof.AllowPaths = []runs.HostPath{{Path: proj, Writable: true}}
	r := e.newRun("run_pages", runs.CreateRequest{Profile: &prof})
	var edits []runs.Edit
	for _, p := range []string{"output/a.md", "output/b/c.md", "output/b/d.md", "scratch/s.txt", "output/zz/last.md"} {
		edits = append(edits, runs.Edit{Path: vfs.MustPath(p), Content: []byte(p)})
	}
	_, err := e.model(r.ID).Apply(e.ctx, edits)
	require.NoError(t, err)
	_, err = e.svc.RecordModelResponse(e.ctx, r.ID, runs.ModelResponseRecord{Round: 1, Response: json.RawMessage(`{}`)})
	require.NoError(t, err)

	paths := func(infos []vfs.FileInfo) []string {
		out := []string{}
		for _, fi := range infos {
			out = append(out, fi.Path.String())
		}
		return out
	}
	for _, scope := range []runs.Scope{runs.ModelScope, runs.HostScope} {
		ws := e.svc.Workspace(r.ID, scope)
		for _, c := range []struct {
			dir   string
			depth int
		}{{".", 1}, {".", 3}, {".", 9}, {"host", 1}, {"host", 4}, {"host/proj", 9}, {"output", 2}, {"skills", 3}} {
			p := vfs.Root()
			if c.dir != "." {
				p = vfs.MustPath(c.dir)
			}
			whole, err := ws.List(e.ctx, p, c.depth)
			require.NoError(t, err)
			full := paths(whole)
			require.NotEmpty(t, full)
			for _, limit := range []int{1, 2, 5, 0} {
				t.Run(fmt.Sprintf("scope%d/%s/depth%d/limit%d", scope, c.dir, c.depth, limit), func(t *testing.T) {
					got := []string{}
					page := vfs.ListPage{Limit: limit}
					for {
						infos, more, err := ws.ListPage(e.ctx, p, c.depth, page)
						require.NoError(t, err)
						if limit > 0 {
							require.LessOrEqual(t, len(infos), limit)
						}
						got = append(got, paths(infos)...)
						if !more {
							break
						}
						require.NotEmpty(t, infos)
						page.After = infos[len(infos)-1].Path
					}
					assert.Equal(t, full, got)
				})
			}
		}
	}
	// The root in the host's view, to every depth: stored, host, records
	// and virtual entries (a host directory's own entries are listed by
	// naming it).
	whole, err := e.host(r.ID).List(e.ctx, vfs.Root(), 9)
	require.NoError(t, err)
	assert.Subset(t, paths(whole), []string{"host/proj", "model-responses/round-001.json", "output/zz/last.md", "skills/romance/SKILL.md"})
	infos, more, err := e.host(r.ID).ListPage(e.ctx, vfs.Root(), 9, vfs.ListPage{After: vfs.MustPath("host/proj/b"), Limit: 3})
	require.NoError(t, err)
	assert.True(t, more)
	assert.Equal(t, []string{"input", "input/persist_snapshot.json", "model-responses"}, paths(infos))
	infos, more, err = e.host(r.ID).ListPage(e.ctx, vfs.MustPath("host/proj"), 9, vfs.ListPage{After: vfs.MustPath("host/proj/b"), Limit: 3})
	require.NoError(t, err)
	assert.True(t, more)
	assert.Equal(t, []string{"host/proj/b/c", "host/proj/b/c/f0.txt", "host/proj/b/c/f1.txt"}, paths(infos))
}

// TestListPageOfHostRoot: host/ lists the allowed directories and, to
// depth, what they hold: read page by page over two of them (the first
// filling a page by itself), the listing is List's whole.
func TestListPageOfHostRoot(t *testing.T) {
	e := newWSEnv(t, runs.Options{})
	base := t.TempDir()
	prof := runs.DefaultProfile()
	for name, files := range map[string]int{"a": 1, "b": 7} {
		dir := filepath.Join(base, name)
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
		for i := range files {
			require.NoError(t, os.WriteFile(filepath.Join(dir, "sub", fmt.Sprintf("f%d", i)), []byte(name), 0o644))
		}
		prof.AllowPaths = append(prof.AllowPaths, runs.HostPath{Path: dir})
	}
	r := e.newRun("run_hosts", runs.CreateRequest{Profile: &prof})
	ws := e.model(r.ID)
	host := vfs.MustPath("host")
	whole, err := ws.List(e.ctx, host, 3)
	require.NoError(t, err)
	require.Len(t, whole, 2+2+8)
	for limit := 1; limit <= 5; limit++ {
		var got []vfs.FileInfo
		page := vfs.ListPage{Limit: limit}
		for {
			infos, more, err := ws.ListPage(e.ctx, host, 3, page)
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
}
