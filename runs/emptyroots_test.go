package runs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// emptyRootInfo is how every view describes a visible root that holds no
// file.
func emptyRootInfo(name string) vfs.FileInfo {
	return vfs.FileInfo{Path: vfs.MustPath(name), Kind: vfs.KindDir, Hash: vfs.EmptyTree, Resource: vfs.ResourceGenerated}
}

// listPaths is the paths of infos, in order.
func listPaths(infos []vfs.FileInfo) []string {
	out := []string{}
	for _, fi := range infos {
		out = append(out, fi.Path.String())
	}
	return out
}

// pageThrough reads the listing of p a page of limit at a time and checks
// that more is set on every page but the last.
func pageThrough(t *testing.T, ws *runs.Workspace, p vfs.Path, depth, limit int) []string {
	t.Helper()
	got := []string{}
	page := vfs.ListPage{Limit: limit}
	for range 100 {
		infos, more, err := ws.ListPage(t.Context(), p, depth, page)
		require.NoError(t, err)
		require.LessOrEqual(t, len(infos), limit)
		got = append(got, listPaths(infos)...)
		if !more {
			return got
		}
		require.Len(t, infos, limit, "a page with more is full")
		page.After = infos[len(infos)-1].Path
	}
	t.Fatal("the listing does not end")
	return nil
}

// TestEmptyRoots: a fresh run's visible roots exist as empty directories
// in every view, live and at a checkpoint, in both scopes: listed at the
// root (paging across them exact), statted, listed and searched without
// an error, while nothing is stored for them and real misses stay
// workspace.file_not_found.
func TestEmptyRoots(t *testing.T) {
	e := newWSEnv(t, runs.Options{})
	ctx := e.ctx
	r := e.newRun("run_a", runs.CreateRequest{Inputs: map[string][]byte{"prompt_snapshot.json": []byte("{}")}})
	before := e.state(r.ID)
	stored, err := e.st.Trees.Entries(ctx, nil, r.Root)
	require.NoError(t, err)
	require.Len(t, stored, 1, "the fresh run stores input/ alone")
	require.Equal(t, "input", stored[0].Name)

	roots := []string{"output", "persist", "plan", "scratch", "summaries"}
	views := map[string]*runs.Workspace{
		"live":       e.model(r.ID),
		"checkpoint": e.svc.WorkspaceAt(r.ID, r.HeadCheckpoint, runs.ModelScope),
	}
	for name, ws := range views {
		t.Run(name, func(t *testing.T) {
			for _, depth := range []int{1, 3} {
				ls, err := ws.List(ctx, vfs.Root(), depth)
				require.NoError(t, err)
				want := []vfs.FileInfo{}
				for _, r := range roots {
					want = append(want, emptyRootInfo(r))
				}
				assert.Equal(t, want, ls, "the model's first listing names its roots, depth %d", depth)
				for _, limit := range []int{1, 2, 3, 4, 5, 6} {
					assert.Equal(t, roots, pageThrough(t, ws, vfs.Root(), depth, limit), "limit %d", limit)
				}
			}
			for _, root := range roots {
				p := vfs.MustPath(root)
				fi, err := ws.Stat(ctx, p)
				require.NoError(t, err, "stat %s", root)
				assert.Equal(t, emptyRootInfo(root), fi)
				ls, more, err := ws.ListPage(ctx, p, 4, vfs.ListPage{Limit: 1})
				require.NoError(t, err, "list %s", root)
				assert.Empty(t, ls)
				assert.False(t, more)
				hits, err := hitsOf(ws.Search(ctx, "anything", vfs.SearchOptions{Path: p}))
				require.NoError(t, err, "search %s", root)
				assert.Empty(t, hits)
				_, err = ws.Read(ctx, p, vfs.ReadOptions{})
				requireModelError(t, err, wserr.PathIsDirectory)
			}
			root, err := ws.Stat(ctx, vfs.Root())
			require.NoError(t, err)
			assert.Zero(t, root.Size, "the model's root holds no byte it sees")

			for _, miss := range []string{"output/nope.md", "plan/a/b.md"} {
				_, err := ws.Stat(ctx, vfs.MustPath(miss))
				requireModelError(t, err, wserr.FileNotFound)
				_, err = ws.List(ctx, vfs.MustPath(miss), 1)
				requireModelError(t, err, wserr.FileNotFound)
				_, err = hitsOf(ws.Search(ctx, "anything", vfs.SearchOptions{Path: vfs.MustPath(miss)}))
				requireModelError(t, err, wserr.FileNotFound)
			}
			_, err = ws.Stat(ctx, vfs.MustPath("input"))
			requireModelError(t, err, wserr.PathNotVisible)
			_, err = ws.Stat(ctx, vfs.MustPath("notes"))
			requireModelError(t, err, wserr.PathNotVisible)
		})
	}
	assert.Equal(t, before, e.state(r.ID), "nothing is stored for the roots: root, rows and journal as they were")

	t.Run("Host", func(t *testing.T) {
		host := e.host(r.ID)
		_, err := e.svc.RecordModelResponse(ctx, r.ID, runs.ModelResponseRecord{Round: 1, Response: json.RawMessage(`{}`)})
		require.NoError(t, err)
		want := []string{"input", "input/persist_snapshot.json", "input/prompt_snapshot.json", "model-responses", "model-responses/round-001.json",
			"output", "persist", "plan", "scratch", "summaries"}
		ls, err := host.List(ctx, vfs.Root(), 2)
		require.NoError(t, err)
		assert.Equal(t, want, listPaths(ls), "the host sees the roots beside input/ and the records")
		for _, limit := range []int{1, 2, 3, 7, 10, 11} {
			assert.Equal(t, want, pageThrough(t, host, vfs.Root(), 2, limit), "limit %d", limit)
		}
		fi, err := host.Stat(ctx, vfs.MustPath("plan"))
		require.NoError(t, err)
		assert.Equal(t, emptyRootInfo("plan"), fi)
		at := e.svc.WorkspaceAt(r.ID, r.HeadCheckpoint, runs.HostScope)
		ls, err = at.List(ctx, vfs.Root(), 1)
		require.NoError(t, err)
		assert.Equal(t, []string{"input", "output", "persist", "plan", "scratch", "summaries"}, listPaths(ls))
		_, err = host.Stat(ctx, vfs.MustPath("notes"))
		requireModelError(t, err, wserr.FileNotFound) // a name no profile root names is a real miss
	})
}

