//go:build linux

package runs_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// bindMount mounts dir on a new directory as well and returns that other
// name of dir, unmounted when the test ends. It skips the test where
// this process may not mount (not root, or no CAP_SYS_ADMIN).
func bindMount(t *testing.T, dir string) string {
	t.Helper()
	alias := filepath.Join(t.TempDir(), "alias")
	require.NoError(t, os.Mkdir(alias, 0o755))
	if err := syscall.Mount(dir, alias, "", syscall.MS_BIND, ""); err != nil {
		t.Skipf("cannot bind-mount here: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(alias, syscall.MNT_DETACH) })
	return alias
}

// TestAllowedPathNamingTheStoreOtherwiseIsRefused: a directory can have
// names that no symlink resolves into each other: another case of it on
// a case-insensitive file system (macOS's default), a bind mount here. An
// allowed host path that holds the store's directory, lies inside it or
// is the system's temporary directory under such a name is refused
// (workspace.path_not_allowed) as under its own, so no run can write over
// the store's database through it.
func TestAllowedPathNamingTheStoreOtherwiseIsRefused(t *testing.T) {
	e := newLifecycleEnv(t)
	storeDir := filepath.Dir(e.st.DB.Path())
	holds := bindMount(t, filepath.Dir(storeDir))
	inside := filepath.Join(storeDir, "sub")
	require.NoError(t, os.Mkdir(inside, 0o755))
	insideAlias := filepath.Join(bindMount(t, storeDir), "sub")
	tmpAlias := bindMount(t, os.TempDir())
	for name, dir := range map[string]string{"ErrHoldsStore": holds, "ErrInsideStore": insideAlias, "ErrTempDir": tmpAlias} {
		t.Run(name, func(t *testing.T) {
			prof := runs.DefaultProfile()
			prof.AllowPaths = []runs.HostPath{{Path: dir, Name: "p", Writable: true}}
			_, err := e.svc.CreateRun(e.ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: name}, Profile: &prof})
			assert.True(t, wserr.Is(err, wserr.PathNotAllowed), "%v", err)
		})
	}

	// The database is never written through the other name.
	prof := runs.DefaultProfile()
	prof.AllowPaths = []runs.HostPath{{Path: holds, Name: "p", Writable: true}}
	run, err := e.svc.CreateRun(e.ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "write"}, Profile: &prof})
	if err == nil {
		db := "host/p/" + filepath.Base(storeDir) + "/" + filepath.Base(e.st.DB.Path())
		_, err = e.svc.Workspace(run.ID, runs.ModelScope).Write(e.ctx, vfs.MustPath(db), []byte("oops"), vfs.WriteOptions{})
	}
	assert.True(t, wserr.Is(err, wserr.PathNotAllowed), "%v", err)
	b, err := os.ReadFile(e.st.DB.Path())
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(b), "SQLite format 3\x00"), "the store's database is as it was")
}
