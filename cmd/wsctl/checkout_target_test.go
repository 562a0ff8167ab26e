package main

import (
	"bytes"
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// foldingTarget is a checkout directory on a file system that does not
// tell case apart, as macOS's and Windows's are by default: every name is
// kept in lower case, so two names that differ only in case are one.
type foldingTarget struct{ checkoutTarget }

func (f foldingTarget) Mkdir(name string, perm fs.FileMode) error {
	return f.checkoutTarget.Mkdir(strings.ToLower(name), perm)
}

func (f foldingTarget) OpenFile(name string, flag int, perm fs.FileMode) (*os.File, error) {
	return f.checkoutTarget.OpenFile(strings.ToLower(name), flag, perm)
}

// deniedTarget is a checkout directory the process may not write into.
type deniedTarget struct{ checkoutTarget }

func (deniedTarget) Mkdir(name string, _ fs.FileMode) error {
	return &fs.PathError{Op: "mkdirat", Path: name, Err: syscall.EACCES}
}

func (deniedTarget) OpenFile(name string, _ int, _ fs.FileMode) (*os.File, error) {
	return nil, &fs.PathError{Op: "openat", Path: name, Err: syscall.EACCES}
}

// checkoutInto runs wsctl checkout RUN DIR with the target wrapped by wrap
// and returns the exit status and standard error.
func checkoutInto(t *testing.T, c *cli, runID, dir string, wrap func(checkoutTarget) checkoutTarget) (int, string) {
	t.Helper()
	a := c.app()
	a.wrapTarget = wrap
	var out, errOut bytes.Buffer
	code := execute(context.Background(), a, []string{"--store", c.store, "checkout", runID, dir}, strings.NewReader(""), &out, &errOut)
	return code, errOut.String()
}

// TestCheckoutOntoAFileSystemThatFoldsCase: names that differ only in
// case are two files on Linux, and one on a case-insensitive file system.
// There a checkout neither merges two directories nor lets one file take
// another's place: it is refused with store.conflict (exit 5) naming the
// second, and DIR is left empty.
func TestCheckoutOntoAFileSystemThatFoldsCase(t *testing.T) {
	ctx := context.Background()
	for name, files := range map[string][]string{
		"Files":       {"output/A.md", "output/a.md"},
		"Directories": {"output/Dir/x.md", "output/dir/y.md"},
		"FileAndDir":  {"output/B", "output/b/c.md"},
	} {
		t.Run(name, func(t *testing.T) {
			c := newCLI(t)
			st := c.open()
			_, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "case"}, RunID: "case"})
			require.NoError(t, err)
			edits := make([]runs.Edit, 0, len(files))
			for _, f := range files {
				edits = append(edits, runs.Edit{Path: vfs.MustPath(f), Content: []byte(f)})
			}
			_, err = st.Runs.Workspace("case", runs.HostScope).Apply(ctx, edits)
			require.NoError(t, err)

			// On this file system both names are kept.
			plain := t.TempDir()
			code, errOut := checkoutInto(t, c, "case", plain, nil)
			require.Equal(t, 0, code, errOut)
			for _, f := range files {
				b, err := os.ReadFile(plain + "/" + f)
				require.NoError(t, err)
				assert.Equal(t, f, string(b))
			}

			dir := t.TempDir()
			code, errOut = checkoutInto(t, c, "case", dir, func(r checkoutTarget) checkoutTarget { return foldingTarget{r} })
			assert.Equal(t, 5, code, errOut)
			assert.Contains(t, errOut, "store.conflict")
			assert.Contains(t, errOut, "differ only in case")
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			assert.Empty(t, entries, "nothing is left in DIR")
		})
	}
}

// TestCheckoutIntoADirectoryItMayNotWrite: an existing empty DIR the
// process may not write into is the command line's mistake, as a DIR it
// may not create is: wsctl.invalid_argument (exit 2), naming the cause.
func TestCheckoutIntoADirectoryItMayNotWrite(t *testing.T) {
	c := newCLI(t)
	st := c.open()
	c.seedRun(st, "denied")
	dir := t.TempDir()
	code, errOut := checkoutInto(t, c, "denied", dir, func(r checkoutTarget) checkoutTarget { return deniedTarget{r} })
	assert.Equal(t, 2, code, errOut)
	assert.Contains(t, errOut, "wsctl.invalid_argument")
	assert.Contains(t, errOut, "permission denied")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries)
}

// failingTarget is a checkout directory whose file system fails: with
// err as files are created, or, when err is nil, as they are written.
type failingTarget struct {
	checkoutTarget
	err error
}

func (f failingTarget) OpenFile(name string, flag int, perm fs.FileMode) (*os.File, error) {
	if f.err != nil {
		return nil, &fs.PathError{Op: "openat", Path: name, Err: f.err}
	}
	if _, err := f.checkoutTarget.OpenFile(name, flag, perm); err != nil {
		return nil, err
	}
	// A file that takes no write: each write fails with EBADF.
	return os.Open(os.DevNull)
}

