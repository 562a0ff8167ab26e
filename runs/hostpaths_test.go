package runs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/archive"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// hostEnv is a run whose profile allows one writable host directory
// (proj) and one read-only one (docs), next to a directory outside both.
type hostEnv struct {
	*lifecycleEnv
	proj, docs, outside string
	run                 runs.Run
}

func newHostEnv(t *testing.T) *hostEnv {
	t.Helper()
	base := t.TempDir()
	h := &hostEnv{lifecycleEnv: newLifecycleEnv(t),
		proj: filepath.Join(base, "proj"), docs: filepath.Join(base, "docs"), outside: filepath.Join(base, "outside")}
	for _, d := range []string{h.proj, h.docs, h.outside} {
		require.NoError(t, os.Mkdir(d, 0o755))
	}
	require.NoError(t, os.WriteFile(filepath.Join(h.proj, "main.go"), []byte("package main\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(h.docs, "readme.md"), []byte("docs\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(h.outside, "secret.txt"), []byte("secret\n"), 0o644))
	require.NoError(t, os.Symlink(h.outside, filepath.Join(h.proj, "escape")))
	prof := runs.DefaultProfile()
	prof.AllowPaths = []runs.HostPath{{Path: h.proj, Writable: true}, {Path: h.docs}}
	h.run = h.create("host-chat", runs.CreateRequest{Profile: &prof})
	return h
}

func (h *hostEnv) ws() *runs.Workspace { return h.svc.Workspace(h.run.ID, runs.ModelScope) }

// snapshot lists every name below dir with its mode and content, to prove
// a refused operation changed nothing there.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		fi, err := os.Lstat(p)
		require.NoError(t, err)
		v := fi.Mode().String()
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			v += " " + string(b)
		}
		out[p] = v
		return nil
	}))
	return out
}

func TestHostPathReadWrite(t *testing.T) {
	h := newHostEnv(t)
	ws := h.ws()

	assert.Equal(t, "package main\n", h.read(ws, "host/proj/main.go"))
	fi, err := ws.Write(h.ctx, vfs.MustPath("host/proj/main.go"), []byte("package main // edited\n"), vfs.WriteOptions{})
	require.NoError(t, err)
	assert.Equal(t, vfs.ResourceHost, fi.Resource)
	assert.Equal(t, "host/proj/main.go", fi.Path.String())
	b, err := os.ReadFile(filepath.Join(h.proj, "main.go"))
	require.NoError(t, err)
	assert.Equal(t, "package main // edited\n", string(b), "the write landed on the host")
	st, err := os.Stat(filepath.Join(h.proj, "main.go"))
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o600), st.Mode().Perm(), "no mode is changed")

	_, err = ws.Patch(h.ctx, vfs.MustPath("host/proj/main.go"), "edited", "patched", vfs.PatchOptions{})
	require.NoError(t, err)
	_, err = ws.Write(h.ctx, vfs.MustPath("host/proj/new.md"), []byte("new\n"), vfs.WriteOptions{})
	require.NoError(t, err)
	_, err = ws.Delete(h.ctx, vfs.MustPath("host/proj/new.md"))
	require.NoError(t, err)
	assert.NoFileExists(t, filepath.Join(h.proj, "new.md"))

	t.Run("Listing", func(t *testing.T) {
		ls, err := ws.List(h.ctx, vfs.Root(), 2)
		require.NoError(t, err)
		var paths []string
		for _, fi := range ls {
			if fi.Path.Top() == runs.HostRoot {
				paths = append(paths, fi.Path.String())
			}
		}
		assert.Equal(t, []string{"host", "host/docs", "host/proj"}, paths, "the root shows the way to the host paths, not what they hold")
		ls, err = ws.List(h.ctx, vfs.MustPath("host/proj"), 1)
		require.NoError(t, err)
		var names []string
		for _, fi := range ls {
			names = append(names, fi.Path.String())
		}
		assert.Contains(t, names, "host/proj/main.go")
	})
	t.Run("ErrReadOnlyPath", func(t *testing.T) {
		before := snapshot(t, h.docs)
		_, err := ws.Write(h.ctx, vfs.MustPath("host/docs/readme.md"), []byte("x"), vfs.WriteOptions{})
		assert.True(t, wserr.Is(err, wserr.PathNotWritable), "%v", err)
		assert.Equal(t, before, snapshot(t, h.docs))
	})
	t.Run("ErrUnknownName", func(t *testing.T) {
		_, err := ws.Stat(h.ctx, vfs.MustPath("host/nope/x"))
		assert.True(t, wserr.Is(err, wserr.FileNotFound), "%v", err)
		// The model learns the names it may use, not where they lie on
		// the host.
		assert.Contains(t, err.Error(), "host/proj, host/docs")
		assert.NotContains(t, err.Error(), h.proj)
	})
	t.Run("NeverCheckpointed", func(t *testing.T) {
		cp, err := h.svc.Checkpoint(h.ctx, h.run.ID, "test")
		require.NoError(t, err)
		_, err = h.svc.WorkspaceAt(h.run.ID, cp.Seq, runs.HostScope).Stat(h.ctx, vfs.MustPath("host/proj/main.go"))
		assert.True(t, wserr.Is(err, wserr.FileNotFound), "a checkpoint holds no host file: %v", err)
	})
}

