package runs_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/cas/storagetest"
	"github.com/wsstore/wsstore/internal/heappeak"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// numberedLines returns about n bytes of lines "line %07d ...\n" from 1.
func numberedLines(n int) []byte {
	var b bytes.Buffer
	for i := 1; b.Len() < n; i++ {
		fmt.Fprintf(&b, "line %07d: some words to make the line longer, %d\n", i, i*31%977)
	}
	return b.Bytes()
}

// TestLargeFileReadsOnlyWhatTheyReturn: a line range of a file over
// MaxReadBytes reads the chunks that hold it, not the file; a whole read
// is refused; append and patch give what they give on a small file, and
// Open streams the whole.
func TestLargeFileReadsOnlyWhatTheyReturn(t *testing.T) {
	ctx := context.Background()
	storage, faults := storagetest.NewFaulty(cas.NewSQLiteStorage())
	st := storetest.OpenStoreWith(t, wsstore.Options{CAS: cas.Options{Storage: storage}})
	_, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "big"}, RunID: "big"})
	require.NoError(t, err)
	ws := st.Runs.Workspace("big", runs.HostScope)
	p := vfs.MustPath("output/big.log")
	content := numberedLines(runs.MaxReadBytes + 4<<20)
	_, err = ws.WriteFrom(ctx, p, bytes.NewReader(content), vfs.WriteOptions{})
	require.NoError(t, err)

	gets := func(fn func()) int {
		before := faults.Calls(storagetest.Get)
		fn()
		return faults.Calls(storagetest.Get) - before
	}
	var res vfs.ReadResult
	n := gets(func() {
		res, err = ws.Read(ctx, p, vfs.ReadOptions{StartLine: 10, EndLine: 12})
	})
	require.NoError(t, err)
	assert.True(t, bytes.HasPrefix(res.Content, []byte("line 0000010:")))
	assert.Equal(t, 3, bytes.Count(res.Content, []byte("\n")))
	assert.True(t, res.TotalLinesUnknown)
	assert.LessOrEqual(t, n, 3, "the blob row and the first chunk or two, of %d MiB", len(content)>>20)

	n = gets(func() {
		_, err = ws.Read(ctx, p, vfs.ReadOptions{})
	})
	assert.True(t, wserr.Is(err, wserr.SizeLimitExceeded), "%v", err)
	assert.LessOrEqual(t, n, 1, "refused before reading content")

	_, err = ws.Write(ctx, p, []byte("END\n"), vfs.WriteOptions{Mode: vfs.Append})
	require.NoError(t, err)
	content = append(content, "END\n"...)
	_, err = ws.Patch(ctx, p, "line 0000100:", "LINE 0000100:", vfs.PatchOptions{})
	require.NoError(t, err)
	content = bytes.Replace(content, []byte("line 0000100:"), []byte("LINE 0000100:"), 1)
	_, err = ws.Patch(ctx, p, "some words", "x", vfs.PatchOptions{})
	assert.True(t, wserr.Is(err, wserr.PatchOldStringNotUnique), "%v", err)
	_, err = ws.Patch(ctx, p, "no such text", "x", vfs.PatchOptions{})
	assert.True(t, wserr.Is(err, wserr.PatchOldStringNotFound), "%v", err)

	rc, fi, err := ws.Open(ctx, p)
	require.NoError(t, err)
	got, err := io.ReadAll(rc)
	require.NoError(t, rc.Close())
	require.NoError(t, err)
	assert.Equal(t, int64(len(content)), fi.Size)
	assert.True(t, bytes.Equal(content, got), "append and patch streamed the right content")
	assert.Equal(t, cas.Sum(content), fi.Hash)
}

// TestSearchPassesOverLargeFiles: a search reads no file over
// vfs.MaxSearchFile, whether it walks a directory or is aimed at the file,
// so its heap stays a small part of a large file's size; smaller files
// around it are still found.
func TestSearchPassesOverLargeFiles(t *testing.T) {
	ctx := context.Background()
	st := storetest.OpenStore(t)
	_, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "chat", StableChatID: "c1"}, RunID: "r"})
	require.NoError(t, err)
	ws := st.Runs.Workspace("r", runs.ModelScope)
	big := vfs.MustPath("output/big.log")
	_, err = ws.WriteFrom(ctx, big, bytes.NewReader(numberedLines(32<<20)), vfs.WriteOptions{})
	require.NoError(t, err)
	_, err = ws.Write(ctx, vfs.MustPath("output/notes.md"), []byte("some words to make the line longer\n"), vfs.WriteOptions{})
	require.NoError(t, err)

	var hits []vfs.Hit
	grew := storetest.HeapGrowth(func() {
		hits, err = hitsOf(ws.Search(ctx, "some words longer", vfs.SearchOptions{Path: vfs.MustPath("output")}))
	})
	require.NoError(t, err)
	require.Len(t, hits, 1)
	assert.Equal(t, "output/notes.md", hits[0].Path.String())
	assert.Less(t, grew, uint64(16<<20), "the 32 MiB file is not read")
	hits, err = hitsOf(ws.Search(ctx, "some words", vfs.SearchOptions{Path: big}))
	require.NoError(t, err)
	assert.Empty(t, hits)
}

