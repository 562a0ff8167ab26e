package wsstore_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/archive"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// TestExportFileRefusesADirectory: an export named onto a directory is
// workspace.invalid_argument before any archive is written, and leaves
// the directory and its parent as they were; a parent that does not
// exist is refused the same way.
func TestExportFileRefusesADirectory(t *testing.T) {
	ctx := context.Background()
	st := storetest.OpenStore(t)
	_, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "c"}, RunID: "r"})
	require.NoError(t, err)
	parent := t.TempDir()
	dir := filepath.Join(parent, "out")
	require.NoError(t, os.Mkdir(dir, 0o755))
	for _, path := range []string{dir, filepath.Join(parent, "none", "out.wsar")} {
		_, err = st.ExportFile(ctx, path, archive.Scope{All: true}, archive.Options{})
		assert.Equal(t, wserr.InvalidArgument, wserr.CodeOf(err), "%s: %v", path, err)
		assert.NotContains(t, err.Error(), ".wsstore-", "the error names the file asked for, not the one written beside it")
	}
	_, err = st.ExportFile(ctx, filepath.Join(parent, "none", "out.wsar"), archive.Scope{All: true}, archive.Options{})
	assert.ErrorContains(t, err, filepath.Join(parent, "none")+" does not exist")
	entries, err := os.ReadDir(parent)
	require.NoError(t, err)
	require.Len(t, entries, 1, "nothing written beside it")
	inside, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, inside)
}

// TestImportFileRefusesTheStoresOwnFiles: ImportFile never opens one of
// the store's own database files (closing it again would drop the locks
// this process holds on it): workspace.invalid_argument, and the store
// reads on.
func TestImportFileRefusesTheStoresOwnFiles(t *testing.T) {
	s := storetest.OpenStore(t)
	ctx := context.Background()
	_, err := s.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "c"}, RunID: "r"})
	require.NoError(t, err)
	for _, p := range []string{s.DB.Path(), s.DB.Path() + "-wal", filepath.Join(s.Dir, ".", "wsstore.db")} {
		_, err := s.ImportFile(ctx, p, archive.Options{})
		assert.Equal(t, wserr.InvalidArgument, wserr.CodeOf(err), "%s: %v", p, err)
	}
	_, err = s.Runs.Run(ctx, "r")
	assert.NoError(t, err)
}

// TestExportOfWhatChangesMeanwhile: an export whose objects a gc collects
// while it writes them, because a run it selected was deleted meanwhile,
// fails with store.conflict (export again), not store.corrupt or
// store.not_found on a sound store; and an export again succeeds.
func TestExportOfWhatChangesMeanwhile(t *testing.T) {
	ctx := context.Background()
	st := storetest.OpenStore(t)
	chat := runs.ChatKey{Kind: "character", StableChatID: "c"}
	for _, id := range []string{"keep", "doomed"} {
		_, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: chat, RunID: id})
		require.NoError(t, err)
		edits := make([]runs.Edit, 40)
		for i := range edits {
			edits[i] = runs.Edit{Path: vfs.MustPath(fmt.Sprintf("output/d%d/%s-%02d.md", i%4, id, i)), Content: fmt.Appendf(nil, "%s file %d\n", id, i)}
		}
		_, err = st.Runs.Workspace(id, runs.ModelScope).Apply(ctx, edits)
		require.NoError(t, err)
		_, err = st.Runs.Finish(ctx, id)
		require.NoError(t, err)
	}
	deleted := false
	opt := archive.Options{Progress: func(p archive.Progress) {
		if p.Phase != "blobs" || deleted {
			return
		}
		deleted = true
		_, err := st.Runs.CancelAndDeleteRun(ctx, "doomed")
		require.NoError(t, err)
		_, err = st.GC(ctx, wsstore.GCOptions{Grace: -1})
		require.NoError(t, err)
	}}
	_, err := st.Archive.Export(ctx, io.Discard, archive.Scope{All: true}, opt)
	require.True(t, deleted)
	assert.Equal(t, wserr.Conflict, wserr.CodeOf(err), "%v", err)

	var b bytes.Buffer
	sum, err := st.Archive.Export(ctx, &b, archive.Scope{All: true}, archive.Options{})
	require.NoError(t, err)
	assert.Equal(t, 1, sum.Runs)
	rep, err := st.Fsck(ctx, nil)
	require.NoError(t, err)
	assert.Empty(t, rep.Problems)
}

