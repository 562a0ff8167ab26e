package wsstore_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/archive"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/runs"
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
	}
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