// TestEmptyRootAfterLastFileGoes: a root whose last file is deleted is
// still listed, as an empty directory, and the workspace's tree is the one
// it was before the file came: the root costs nothing stored.
func TestEmptyRootAfterLastFileGoes(t *testing.T) {
	e := newWSEnv(t, runs.Options{})
	ctx := e.ctx
	r := e.newRun("run_a", runs.CreateRequest{})
	model := e.model(r.ID)
	trees := e.rows("trees")

	e.write(r.ID, "scratch/a/b.md", "draft")
	fi, err := model.Stat(ctx, vfs.MustPath("scratch"))
	require.NoError(t, err)
	assert.Equal(t, int64(len("draft")), fi.Size)
	assert.NotEqual(t, vfs.EmptyTree, fi.Hash)

	_, err = model.Delete(ctx, vfs.MustPath("scratch/a/b.md"))
	require.NoError(t, err)
	assert.Equal(t, r.Root, e.run(r.ID).Root, "the tree is the fresh run's again")
	ls, err := model.List(ctx, vfs.Root(), 9)
	require.NoError(t, err)
	assert.Equal(t, []string{"output", "persist", "plan", "scratch", "summaries"}, listPaths(ls))
	fi, err = model.Stat(ctx, vfs.MustPath("scratch"))
	require.NoError(t, err)
	assert.Equal(t, emptyRootInfo("scratch"), fi)
	_, err = model.Stat(ctx, vfs.MustPath("scratch/a"))
	requireModelError(t, err, wserr.FileNotFound) // only roots stand empty
	assert.Equal(t, trees+3, e.rows("trees"), "the write stored root, scratch/ and scratch/a/; the delete nothing new")
}