// TestCheckoutFailuresCarryACode: a failure of DIR's file system that is
// neither a name collision nor a permission is store.internal naming its
// cause, whether a file is created or written, and DIR is left empty.
func TestCheckoutFailuresCarryACode(t *testing.T) {
	for name, fail := range map[string]error{"Create": syscall.EIO, "Write": nil} {
		t.Run(name, func(t *testing.T) {
			c := newCLI(t)
			st := c.open()
			c.seedRun(st, "failing")
			dir := t.TempDir()
			code, errOut := checkoutInto(t, c, "failing", dir, func(r checkoutTarget) checkoutTarget { return failingTarget{r, fail} })
			assert.Equal(t, 1, code, errOut)
			assert.Contains(t, errOut, "store.internal")
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			assert.Empty(t, entries)
		})
	}
}

// otherProgramFirst is a content store whose first read has another
// program save file (a path in DIR) there, making DIR if need be, and
// whose second fails if fail is set.
type otherProgramFirst struct {
	blobGetter
	dir, file string
	fail      bool
	n         int
}

func (o *otherProgramFirst) Get(ctx context.Context, h cas.Hash) (io.ReadCloser, error) {
	o.n++
	switch {
	case o.n == 1:
		path := filepath.Join(o.dir, filepath.FromSlash(o.file))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(path, []byte("mine"), 0o644); err != nil {
			return nil, err
		}
	case o.n == 2 && o.fail:
		return nil, wserr.New(wserr.Internal, "get", h.Short(), "the disk failed")
	}
	return o.blobGetter.Get(ctx, h)
}

// checkoutBesideOtherProgram checks run "others" out into a new or an
// empty DIR while another program saves file there, and returns DIR, the
// exit status and standard error.
func checkoutBesideOtherProgram(t *testing.T, existing bool, file string, fail bool) (string, int, string) {
	t.Helper()
	c := newCLI(t)
	st := c.open()
	c.seedRun(st, "others")
	dir := filepath.Join(t.TempDir(), "co")
	if existing {
		require.NoError(t, os.Mkdir(dir, 0o755))
	}
	a := c.app()
	a.wrapBlobs = func(g blobGetter) blobGetter {
		return &otherProgramFirst{blobGetter: g, dir: dir, file: file, fail: fail}
	}
	var out, errOut bytes.Buffer
	code := execute(context.Background(), a, []string{"--store", c.store, "checkout", "others", dir}, strings.NewReader(""), &out, &errOut)
	return dir, code, errOut.String()
}

// onlyOthersFile asserts that DIR holds only file, as the other program
// saved it, and that no hidden directory of the checkout is left in DIR
// or beside it.
func onlyOthersFile(t *testing.T, dir, file string) {
	t.Helper()
	var left []string
	require.NoError(t, filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, path)
			left = append(left, filepath.ToSlash(rel))
		}
		return err
	}))
	assert.Equal(t, []string{file}, left, "only the other program's file is left")
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(file)))
	require.NoError(t, err)
	assert.Equal(t, "mine", string(b))
	siblings, err := os.ReadDir(filepath.Dir(dir))
	require.NoError(t, err)
	require.Len(t, siblings, 1)
	assert.Equal(t, filepath.Base(dir), siblings[0].Name())
}

// TestCheckoutFailureLeavesWhatOthersWrote: a checkout that fails removes
// what it made, and only that: a file another program saved in DIR
// meanwhile stays, and so does DIR, which holds it.
func TestCheckoutFailureLeavesWhatOthersWrote(t *testing.T) {
	for name, existing := range map[string]bool{"NewDir": false, "EmptyDir": true} {
		t.Run(name, func(t *testing.T) {
			dir, code, errOut := checkoutBesideOtherProgram(t, existing, "notes.txt", true)
			assert.Equal(t, 1, code, errOut)
			onlyOthersFile(t, dir, "notes.txt")
		})
	}
}

// TestCheckoutLeavesWhatOthersMadeWhereItsFilesGo: another program makes
// DIR, or in an empty DIR a directory the workspace has, and saves a
// file there while the checkout writes: putting the checkout's files in
// place would overwrite or merge with it, so the checkout is
// store.conflict (exit 5), the other program's file stays, and of the
// checkout nothing is left, not even the directories moved into DIR
// before the one taken.
func TestCheckoutLeavesWhatOthersMadeWhereItsFilesGo(t *testing.T) {
	for name, existing := range map[string]bool{"NewDir": false, "EmptyDir": true} {
		t.Run(name, func(t *testing.T) {
			dir, code, errOut := checkoutBesideOtherProgram(t, existing, "output/notes.txt", false)
			assert.Equal(t, 5, code, errOut)
			assert.Contains(t, errOut, "store.conflict")
			assert.Contains(t, errOut, "another program put files there")
			onlyOthersFile(t, dir, "output/notes.txt")
		})
	}
}