// TestHostPathEscapesRefused: a symlink leading out of an allowed path,
// or a ".." or absolute path aimed outside, is refused and nothing
// outside changes.
func TestHostPathEscapesRefused(t *testing.T) {
	h := newHostEnv(t)
	ws := h.ws()
	outside := snapshot(t, h.outside)

	_, err := ws.Write(h.ctx, vfs.MustPath("host/proj/escape/secret.txt"), []byte("pwned"), vfs.WriteOptions{})
	assert.True(t, wserr.Is(err, wserr.InvalidPath), "%v", err)
	_, err = ws.Write(h.ctx, vfs.MustPath("host/proj/escape/new.txt"), []byte("pwned"), vfs.WriteOptions{})
	assert.True(t, wserr.Is(err, wserr.InvalidPath), "%v", err)
	_, err = ws.Read(h.ctx, vfs.MustPath("host/proj/escape/secret.txt"), vfs.ReadOptions{})
	assert.True(t, wserr.Is(err, wserr.InvalidPath), "%v", err)
	err = ws.Remove(h.ctx, vfs.MustPath("host/proj/escape/secret.txt"))
	assert.Error(t, err)

	_, err = vfs.ParsePath("host/proj/../../outside/secret.txt")
	assert.True(t, wserr.Is(err, wserr.InvalidPath), "a workspace path cannot hold ..: %v", err)
	_, err = h.svc.HostPath(h.ctx, h.run.ID, filepath.Join(h.proj, "..", "outside", "secret.txt"))
	assert.True(t, wserr.Is(err, wserr.PathNotAllowed), "%v", err)

	assert.Equal(t, outside, snapshot(t, h.outside), "nothing outside changed")
}

// TestHostPathDeleteLinkLeadingNowhere: a link out of the allowed path,
// a dangling one and a loop are deleted themselves through the store;
// what they name stays, and writes through them stay refused.
func TestHostPathDeleteLinkLeadingNowhere(t *testing.T) {
	h := newHostEnv(t)
	ws := h.ws()
	outside := snapshot(t, h.outside)
	require.NoError(t, os.Symlink("missing.txt", filepath.Join(h.proj, "dangling")))
	require.NoError(t, os.Symlink("loop", filepath.Join(h.proj, "loop")))

	for _, name := range []string{"escape", "dangling", "loop"} {
		p := vfs.MustPath("host/proj/" + name)
		_, err := ws.Patch(h.ctx, p, "a", "b", vfs.PatchOptions{})
		assert.Error(t, err, "a patch through %s is refused", name)
		if name != "dangling" { // a write through a dangling link inside creates its target
			_, err = ws.Write(h.ctx, p, []byte("pwned"), vfs.WriteOptions{})
			assert.True(t, wserr.Is(err, wserr.InvalidPath), "%s: %v", name, err)
		}
		fi, err := ws.Delete(h.ctx, p)
		require.NoError(t, err, name)
		assert.Equal(t, p, fi.Path)
		assert.True(t, fi.Hash.IsZero())
		_, err = os.Lstat(filepath.Join(h.proj, name))
		assert.True(t, os.IsNotExist(err), "%s is gone", name)
	}
	assert.NoFileExists(t, filepath.Join(h.proj, "missing.txt"))
	assert.Equal(t, outside, snapshot(t, h.outside), "nothing outside changed")
}