// TestExportFileClearsWhatAKilledExportLeft: the file an export killed
// while writing left beside its path (".NAME.wsstore-" and digits) is
// removed by the next export to that path once nothing has written to it
// for an hour; one written to within the hour (another export still
// running), and files of other names, stay.
func TestExportFileClearsWhatAKilledExportLeft(t *testing.T) {
	ctx := context.Background()
	st := storetest.OpenStore(t)
	_, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "c"}, RunID: "r"})
	require.NoError(t, err)
	dir := t.TempDir()
	path := filepath.Join(dir, "out.wsar")
	old := time.Now().Add(-2 * time.Hour)
	files := map[string]bool{ // name: still there after the export
		".out.wsar.wsstore-1234567":  false,
		".out.wsar.wsstore-89":       true, // written to just now
		".out.wsar.wsstore-notdigit": true,
		".other.wsar.wsstore-1234":   true,
		"out.wsar.wsstore-1234":      true,
	}
	for name := range files {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte("partial"), 0o600))
		if name != ".out.wsar.wsstore-89" {
			require.NoError(t, os.Chtimes(p, old, old))
		}
	}
	_, err = st.ExportFile(ctx, path, archive.Scope{All: true}, archive.Options{})
	require.NoError(t, err)
	for name, kept := range files {
		_, err := os.Stat(filepath.Join(dir, name))
		assert.Equal(t, kept, err == nil, "%s: %v", name, err)
	}
	_, err = os.Stat(path)
	assert.NoError(t, err)
}

// TestExportFileKeepsFilesThatOnlyLookLikeItsOwn: a hidden file beside
// the path whose name is the path's, a dot and digits (a dated copy
// such as ".out.wsar.20240101", another program's) is the user's, however
// old: an export, and an actor download, to the path leave it.
func TestExportFileKeepsFilesThatOnlyLookLikeItsOwn(t *testing.T) {
	ctx := context.Background()
	st := storetest.OpenStore(t)
	_, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "c"}, RunID: "r"})
	require.NoError(t, err)
	dir := t.TempDir()
	path := filepath.Join(dir, "out.wsar")
	mine := filepath.Join(dir, ".out.wsar.20240101")
	require.NoError(t, os.WriteFile(mine, []byte("the user's own copy"), 0o600))
	old := time.Now().Add(-48 * time.Hour)
	require.NoError(t, os.Chtimes(mine, old, old))
	_, err = st.ExportFile(ctx, path, archive.Scope{All: true}, archive.Options{})
	require.NoError(t, err)
	b, err := os.ReadFile(mine)
	require.NoError(t, err, "the export removed a file it did not write")
	assert.Equal(t, "the user's own copy", string(b))
}

// TestOpenArchiveFileCodes: an empty path and a loop of symbolic links are
// workspace.invalid_argument, only a missing file store.not_found.
func TestOpenArchiveFileCodes(t *testing.T) {
	dir := t.TempDir()
	loop := filepath.Join(dir, "loop")
	require.NoError(t, os.Symlink(loop, loop))
	for path, want := range map[string]wserr.Code{
		"":                              wserr.InvalidArgument,
		dir:                             wserr.InvalidArgument,
		loop:                            wserr.InvalidArgument,
		filepath.Join(dir, "none.wsar"): wserr.NotFound,
	} {
		f, err := wsstore.OpenArchiveFile(path)
		assert.Nil(t, f)
		assert.Equal(t, want, wserr.CodeOf(err), "%q: %v", path, err)
	}
}