// bigVirtualRun returns a service whose runs see big as the virtual
// resource chat/history.md, and a run of it.
func bigVirtualRun(t *testing.T, e *lifecycleEnv, big []byte) (*runs.Service, runs.Run) {
	t.Helper()
	v := vfs.NewVirtual()
	require.NoError(t, v.Mount(vfs.MustPath("chat/history.md"), vfs.FileProvider(func(context.Context) ([]byte, error) {
		return big, nil
	})))
	svc := e.service(runs.Options{Virtual: v})
	r, err := svc.CreateRun(e.ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "c"}, RunID: "r"})
	require.NoError(t, err)
	return svc, r
}

// TestHeldContentKeepsTheReadLimit: a virtual resource and a derived
// runtime file (a checkpoint.json) over MaxReadBytes are refused whole and
// read by line range, cut to what fits, as a stored file of that size is.
func TestHeldContentKeepsTheReadLimit(t *testing.T) {
	e := newLifecycleEnv(t)
	big := numberedLines(runs.MaxReadBytes + 1<<20)
	svc, r := bigVirtualRun(t, e, big)
	ws := svc.Workspace(r.ID, runs.HostScope)

	// Enough files that the checkpoint's checkpoint.json passes the limit.
	var edits []runs.Edit
	name := bytes.Repeat([]byte("n"), 200)
	for i := 0; i < 60000; i++ {
		edits = append(edits, runs.Edit{Path: vfs.MustPath(fmt.Sprintf("output/d%02d/%s%06d.md", i/1000, name, i)), Content: []byte("x")})
	}
	fis, err := ws.Apply(e.ctx, edits)
	require.NoError(t, err)
	cpFile := vfs.MustPath("checkpoints/" + fis[0].Checkpoint + "/checkpoint.json")
	fi, err := ws.Stat(e.ctx, cpFile)
	require.NoError(t, err)
	require.Greater(t, fi.Size, int64(runs.MaxReadBytes))

	for _, p := range []vfs.Path{vfs.MustPath("chat/history.md"), cpFile} {
		_, err := ws.Read(e.ctx, p, vfs.ReadOptions{})
		assert.True(t, wserr.Is(err, wserr.SizeLimitExceeded), "%s whole: %v", p, err)
		res, err := ws.Read(e.ctx, p, vfs.ReadOptions{StartLine: 2, EndLine: 3})
		require.NoError(t, err, "%s", p)
		assert.Equal(t, 2, bytes.Count(res.Content, []byte("\n")), "%s", p)
		assert.Equal(t, 3, res.EndLine, "%s", p)
		res, err = ws.Read(e.ctx, p, vfs.ReadOptions{StartLine: 1})
		require.NoError(t, err, "%s", p)
		assert.LessOrEqual(t, len(res.Content), runs.MaxReadBytes, "%s: the range is cut", p)
		assert.True(t, res.Truncated, "%s", p)
	}

	// checkpoint.json is streamed from the checkpoint's tree: a read of
	// two of its lines, the stat and a page of its directory, and a
	// stream of it whole hold it nowhere whole (the heap above what the
	// test holds stays below its size: the tree cache's 16,384 entries,
	// long names here, and the garbage a collection at 10% leaves; held
	// whole, with its list of files, it was 100 MB).
	edits, fis = nil, nil
	cpDir := vfs.MustPath("checkpoints/" + fi.Path.Segments()[1])
	runtime.GC()
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	stop := heappeak.Start()
	res, err := ws.Read(e.ctx, cpFile, vfs.ReadOptions{StartLine: 2, EndLine: 3})
	require.NoError(t, err)
	assert.Contains(t, string(res.Content), `"seq"`)
	dfi, err := ws.Stat(e.ctx, cpDir)
	require.NoError(t, err)
	assert.Greater(t, dfi.Size, fi.Size, "the directory's size counts its checkpoint.json")
	ls, _, err := ws.ListPage(e.ctx, cpDir, 1, vfs.ListPage{Limit: 2})
	require.NoError(t, err)
	require.NotEmpty(t, ls)
	assert.Equal(t, fi.Size, ls[0].Size, "checkpoint.json listed with its size")
	rc, ofi, err := ws.Open(e.ctx, cpFile)
	require.NoError(t, err)
	h := cas.NewHasher()
	n, err := io.Copy(h, rc)
	require.NoError(t, err)
	require.NoError(t, rc.Close())
	peak := stop()
	t.Logf("heap peak %.1f MiB above %.1f MiB, checkpoint.json %.1f MiB", float64(int64(peak)-int64(base))/(1<<20), float64(base)/(1<<20), float64(fi.Size)/(1<<20))
	assert.Equal(t, fi.Size, n)
	assert.Equal(t, fi.Hash, h.Sum(), "the stream is the content its stat names")
	assert.Equal(t, fi.Hash, ofi.Hash)
	assert.Less(t, int64(peak)-int64(base), fi.Size, "heap above the %d bytes held before, for a %d-byte checkpoint.json", base, fi.Size)
}