// TestHostPathCreatesNoDirectory: neither a run's creation nor a write
// makes a host directory.
func TestHostPathCreatesNoDirectory(t *testing.T) {
	h := newHostEnv(t)
	_, err := h.ws().Write(h.ctx, vfs.MustPath("host/proj/newdir/file.md"), []byte("x"), vfs.WriteOptions{})
	assert.True(t, wserr.Is(err, wserr.FileNotFound), "%v", err)
	assert.NoDirExists(t, filepath.Join(h.proj, "newdir"))

	missing := filepath.Join(t.TempDir(), "missing", "deeper")
	prof := runs.DefaultProfile()
	prof.AllowPaths = []runs.HostPath{{Path: missing, Writable: true}}
	_, err = h.svc.CreateRun(h.ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "m"}, Profile: &prof})
	assert.True(t, wserr.Is(err, wserr.InvalidArgument), "%v", err)
	assert.NoDirExists(t, filepath.Dir(missing), "a run naming a missing host path creates nothing")
}

func TestHostPathAfterRunEnds(t *testing.T) {
	h := newHostEnv(t)
	h.write(h.run.ID, "scratch/tmp.md", "x")
	before := snapshot(t, h.proj)
	_, err := h.svc.Finish(h.ctx, h.run.ID)
	require.NoError(t, err)
	assert.Equal(t, before, snapshot(t, h.proj), "collecting scratch never touches a host path")
	_, err = h.ws().Write(h.ctx, vfs.MustPath("host/proj/main.go"), []byte("late"), vfs.WriteOptions{})
	assert.True(t, wserr.Is(err, wserr.InvalidState), "%v", err)
	assert.Equal(t, before, snapshot(t, h.proj))
}

func TestHostPathResolve(t *testing.T) {
	h := newHostEnv(t)
	p, err := h.svc.HostPath(h.ctx, h.run.ID, filepath.Join(h.proj, "cmd", "x.go"))
	require.NoError(t, err)
	assert.Equal(t, "host/proj/cmd/x.go", p.String())
	p, err = h.svc.HostPath(h.ctx, h.run.ID, h.docs)
	require.NoError(t, err)
	assert.Equal(t, "host/docs", p.String())

	for name, abs := range map[string]string{
		"ErrTmp":     filepath.Join(os.TempDir(), "elsewhere.txt"),
		"ErrOutside": h.outside,
		"ErrSibling": h.proj + "-other/x",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := h.svc.HostPath(h.ctx, h.run.ID, abs)
			assert.True(t, wserr.Is(err, wserr.PathNotAllowed), "%v", err)
		})
	}
	_, err = h.svc.HostPath(h.ctx, h.run.ID, "relative/x")
	assert.True(t, wserr.Is(err, wserr.InvalidPath), "%v", err)
}