// TestEmptyRootsFollowProfile: the roots that stand empty are the
// profile's visible ones, merged in path order with stored roots and
// virtual mounts; a root a mount reaches is the mount's.
func TestEmptyRootsFollowProfile(t *testing.T) {
	var reads atomic.Int64
	e := newWSEnv(t, runs.Options{Virtual: mountTestVirtual(t, &reads)})
	ctx := e.ctx
	prof := runs.DefaultProfile()
	prof.VisibleRoots = []string{"zeta", "output", "notes", "chat"}
	prof.WritableRoots = []string{"output", "notes"}
	r := e.newRun("run_a", runs.CreateRequest{Profile: &prof})
	e.write(r.ID, "notes/n.md", "n")
	model := e.model(r.ID)

	ls, err := model.List(ctx, vfs.Root(), 1)
	require.NoError(t, err)
	want := []string{"chat", "notes", "output", "skills", "zeta"}
	assert.Equal(t, want, listPaths(ls))
	byPath := map[string]vfs.FileInfo{}
	for _, fi := range ls {
		byPath[fi.Path.String()] = fi
	}
	assert.Equal(t, emptyRootInfo("zeta"), byPath["zeta"], "a read-only visible root stands too")
	assert.Equal(t, vfs.ResourceVirtual, byPath["chat"].Resource, "chat/ is the mount's")
	for limit := 1; limit <= len(want)+1; limit++ {
		assert.Equal(t, want, pageThrough(t, model, vfs.Root(), 1, limit), "limit %d", limit)
	}
	_, err = model.Stat(ctx, vfs.MustPath("plan"))
	requireModelError(t, err, wserr.PathNotVisible)
	for _, p := range []string{"zeta", "output"} {
		_, err := model.Write(ctx, vfs.MustPath(p), []byte("x"), vfs.WriteOptions{})
		requireModelError(t, err, wserr.PathNotWritable)
	}
	_, err = model.Write(ctx, vfs.MustPath("zeta/a.md"), []byte("x"), vfs.WriteOptions{})
	requireModelError(t, err, wserr.PathNotWritable)
	_, err = model.Write(ctx, vfs.MustPath("output/a.md"), []byte("x"), vfs.WriteOptions{})
	require.NoError(t, err)
}

// TestEmptyRootsCostNoStatement: the empty roots are found in the root
// tree a listing reads anyway: a root listing or page issues as many
// statements for a fresh run as for one whose roots all hold files, with
// 1 or 500 files below them.
func TestEmptyRootsCostNoStatement(t *testing.T) {
	ctx := context.Background()
	var rec storetest.Statements
	s := storetest.OpenStoreWith(t, wsstore.Options{Now: storetest.NewClock().Now, Index: index.Options{Trace: rec.Trace},
		CAS: cas.Options{ReencodeIdle: time.Hour}})
	create := func(id string, files int) *runs.Workspace {
		_, err := s.Runs.CreateRun(ctx, runs.CreateRequest{Chat: testChat, RunID: id})
		require.NoError(t, err)
		ws := s.Runs.Workspace(id, runs.ModelScope)
		var edits []runs.Edit
		for i := range files {
			root := runs.DefaultRoots[i%len(runs.DefaultRoots)]
			edits = append(edits, runs.Edit{Path: vfs.MustPath(fmt.Sprintf("%s/f%03d.md", root, i)), Content: []byte("x")})
		}
		if len(edits) > 0 {
			_, err = ws.Apply(ctx, edits)
			require.NoError(t, err)
		}
		return ws
	}
	count := func(ws *runs.Workspace, page vfs.ListPage) int {
		return len(rec.Record(func() {
			ls, _, err := ws.ListPage(ctx, vfs.Root(), 1, page)
			require.NoError(t, err)
			require.NotEmpty(t, ls)
		}))
	}
	fresh, small, large := create("run_fresh", 0), create("run_small", 5), create("run_large", 500)
	for _, page := range []vfs.ListPage{{}, {Limit: 2}, {After: vfs.MustPath("persist"), Limit: 2}} {
		n := count(fresh, page)
		assert.Equal(t, n, count(small, page), "%+v", page)
		assert.Equal(t, n, count(large, page), "%+v", page)
		t.Logf("root listing %+v: %d statements", page, n)
	}
}