// TestSearchPassesOverLargeVirtualFiles: a virtual resource over
// vfs.MaxSearchFile is passed over by a search, as a stored or host file
// of that size is, whether the search reaches it from a stored directory
// above its mount or is aimed inside the mount.
func TestSearchPassesOverLargeVirtualFiles(t *testing.T) {
	e := newLifecycleEnv(t)
	big := append(numberedLines(vfs.MaxSearchFile), "dragon\n"...)
	skills, err := vfs.NewStaticProvider(map[string][]byte{
		"big.md":   big,
		"small.md": []byte("a dragon sleeps\n"),
	})
	require.NoError(t, err)
	v := vfs.NewVirtual()
	require.NoError(t, v.Mount(vfs.MustPath("skills"), skills))
	require.NoError(t, v.Mount(vfs.MustPath("chat/history.md"), vfs.FileProvider(func(context.Context) ([]byte, error) {
		return big, nil
	})))
	svc := e.service(runs.Options{Virtual: v})
	r, err := svc.CreateRun(e.ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "c"}, RunID: "r"})
	require.NoError(t, err)
	ws := svc.Workspace(r.ID, runs.HostScope)

	for _, at := range []string{"", "skills", "chat", "chat/history.md", "skills/big.md"} {
		var p vfs.Path
		if at != "" {
			p = vfs.MustPath(at)
		}
		hits, err := hitsOf(ws.Search(e.ctx, "dragon", vfs.SearchOptions{Path: p}))
		require.NoError(t, err, "search %q", at)
		var got []string
		for _, h := range hits {
			got = append(got, h.Path.String())
		}
		want := []string(nil)
		if at == "" || at == "skills" {
			want = []string{"skills/small.md"}
		}
		assert.Equal(t, want, got, "search %q", at)
	}
}

// TestOpenStreamsLargeVirtual: Open streams a virtual resource of any
// size, as it streams a stored or host file (a download of it through
// GET /v1/runs/{run}/file goes through Open), while a whole Read of it
// keeps the read limit.
func TestOpenStreamsLargeVirtual(t *testing.T) {
	e := newLifecycleEnv(t)
	big := numberedLines(runs.MaxReadBytes + 1<<20)
	svc, r := bigVirtualRun(t, e, big)
	p := vfs.MustPath("chat/history.md")
	for _, ws := range []*runs.Workspace{svc.Workspace(r.ID, runs.ModelScope), svc.WorkspaceAt(r.ID, 1, runs.HostScope)} {
		rc, fi, err := ws.Open(e.ctx, p)
		require.NoError(t, err)
		got, err := io.ReadAll(rc)
		require.NoError(t, rc.Close())
		require.NoError(t, err)
		assert.True(t, bytes.Equal(big, got), "the whole resource")
		assert.Equal(t, int64(len(big)), fi.Size)
		assert.Equal(t, cas.Sum(big), fi.Hash)
		assert.Equal(t, vfs.ResourceVirtual, fi.Resource)
		assert.Equal(t, p, fi.Path)

		_, err = ws.Read(e.ctx, p, vfs.ReadOptions{})
		assert.True(t, wserr.Is(err, wserr.SizeLimitExceeded), "%v", err)
	}
}