func TestHostPathProfileValidation(t *testing.T) {
	e := newLifecycleEnv(t)
	dir := t.TempDir()
	other := filepath.Join(t.TempDir(), filepath.Base(dir))
	require.NoError(t, os.Mkdir(other, 0o755))
	file := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	// tmpLink names the system's temporary directory through a symlink.
	tmpLink := filepath.Join(t.TempDir(), "tmp")
	require.NoError(t, os.Symlink(os.TempDir(), tmpLink))
	// storeDir is the store's directory; storeLink names its parent
	// through a symlink.
	storeDir := filepath.Dir(e.st.DB.Path())
	storeLink := filepath.Join(t.TempDir(), "project")
	require.NoError(t, os.Symlink(filepath.Dir(storeDir), storeLink))
	inStore := filepath.Join(storeDir, "sub")
	require.NoError(t, os.Mkdir(inStore, 0o755))
	cases := map[string]struct {
		mutate func(p *runs.Profile)
		code   wserr.Code
	}{
		"ErrRelative": {func(p *runs.Profile) { p.AllowPaths = []runs.HostPath{{Path: "rel/dir"}} }, wserr.InvalidArgument},
		"ErrFile":     {func(p *runs.Profile) { p.AllowPaths = []runs.HostPath{{Path: file}} }, wserr.InvalidArgument},
		"ErrTempDir":  {func(p *runs.Profile) { p.AllowPaths = []runs.HostPath{{Path: os.TempDir()}} }, wserr.PathNotAllowed},
		"ErrTempDirLinked": {func(p *runs.Profile) {
			p.AllowPaths = []runs.HostPath{{Path: tmpLink, Writable: true}}
		}, wserr.PathNotAllowed},
		"ErrHoldsStore": {func(p *runs.Profile) {
			p.AllowPaths = []runs.HostPath{{Path: storeDir, Writable: true}}
		}, wserr.PathNotAllowed},
		"ErrHoldsStoreLinked": {func(p *runs.Profile) {
			p.AllowPaths = []runs.HostPath{{Path: storeLink, Writable: true}}
		}, wserr.PathNotAllowed},
		"ErrInsideStore": {func(p *runs.Profile) {
			p.AllowPaths = []runs.HostPath{{Path: inStore, Writable: true}}
		}, wserr.PathNotAllowed},
		"ErrHoldsStoreReadOnly": {func(p *runs.Profile) { p.AllowPaths = []runs.HostPath{{Path: storeLink}} }, wserr.PathNotAllowed},
		"ErrSameName":           {func(p *runs.Profile) { p.AllowPaths = []runs.HostPath{{Path: dir}, {Path: other}} }, wserr.InvalidArgument},
		"ErrBadName":            {func(p *runs.Profile) { p.AllowPaths = []runs.HostPath{{Path: dir, Name: "a/b"}} }, wserr.InvalidArgument},
		"ErrHostAsRoot": {func(p *runs.Profile) {
			p.AllowPaths = []runs.HostPath{{Path: dir}}
			p.VisibleRoots = append(p.VisibleRoots, "host")
		}, wserr.InvalidArgument},
		// host/ is reserved in every profile, and no two top-level names
		// of a profile differ only in case.
		"ErrHostAsRootWithoutAllowPaths": {func(p *runs.Profile) { p.VisibleRoots = append(p.VisibleRoots, "host") }, wserr.InvalidArgument},
		"ErrHostAsWritableRoot": {func(p *runs.Profile) {
			p.VisibleRoots = []string{"output", "host"}
			p.WritableRoots = []string{"host"}
		}, wserr.InvalidArgument},
		"ErrHostTwinAsRoot":  {func(p *runs.Profile) { p.VisibleRoots = append(p.VisibleRoots, "Host") }, wserr.InvalidArgument},
		"ErrInputTwinAsRoot": {func(p *runs.Profile) { p.VisibleRoots = append(p.VisibleRoots, "Input") }, wserr.InvalidArgument},
		"ErrCaseTwinRoots":   {func(p *runs.Profile) { p.VisibleRoots = append(p.VisibleRoots, "Output") }, wserr.InvalidArgument},
		"ErrCaseTwinNames": {func(p *runs.Profile) {
			p.AllowPaths = []runs.HostPath{{Path: dir, Name: "proj"}, {Path: other, Name: "Proj"}}
		}, wserr.InvalidArgument},
		"ErrPrimaryOut":   {func(p *runs.Profile) { p.AllowPaths = []runs.HostPath{{Path: dir}}; p.PrimaryRoot = other }, wserr.PathNotAllowed},
		"ErrPrimaryPlan":  {func(p *runs.Profile) { p.PrimaryRoot = "plan/x" }, wserr.PathNotAllowed},
		"ErrPrimaryHost":  {func(p *runs.Profile) { p.PrimaryRoot = "host/nope" }, wserr.PathNotAllowed},
		"ErrPrimaryTmp":   {func(p *runs.Profile) { p.PrimaryRoot = os.TempDir() }, wserr.PathNotAllowed},
		"OKNamedTwice":    {func(p *runs.Profile) { p.AllowPaths = []runs.HostPath{{Path: dir}, {Path: other, Name: "other"}} }, ""},
		"OKPrimaryOutput": {func(p *runs.Profile) { p.PrimaryRoot = "output/site" }, ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			prof := runs.DefaultProfile()
			tc.mutate(&prof)
			_, err := e.svc.CreateRun(e.ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: name}, Profile: &prof})
			if tc.code == "" {
				assert.NoError(t, err)
				return
			}
			assert.True(t, wserr.Is(err, tc.code), "%v", err)
		})
	}
}

// TestPrimaryRoot: seed 004's fallback chain, explicit, then
// allowPaths[0], then the artifact space, as the run reports it.
func TestPrimaryRoot(t *testing.T) {
	e := newLifecycleEnv(t)
	proj, docs := t.TempDir(), t.TempDir()
	sub := filepath.Join(proj, "app")
	require.NoError(t, os.Mkdir(sub, 0o755))
	for name, tc := range map[string]struct {
		allow   []runs.HostPath
		primary string
		want    runs.PrimaryRoot
	}{
		"Artifact":       {nil, "", runs.PrimaryRoot{Source: "artifact", Path: "output"}},
		"FirstAllowPath": {[]runs.HostPath{{Path: docs, Name: "docs"}, {Path: proj, Name: "proj"}}, "", runs.PrimaryRoot{Source: "allowPaths", Path: "host/docs", HostPath: docs}},
		"ExplicitHost":   {[]runs.HostPath{{Path: docs, Name: "docs"}, {Path: proj, Name: "proj"}}, sub, runs.PrimaryRoot{Source: "explicit", Path: "host/proj/app", HostPath: sub}},
		"ExplicitByName": {[]runs.HostPath{{Path: proj, Name: "proj"}}, "host/proj/app", runs.PrimaryRoot{Source: "explicit", Path: "host/proj/app", HostPath: sub}},
		"ExplicitOutput": {[]runs.HostPath{{Path: proj, Name: "proj"}}, "output/site", runs.PrimaryRoot{Source: "explicit", Path: "output/site"}},
	} {
		t.Run(name, func(t *testing.T) {
			prof := runs.DefaultProfile()
			prof.AllowPaths, prof.PrimaryRoot = tc.allow, tc.primary
			r := e.create(name, runs.CreateRequest{Profile: &prof})
			assert.Equal(t, tc.want, r.PrimaryRoot)
			again, err := e.svc.Run(e.ctx, r.ID)
			require.NoError(t, err)
			assert.Equal(t, tc.want, again.PrimaryRoot, "stored with the run")
		})
	}
}

func TestHostPathJSON(t *testing.T) {
	var p runs.Profile
	require.NoError(t, json.Unmarshal([]byte(`{"allowPaths": ["/a/b", {"path": "/c", "name": "see", "writable": true}]}`), &p))
	assert.Equal(t, []runs.HostPath{{Path: "/a/b"}, {Path: "/c", Name: "see", Writable: true}}, p.AllowPaths)

	// An object holds its three fields exactly as spelled, as every
	// object of the protocol does; null is no host path.
	for _, bad := range []string{
		`{"allowPaths": [{"path": "/c", "bogus": 1}]}`,
		`{"allowPaths": [{"path": "/c", "Writable": true}]}`,
		`{"allowPaths": [{"Path": "/c"}]}`,
		`{"allowPaths": [null]}`,
	} {
		var p runs.Profile
		assert.Error(t, json.Unmarshal([]byte(bad), &p), bad)
	}
}

// TestHostPathWhereOnlyStoredFilesCount: host files are not stored, so
// what works on stored files alone names that, rather than calling host/
// invisible: apply and commit refuse a host path with
// workspace.invalid_path, and a checkpoint view has no host/
// (workspace.file_not_found).
func TestHostPathWhereOnlyStoredFilesCount(t *testing.T) {
	h := newHostEnv(t)
	ws := h.ws()
	before := snapshot(t, h.proj)
	_, err := ws.Apply(h.ctx, []runs.Edit{{Path: vfs.MustPath("output/ok.md"), Content: []byte("o")}, {Path: vfs.MustPath("host/proj/a.txt"), Content: []byte("h")}})
	assert.Equal(t, wserr.InvalidPath, wserr.CodeOf(err), "error: %v", err)
	assert.Equal(t, before, snapshot(t, h.proj))
	_, err = ws.Stat(h.ctx, vfs.MustPath("output/ok.md"))
	assert.Equal(t, wserr.FileNotFound, wserr.CodeOf(err), "the refused apply changed nothing")

	_, err = h.svc.Commit(h.ctx, h.run.ID, runs.SinkFunc(func(context.Context, runs.CommitRequest) (json.RawMessage, error) {
		return json.RawMessage(`{}`), nil
	}), runs.CommitOptions{Path: "host/proj/main.go"})
	assert.Equal(t, wserr.InvalidPath, wserr.CodeOf(err), "error: %v", err)

	_, err = ws.Write(h.ctx, vfs.MustPath("output/x.md"), []byte("x"), vfs.WriteOptions{})
	require.NoError(t, err)
	at := h.svc.WorkspaceAt(h.run.ID, 1, runs.ModelScope)
	_, err = at.Read(h.ctx, vfs.MustPath("host/proj/main.go"), vfs.ReadOptions{})
	assert.Equal(t, wserr.FileNotFound, wserr.CodeOf(err), "error: %v", err)
	_, err = at.List(h.ctx, vfs.MustPath("host/proj"), 1)
	assert.Equal(t, wserr.FileNotFound, wserr.CodeOf(err), "error: %v", err)
}

// TestHostPathReachingTheStore: a run that came in by import with an
// allowed path holding this store's directory (which run.create would
// have refused) reaches nothing there: a read, a search and a write are
// workspace.path_not_allowed, and the store's files are never opened
// (closing one would drop the locks the process holds on it).
func TestHostPathReachingTheStore(t *testing.T) {
	ctx := context.Background()
	dst := storetest.OpenStore(t)
	src := storetest.OpenStore(t)
	storeDir := filepath.Dir(dst.DB.Path())
	prof := runs.DefaultProfile()
	prof.AllowPaths = []runs.HostPath{{Path: storeDir, Name: "st", Writable: true}}
	_, err := src.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "chat", StableChatID: "c"}, RunID: "r", Profile: &prof})
	require.NoError(t, err)
	var arc bytes.Buffer
	_, err = src.Archive.Export(ctx, &arc, archive.Scope{Runs: []string{"r"}}, archive.Options{})
	require.NoError(t, err)
	_, err = dst.Archive.Import(ctx, &arc, archive.Options{})
	require.NoError(t, err)

	before, err := os.ReadFile(dst.DB.Path())
	require.NoError(t, err)
	ws := dst.Runs.Workspace("r", runs.ModelScope)
	db := vfs.MustPath("host/st/" + filepath.Base(dst.DB.Path()))
	_, err = ws.Read(ctx, db, vfs.ReadOptions{})
	assert.Equal(t, wserr.PathNotAllowed, wserr.CodeOf(err), "%v", err)
	_, err = hitsOf(ws.Search(ctx, "SQLite", vfs.SearchOptions{Path: vfs.MustPath("host/st")}))
	assert.Equal(t, wserr.PathNotAllowed, wserr.CodeOf(err), "%v", err)
	_, err = ws.Write(ctx, db, []byte("garbage"), vfs.WriteOptions{})
	assert.Equal(t, wserr.PathNotAllowed, wserr.CodeOf(err), "%v", err)
	after, err := os.ReadFile(dst.DB.Path())
	require.NoError(t, err)
	assert.Equal(t, len(before), len(after), "the database is not written")
	_, err = dst.Runs.Run(ctx, "r")
	assert.NoError(t, err)
}

// TestHostPathWriteFromStreams: a streamed write to a host file goes
// through a buffer into the file, so what it allocates does not grow with
// the content.
func TestHostPathWriteFromStreams(t *testing.T) {
	h := newHostEnv(t)
	ws := h.ws()
	alloc := func(size int64) uint64 {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		fi, err := ws.WriteFrom(h.ctx, vfs.MustPath("host/proj/big.bin"), io.LimitReader(zeros{}, size), vfs.WriteOptions{})
		require.NoError(t, err)
		runtime.ReadMemStats(&after)
		assert.Equal(t, size, fi.Size)
		assert.Equal(t, "host/proj/big.bin", fi.Path.String())
		return after.TotalAlloc - before.TotalAlloc
	}
	small, large := alloc(1<<20), alloc(32<<20)
	t.Logf("allocated %d B for 1 MiB, %d B for 32 MiB", small, large)
	assert.Less(t, large, small+4<<20, "32 MiB streamed with no more allocation than 1 MiB, give or take")
	st, err := os.Stat(filepath.Join(h.proj, "big.bin"))
	require.NoError(t, err)
	assert.Equal(t, int64(32<<20), st.Size())
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// TestHostPathOpenStreams: Open streams a host file of any size, as it
// does a stored one, instead of reading it whole and refusing one over
// MaxReadBytes; its info carries the file's size and hash, and a file
// another program changes while it streams fails store.conflict at the end.
func TestHostPathOpenStreams(t *testing.T) {
	h := newHostEnv(t)
	ws := h.ws()
	p := vfs.MustPath("host/proj/big.bin")
	size := int64(vfs.MaxReadBytes + 4<<20)
	_, err := ws.WriteFrom(h.ctx, p, io.LimitReader(zeros{}, size), vfs.WriteOptions{})
	require.NoError(t, err)
	st, err := ws.Stat(h.ctx, p)
	require.NoError(t, err)

	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	rc, fi, err := ws.Open(h.ctx, p)
	require.NoError(t, err)
	n, err := io.Copy(io.Discard, rc)
	require.NoError(t, err)
	require.NoError(t, rc.Close())
	runtime.ReadMemStats(&after)
	assert.Equal(t, size, n)
	assert.Equal(t, size, fi.Size)
	assert.Equal(t, st.Hash, fi.Hash)
	assert.Equal(t, "host/proj/big.bin", fi.Path.String())
	assert.Equal(t, vfs.ResourceHost, fi.Resource)
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(4<<20), "streamed, not held whole")

	rc, _, err = ws.Open(h.ctx, vfs.MustPath("host/proj/main.go"))
	require.NoError(t, err)
	b, err := io.ReadAll(rc)
	require.NoError(t, err)
	require.NoError(t, rc.Close())
	assert.Equal(t, "package main\n", string(b))

	rc, _, err = ws.Open(h.ctx, p)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(h.proj, "big.bin"), bytes.Repeat([]byte{1}, int(size)), 0o600))
	_, err = io.Copy(io.Discard, rc)
	assert.Equal(t, wserr.Conflict, wserr.CodeOf(err), "%v", err)
	require.NoError(t, rc.Close())

	_, _, err = ws.Open(h.ctx, vfs.MustPath("host/proj/missing"))
	assert.Equal(t, wserr.FileNotFound, wserr.CodeOf(err), "%v", err)
	_, _, err = ws.Open(h.ctx, vfs.MustPath("host/proj"))
	assert.Equal(t, wserr.PathIsDirectory, wserr.CodeOf(err), "%v", err)
	_, _, err = ws.Open(h.ctx, vfs.MustPath("host"))
	assert.Equal(t, wserr.PathIsDirectory, wserr.CodeOf(err), "%v", err)
}

// TestHostPathRemovedMeanwhile: an allowed host path removed after the
// run was created reads as missing (workspace.file_not_found), as a
// missing directory below it does, and the store does not create it
// again.
func TestHostPathRemovedMeanwhile(t *testing.T) {
	h := newHostEnv(t)
	require.NoError(t, os.RemoveAll(h.proj))
	ws := h.ws()
	_, err := ws.Read(h.ctx, vfs.MustPath("host/proj/main.go"), vfs.ReadOptions{})
	assert.Equal(t, wserr.FileNotFound, wserr.CodeOf(err), "%v", err)
	_, err = ws.List(h.ctx, vfs.MustPath("host/proj"), 1)
	assert.Equal(t, wserr.FileNotFound, wserr.CodeOf(err), "%v", err)
	_, err = ws.Write(h.ctx, vfs.MustPath("host/proj/main.go"), []byte("x"), vfs.WriteOptions{})
	assert.Equal(t, wserr.FileNotFound, wserr.CodeOf(err), "%v", err)
	assert.NoDirExists(t, h.proj, "the store creates no host directory")
	_, err = ws.Read(h.ctx, vfs.MustPath("host/docs/readme.md"), vfs.ReadOptions{})
	assert.NoError(t, err, "the other allowed path is still reached")
}

// TestHostPathRetargetedToTheTempDir: an allowed host path replaced by a
// symlink to the system's temporary directory after the run was created
// is refused as that directory is at creation
// (workspace.path_not_allowed), and nothing lands there.
func TestHostPathRetargetedToTheTempDir(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("symlinks need privileges on Windows")
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	h := newHostEnv(t)
	require.NoError(t, os.RemoveAll(h.proj))
	require.NoError(t, os.Symlink(tmp, h.proj))
	ws := h.ws()
	_, err := ws.Write(h.ctx, vfs.MustPath("host/proj/x.txt"), []byte("x"), vfs.WriteOptions{})
	assert.Equal(t, wserr.PathNotAllowed, wserr.CodeOf(err), "%v", err)
	assert.NoFileExists(t, filepath.Join(tmp, "x.txt"))
	_, err = ws.List(h.ctx, vfs.MustPath("host/proj"), 1)
	assert.Equal(t, wserr.PathNotAllowed, wserr.CodeOf(err), "%v", err)
	_, err = ws.Read(h.ctx, vfs.MustPath("host/docs/readme.md"), vfs.ReadOptions{})
	assert.NoError(t, err, "the other allowed path is still reached")
}

// TestHostPathBadNameSaysWhy: an allowed host path's name that the path
// rules refuse is refused with the rule it breaks, as a profile's root
// is, not as a name of several segments.
func TestHostPathBadNameSaysWhy(t *testing.T) {
	e := newLifecycleEnv(t)
	dir := t.TempDir()
	aux := filepath.Join(t.TempDir(), "aux")
	require.NoError(t, os.Mkdir(aux, 0o755))
	cases := map[string]struct {
		hp   runs.HostPath
		want []string
	}{
		"ErrDeviceName":    {runs.HostPath{Path: dir, Name: "CON"}, []string{"device name"}},
		"ErrNotNFC":        {runs.HostPath{Path: dir, Name: "e\u0301"}, []string{"NFC"}},
		"ErrSegments":      {runs.HostPath{Path: dir, Name: "a/b"}, []string{"'/'"}},
		"ErrDefaultedName": {runs.HostPath{Path: aux}, []string{"device name", `"name"`}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			prof := runs.DefaultProfile()
			prof.AllowPaths = []runs.HostPath{tc.hp}
			_, err := e.svc.CreateRun(e.ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: name}, Profile: &prof})
			require.True(t, wserr.Is(err, wserr.InvalidArgument), "%v", err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.NotContains(t, err.Error(), "single path segment")
		})
	}
}

// TestHostPathTooLongToNameIsLeftOut lists and searches a host directory
// holding a file whose path inside it the host takes, but whose workspace
// path (host/NAME/…) would be over vfs.MaxPathLen: no tool could name it,
// so it is left out, never answered under another path.
func TestHostPathTooLongToNameIsLeftOut(t *testing.T) {
	h := newHostEnv(t)
	ws := h.ws()
	root, err := os.OpenRoot(h.proj)
	require.NoError(t, err)
	defer root.Close()
	var inner []string // 16 directories of 250 bytes, made through root: the absolute path is past PATH_MAX
	for i := range 16 {
		inner = append(inner, string(rune('a'+i))+strings.Repeat("x", 249))
		require.NoError(t, root.Mkdir(filepath.Join(inner...), 0o755))
	}
	name := strings.Repeat("f", 80)
	rel := strings.Join(append(inner, name), "/")
	require.LessOrEqual(t, len(rel), vfs.MaxPathLen, "a path inside proj")
	require.Greater(t, len("host/proj/"+rel), vfs.MaxPathLen, "too long as a workspace path")
	wf, err := root.Create(filepath.Join(append(inner, name)...))
	require.NoError(t, err)
	_, err = wf.WriteString("needle\n")
	require.NoError(t, err)
	require.NoError(t, wf.Close())
	require.NoError(t, os.WriteFile(filepath.Join(h.proj, "top.txt"), []byte("needle\n"), 0o644))

	ls, err := ws.List(h.ctx, vfs.MustPath("host/proj"), 64)
	require.NoError(t, err)
	var files []string
	for _, fi := range ls {
		require.True(t, fi.Path.HasPrefix(vfs.MustPath("host/proj")) && !fi.Path.Dir().IsRoot(), "listed %q", fi.Path)
		if fi.Kind == vfs.KindFile {
			files = append(files, fi.Path.String())
		}
	}
	assert.Equal(t, []string{"host/proj/main.go", "host/proj/top.txt"}, files)
	assert.Len(t, ls, 2+16, "the files and the directories")

	hits, err := hitsOf(ws.Search(h.ctx, "needle", vfs.SearchOptions{Path: vfs.MustPath("host/proj")}))
	require.NoError(t, err)
	require.Len(t, hits, 1)
	assert.Equal(t, "host/proj/top.txt", hits[0].Path.String())
}

// TestHostPathRootListingDepthZeroIsOne: a listing of the root with depth
// 0 lists the direct entries, as depth 1 does, in both scopes: host/
// without the allowed paths below it.
func TestHostPathRootListingDepthZeroIsOne(t *testing.T) {
	h := newHostEnv(t)
	for _, ws := range []*runs.Workspace{h.ws(), h.svc.Workspace(h.run.ID, runs.HostScope)} {
		one, err := ws.List(h.ctx, vfs.Root(), 1)
		require.NoError(t, err)
		zero, err := ws.List(h.ctx, vfs.Root(), 0)
		require.NoError(t, err)
		assert.Equal(t, one, zero)
		for _, fi := range zero {
			assert.True(t, fi.Path.Dir().IsRoot(), "listed %s", fi.Path)
		}
		page, more, err := ws.ListPage(h.ctx, vfs.Root(), 0, vfs.ListPage{Limit: 100})
		require.NoError(t, err)
		assert.False(t, more)
		assert.Equal(t, one, page)
	}
}
