package wsstore

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// openCheckoutStore opens a new store for a checkout test.
func openCheckoutStore(t *testing.T) *Store {
	t.Helper()
	st, err := Open(context.Background(), t.TempDir(), Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	return st
}

// seedCheckoutRun makes run runID holding input/prompt_snapshot.json,
// input/persist_snapshot.json, output/a.md ("one\ntwo\n", written twice)
// and scratch/b.bin, which is never checked out.
func seedCheckoutRun(t *testing.T, st *Store, runID string) {
	t.Helper()
	ctx := context.Background()
	_, err := st.Runs.CreateRun(ctx, runs.CreateRequest{
		Chat:   runs.ChatKey{Kind: "character", StableChatID: "chat-" + runID},
		RunID:  runID,
		Inputs: map[string][]byte{"prompt_snapshot.json": []byte(`{"messages":[]}`)},
	})
	require.NoError(t, err)
	ws := st.Runs.Workspace(runID, runs.ModelScope)
	for _, w := range []struct{ path, content string }{
		{"output/a.md", "one\n"},
		{"output/a.md", "one\ntwo\n"},
		{"scratch/b.bin", "\x00\x01\x02binary"},
	} {
		_, err := ws.Write(ctx, vfs.MustPath(w.path), []byte(w.content), vfs.WriteOptions{})
		require.NoError(t, err)
	}
}

// seams returns the seams Checkout uses, with blobs and the directory
// wrapped by what is not nil.
func seams(st *Store, blobs func(checkoutBlobs) checkoutBlobs, dir func(checkoutDir) checkoutDir) checkoutSeams {
	s := checkoutSeams{blobs: st.Blobs, wrapDir: dir, now: time.Now}
	if blobs != nil {
		s.blobs = blobs(st.Blobs)
	}
	return s
}

// treeOf lists what dir holds, files and directories, as slash paths.
func treeOf(t *testing.T, dir string) []string {
	t.Helper()
	var got []string
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && p != dir {
			rel, _ := filepath.Rel(dir, p)
			got = append(got, filepath.ToSlash(rel))
		}
		return err
	}))
	return got
}

// bytesIn sums the sizes of the files below dir.
func bytesIn(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	require.NoError(t, filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			n += fi.Size()
		}
		return err
	}))
	return n
}

// TestCheckoutWritesTheWorkspace: Checkout writes the live workspace, or
// a checkpoint's, into a new or an empty directory and counts what it
// wrote; scratch/ is left out, and so is any hidden directory.
func TestCheckoutWritesTheWorkspace(t *testing.T) {
	ctx := context.Background()
	st := openCheckoutStore(t)
	seedCheckoutRun(t, st, "run_a")
	for name, existing := range map[string]bool{"NewDir": false, "EmptyDir": true} {
		t.Run(name, func(t *testing.T) {
			parent := t.TempDir()
			dir := filepath.Join(parent, "co")
			if existing {
				require.NoError(t, os.Mkdir(dir, 0o755))
			}
			res, err := st.Checkout(ctx, "run_a", runs.Live, dir, CheckoutOptions{})
			require.NoError(t, err)
			assert.Equal(t, CheckoutResult{Files: 3, Dirs: 5, Bytes: bytesIn(t, dir)}, res)
			// persist/, plan/ and summaries/: the profile's roots that hold
			// no file.
			assert.Equal(t, []string{"input", "input/persist_snapshot.json", "input/prompt_snapshot.json", "output", "output/a.md", "persist", "plan", "summaries"}, treeOf(t, dir))
			b, err := os.ReadFile(filepath.Join(dir, "output", "a.md"))
			require.NoError(t, err)
			assert.Equal(t, "one\ntwo\n", string(b))
			siblings, err := os.ReadDir(parent)
			require.NoError(t, err)
			require.Len(t, siblings, 1, "no hidden directory left beside DIR")

			at := filepath.Join(t.TempDir(), "at")
			res, err = st.Checkout(ctx, "run_a", 2, at, CheckoutOptions{})
			require.NoError(t, err)
			b, err = os.ReadFile(filepath.Join(at, "output", "a.md"))
			require.NoError(t, err)
			assert.Equal(t, "one\n", string(b))
			assert.Equal(t, 3, res.Files)
		})
	}
}

// TestCheckoutReportsProgress: Progress is called before each file with
// the files written so far, and at the end with all of them.
func TestCheckoutReportsProgress(t *testing.T) {
	st := openCheckoutStore(t)
	seedCheckoutRun(t, st, "run_a")
	var calls [][2]int
	_, err := st.Checkout(context.Background(), "run_a", runs.Live, t.TempDir(), CheckoutOptions{
		Progress: func(done, total int) { calls = append(calls, [2]int{done, total}) },
	})
	require.NoError(t, err)
	assert.Equal(t, [][2]int{{0, 3}, {1, 3}, {2, 3}, {3, 3}}, calls)
}

// TestCheckoutRefusesWhatItCannotUse: a directory that holds anything or
// a file is store.conflict, a run or checkpoint the store does not hold
// their not-found codes, a path under a file or an empty one
// workspace.invalid_argument; each leaves DIR as it was.
func TestCheckoutRefusesWhatItCannotUse(t *testing.T) {
	ctx := context.Background()
	st := openCheckoutStore(t)
	seedCheckoutRun(t, st, "run_a")
	full := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(full, "mine.txt"), []byte("mine"), 0o644))
	file := filepath.Join(full, "mine.txt")
	for _, tc := range []struct {
		name  string
		run   string
		seq   int64
		dir   string
		code  wserr.Code
		leave []string
	}{
		{"ErrNotEmpty", "run_a", runs.Live, full, wserr.Conflict, []string{"mine.txt"}},
		{"ErrAFile", "run_a", runs.Live, file, wserr.Conflict, nil},
		{"ErrUnderAFile", "run_a", runs.Live, filepath.Join(file, "sub"), wserr.InvalidArgument, nil},
		{"ErrEmptyName", "run_a", runs.Live, "", wserr.InvalidArgument, nil},
		{"ErrNoRun", "nope", runs.Live, filepath.Join(t.TempDir(), "co"), wserr.RunNotFound, nil},
		{"ErrNoCheckpoint", "run_a", 99, filepath.Join(t.TempDir(), "co"), wserr.CheckpointNotFound, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := st.Checkout(ctx, tc.run, tc.seq, tc.dir, CheckoutOptions{})
			assert.Equal(t, tc.code, wserr.CodeOf(err), "%v", err)
			assert.Equal(t, []string{"mine.txt"}, treeOf(t, full))
			if tc.dir != "" && tc.dir != full && tc.dir != file {
				assert.NoDirExists(t, tc.dir)
			}
		})
	}
}

// stallAfterFirst reads the first file checkout asks for, then, at the
// second, signals reached and waits until its context ends: the moment a
// checkout killed midway (SIGKILL, a power loss) stops at, its first
// file written and no deferred cleanup to run.
type stallAfterFirst struct {
	checkoutBlobs
	reached chan struct{}
	mu      sync.Mutex
	n       int
}

func (s *stallAfterFirst) Get(ctx context.Context, h cas.Hash) (io.ReadCloser, error) {
	s.mu.Lock()
	s.n++
	n := s.n
	s.mu.Unlock()
	if n == 2 {
		close(s.reached)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return s.checkoutBlobs.Get(ctx, h)
}

// TestCheckoutKilledMidwayShowsNoHalfWorkspace: while a checkout has
// written some of its files, DIR shows none of them: a new DIR does not
// exist yet, and an empty DIR holds only the hidden directory the files
// are written into. So a checkout killed then leaves no half workspace
// under DIR's name; one whose context ends removes its hidden directory,
// and the same checkout run again succeeds.
func TestCheckoutKilledMidwayShowsNoHalfWorkspace(t *testing.T) {
	st := openCheckoutStore(t)
	seedCheckoutRun(t, st, "run_a")
	for name, existing := range map[string]bool{"NewDir": false, "EmptyDir": true} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "co")
			if existing {
				require.NoError(t, os.Mkdir(dir, 0o755))
			}
			stall := &stallAfterFirst{reached: make(chan struct{})}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error)
			go func() {
				_, err := st.checkout(ctx, "run_a", runs.Live, dir, CheckoutOptions{}, seams(st, func(b checkoutBlobs) checkoutBlobs {
					stall.checkoutBlobs = b
					return stall
				}, nil))
				done <- err
			}()
			select {
			case <-stall.reached:
			case err := <-done:
				t.Fatalf("checkout ended before its second file: %v", err)
			}
			// What a SIGKILL now would leave.
			if existing {
				entries, err := os.ReadDir(dir)
				require.NoError(t, err)
				require.Len(t, entries, 1, "only the hidden directory the files are written into")
				assert.True(t, strings.HasPrefix(entries[0].Name(), stageMark), entries[0].Name())
			} else {
				assert.NoDirExists(t, dir)
				siblings, err := os.ReadDir(filepath.Dir(dir))
				require.NoError(t, err)
				require.Len(t, siblings, 1)
				assert.True(t, strings.HasPrefix(siblings[0].Name(), ".co"+stageMark), siblings[0].Name())
			}
			cancel()
			assert.ErrorIs(t, <-done, context.Canceled)
			if existing {
				assert.Empty(t, treeOf(t, dir))
			} else {
				assert.Empty(t, treeOf(t, filepath.Dir(dir)))
			}
			res, err := st.Checkout(context.Background(), "run_a", runs.Live, dir, CheckoutOptions{})
			require.NoError(t, err)
			assert.Equal(t, 3, res.Files)
			b, err := os.ReadFile(filepath.Join(dir, "output", "a.md"))
			require.NoError(t, err)
			assert.Equal(t, "one\ntwo\n", string(b))
			siblings, err := os.ReadDir(filepath.Dir(dir))
			require.NoError(t, err)
			require.Len(t, siblings, 1, "no hidden directory left beside DIR")
			hidden, err := filepath.Glob(filepath.Join(dir, ".*"))
			require.NoError(t, err)
			assert.Empty(t, hidden)
		})
	}
}

// onGet calls fn with the count of reads so far before each read of the
// content store.
type onGet struct {
	checkoutBlobs
	n  int
	fn func(n int)
}

func (o *onGet) Get(ctx context.Context, h cas.Hash) (io.ReadCloser, error) {
	o.n++
	o.fn(o.n)
	return o.checkoutBlobs.Get(ctx, h)
}

// TestCheckoutKeepsItsStageFresh: a checkout that has written for two
// hours touches its hidden directory as it writes, so a second checkout
// to the same DIR takes it for a live one's (an empty DIR holding it is
// not empty), never for one a killed checkout left: the first checkout
// completes. The clock both read is the test's.
func TestCheckoutKeepsItsStageFresh(t *testing.T) {
	ctx := context.Background()
	st := openCheckoutStore(t)
	_, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "long"}, RunID: "long"})
	require.NoError(t, err)
	// No directory made right in the hidden one after the clock moves:
	// that would set its time by the file system's clock.
	_, err = st.Runs.Workspace("long", runs.HostScope).Apply(ctx, []runs.Edit{
		{Path: vfs.MustPath("output/f1.md"), Content: []byte("1")},
		{Path: vfs.MustPath("output/f2.md"), Content: []byte("2")},
		{Path: vfs.MustPath("output/f3.md"), Content: []byte("3")},
	})
	require.NoError(t, err)
	dir := t.TempDir()
	clock := time.Now()
	now := func() time.Time { return clock }
	var second error
	blobs := &onGet{checkoutBlobs: st.Blobs, fn: func(n int) {
		switch n {
		case 2: // output/f1.md, after input/persist_snapshot.json
			clock = clock.Add(2 * time.Hour)
		case 3:
			_, second = st.checkout(ctx, "long", runs.Live, dir, CheckoutOptions{}, checkoutSeams{blobs: st.Blobs, now: now})
		}
	}}
	res, err := st.checkout(ctx, "long", runs.Live, dir, CheckoutOptions{}, checkoutSeams{blobs: blobs, now: now})
	require.NoError(t, err)
	assert.Equal(t, 4, res.Files)
	assert.Equal(t, wserr.Conflict, wserr.CodeOf(second), "%v", second)
	assert.ErrorContains(t, second, "not empty")
	assert.Equal(t, []string{"input", "input/persist_snapshot.json", "output", "output/f1.md", "output/f2.md", "output/f3.md", "persist", "plan", "summaries"}, treeOf(t, dir))
}

// syncCounting counts the syncs of the files and directories checkout
// makes in it; with fail set, a file's sync fails with EIO.
type syncCounting struct {
	checkoutDir
	files, dirs int
	fail        bool
}

func (s *syncCounting) OpenFile(name string, flag int, perm fs.FileMode) (checkoutFile, error) {
	f, err := s.checkoutDir.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return countedFile{f, s}, nil
}

func (s *syncCounting) SyncDir(name string) error {
	s.dirs++
	return s.checkoutDir.SyncDir(name)
}

type countedFile struct {
	checkoutFile
	s *syncCounting
}

func (f countedFile) Sync() error {
	f.s.files++
	if f.s.fail {
		return &fs.PathError{Op: "sync", Path: "f", Err: syscall.EIO}
	}
	return f.checkoutFile.Sync()
}

// TestCheckoutSyncs: with Sync every file is synced, and every
// directory, the hidden one included, before the files are put in place;
// without it none is.
func TestCheckoutSyncs(t *testing.T) {
	ctx := context.Background()
	st := openCheckoutStore(t)
	_, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "s"}, RunID: "s",
		Profile: &runs.Profile{VisibleRoots: []string{"output", "plan"}}})
	require.NoError(t, err)
	_, err = st.Runs.Workspace("s", runs.HostScope).Apply(ctx, []runs.Edit{
		{Path: vfs.MustPath("output/a/b/c.md"), Content: []byte("c")},
		{Path: vfs.MustPath("output/a/d.md"), Content: []byte("d")},
		{Path: vfs.MustPath("output/e.md"), Content: []byte("e")},
	})
	require.NoError(t, err)
	for name, sync := range map[string]bool{"Sync": true, "NoSync": false} {
		t.Run(name, func(t *testing.T) {
			counted := &syncCounting{}
			dir := filepath.Join(t.TempDir(), "co")
			res, err := st.checkout(ctx, "s", runs.Live, dir, CheckoutOptions{Sync: sync}, seams(st, nil, func(d checkoutDir) checkoutDir {
				counted.checkoutDir = d
				return counted
			}))
			require.NoError(t, err)
			// input, input/persist_snapshot.json, output, output/a,
			// output/a/b and plan, which holds no file.
			assert.Equal(t, CheckoutResult{Files: 4, Dirs: 5, Bytes: res.Bytes}, res)
			if sync {
				assert.Equal(t, res.Files, counted.files)
				assert.Equal(t, res.Dirs+1, counted.dirs, "each directory and the hidden one")
			} else {
				assert.Zero(t, counted.files)
				assert.Zero(t, counted.dirs)
			}
			assert.Equal(t, []string{"input", "input/persist_snapshot.json", "output", "output/a", "output/a/b", "output/a/b/c.md", "output/a/d.md", "output/e.md", "plan"}, treeOf(t, dir))
		})
	}
}

// TestCheckoutSyncFailureLeavesDirAsItWas: a file whose sync fails is
// store.internal naming the cause, and the checkout leaves DIR as it was.
func TestCheckoutSyncFailureLeavesDirAsItWas(t *testing.T) {
	st := openCheckoutStore(t)
	seedCheckoutRun(t, st, "run_a")
	for name, existing := range map[string]bool{"NewDir": false, "EmptyDir": true} {
		t.Run(name, func(t *testing.T) {
			parent := t.TempDir()
			dir := filepath.Join(parent, "co")
			if existing {
				require.NoError(t, os.Mkdir(dir, 0o755))
			}
			counted := &syncCounting{fail: true}
			_, err := st.checkout(context.Background(), "run_a", runs.Live, dir, CheckoutOptions{Sync: true}, seams(st, nil, func(d checkoutDir) checkoutDir {
				counted.checkoutDir = d
				return counted
			}))
			assert.Equal(t, wserr.Internal, wserr.CodeOf(err), "%v", err)
			assert.ErrorIs(t, err, syscall.EIO)
			if existing {
				assert.Equal(t, []string{"co"}, treeOf(t, parent))
			} else {
				assert.Empty(t, treeOf(t, parent))
			}
		})
	}
}

// TestCheckoutSyncsTheParentsItMade: a checkout into a new DIR whose
// parents it had to make syncs the directory holding each of them, so a
// power loss after it answers cannot lose DIR with a parent; one whose
// sync fails leaves no DIR. Without Sync nothing is synced.
func TestCheckoutSyncsTheParentsItMade(t *testing.T) {
	st := openCheckoutStore(t)
	seedCheckoutRun(t, st, "run_a")
	for _, c := range []struct {
		name       string
		sync, fail bool
	}{{"Sync", true, false}, {"NoSync", false, false}, {"SyncFails", true, true}} {
		t.Run(c.name, func(t *testing.T) {
			top := t.TempDir()
			dir := filepath.Join(top, "a", "b", "co")
			var synced []string
			s := seams(st, nil, nil)
			s.syncPath = func(p string) error {
				synced = append(synced, p)
				if c.fail {
					return syscall.EIO
				}
				return nil
			}
			_, err := st.checkout(context.Background(), "run_a", runs.Live, dir, CheckoutOptions{Sync: c.sync}, s)
			switch {
			case c.fail:
				assert.ErrorIs(t, err, syscall.EIO)
				assert.NoDirExists(t, filepath.Join(top, "a"), "the parents it made are removed")
			case c.sync:
				require.NoError(t, err)
				assert.Equal(t, []string{top, filepath.Join(top, "a")}, synced)
			default:
				require.NoError(t, err)
				assert.Empty(t, synced)
			}
		})
	}
}

// foldingDir is a checkout directory on a file system that does not
// tell case apart, as macOS's and Windows's are by default: every name is
// kept in lower case, so two names that differ only in case are one.
type foldingDir struct{ checkoutDir }

func (f foldingDir) Mkdir(name string, perm fs.FileMode) error {
	return f.checkoutDir.Mkdir(strings.ToLower(name), perm)
}

func (f foldingDir) OpenFile(name string, flag int, perm fs.FileMode) (checkoutFile, error) {
	return f.checkoutDir.OpenFile(strings.ToLower(name), flag, perm)
}

// TestCheckoutOntoAFileSystemThatFoldsCase: names that differ only in
// case are two files on Linux, and one on a case-insensitive file system.
// There a checkout neither merges two directories nor lets one file take
// another's place: it is refused with store.conflict naming the second,
// and DIR is left empty.
func TestCheckoutOntoAFileSystemThatFoldsCase(t *testing.T) {
	ctx := context.Background()
	for name, files := range map[string][]string{
		"Files":       {"output/A.md", "output/a.md"},
		"Directories": {"output/Dir/x.md", "output/dir/y.md"},
		"FileAndDir":  {"output/B", "output/b/c.md"},
	} {
		t.Run(name, func(t *testing.T) {
			st := openCheckoutStore(t)
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
			_, err = st.Checkout(ctx, "case", runs.Live, plain, CheckoutOptions{})
			require.NoError(t, err)
			for _, f := range files {
				b, err := os.ReadFile(plain + "/" + f)
				require.NoError(t, err)
				assert.Equal(t, f, string(b))
			}

			dir := t.TempDir()
			_, err = st.checkout(ctx, "case", runs.Live, dir, CheckoutOptions{}, seams(st, nil, func(d checkoutDir) checkoutDir { return foldingDir{d} }))
			assert.Equal(t, wserr.Conflict, wserr.CodeOf(err), "%v", err)
			assert.ErrorContains(t, err, "differ only in case")
			assert.Empty(t, treeOf(t, dir), "nothing is left in DIR")
		})
	}
}

// deniedDir is a checkout directory the process may not write into.
type deniedDir struct{ checkoutDir }

func (deniedDir) Mkdir(name string, _ fs.FileMode) error {
	return &fs.PathError{Op: "mkdirat", Path: name, Err: syscall.EACCES}
}

func (deniedDir) OpenFile(name string, _ int, _ fs.FileMode) (checkoutFile, error) {
	return nil, &fs.PathError{Op: "openat", Path: name, Err: syscall.EACCES}
}

// TestCheckoutIntoADirectoryItMayNotWrite: an existing empty DIR the
// process may not write into is the caller's mistake, as a DIR it may not
// create is: workspace.invalid_argument, naming the cause.
func TestCheckoutIntoADirectoryItMayNotWrite(t *testing.T) {
	st := openCheckoutStore(t)
	seedCheckoutRun(t, st, "denied")
	dir := t.TempDir()
	_, err := st.checkout(context.Background(), "denied", runs.Live, dir, CheckoutOptions{}, seams(st, nil, func(d checkoutDir) checkoutDir { return deniedDir{d} }))
	assert.Equal(t, wserr.InvalidArgument, wserr.CodeOf(err), "%v", err)
	assert.ErrorContains(t, err, "permission denied")
	assert.Empty(t, treeOf(t, dir))
}

// failingDir is a checkout directory whose file system fails from the
// file-th file on: with err as it is created, or, when err is nil, as it
// is written.
type failingDir struct {
	checkoutDir
	err  error
	file int
	n    *int
}

func (f failingDir) OpenFile(name string, flag int, perm fs.FileMode) (checkoutFile, error) {
	*f.n++
	if *f.n < f.file {
		return f.checkoutDir.OpenFile(name, flag, perm)
	}
	if f.err != nil {
		return nil, &fs.PathError{Op: "openat", Path: name, Err: f.err}
	}
	file, err := f.checkoutDir.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return failingWrites{file}, nil
}

// failingWrites is a file each write to which fails with EIO.
type failingWrites struct{ checkoutFile }

func (failingWrites) Write([]byte) (int, error) {
	return 0, &fs.PathError{Op: "write", Path: "f", Err: syscall.EIO}
}

// TestCheckoutFailuresCarryACode: a failure of DIR's file system that is
// neither a name collision nor a permission is store.internal naming its
// cause, whether a file is created or written, first or midway, and DIR
// is left as it was.
func TestCheckoutFailuresCarryACode(t *testing.T) {
	st := openCheckoutStore(t)
	seedCheckoutRun(t, st, "failing")
	for _, tc := range []struct {
		name string
		err  error
		file int
	}{
		{"CreateFirst", syscall.EIO, 1},
		{"WriteFirst", nil, 1},
		{"CreateMidway", syscall.EIO, 3},
		{"WriteMidway", nil, 3},
		{"FullDiskMidway", syscall.ENOSPC, 2},
	} {
		for name, existing := range map[string]bool{"NewDir": false, "EmptyDir": true} {
			t.Run(tc.name+"/"+name, func(t *testing.T) {
				parent := t.TempDir()
				dir := filepath.Join(parent, "co")
				if existing {
					require.NoError(t, os.Mkdir(dir, 0o755))
				}
				n := 0
				_, err := st.checkout(context.Background(), "failing", runs.Live, dir, CheckoutOptions{}, seams(st, nil, func(d checkoutDir) checkoutDir {
					return failingDir{d, tc.err, tc.file, &n}
				}))
				want := wserr.Internal
				if tc.err == syscall.ENOSPC {
					want = wserr.DiskFull
				}
				assert.Equal(t, want, wserr.CodeOf(err), "%v", err)
				assert.Equal(t, tc.file, n, "the files created")
				if existing {
					assert.Equal(t, []string{"co"}, treeOf(t, parent))
				} else {
					assert.Empty(t, treeOf(t, parent))
				}
			})
		}
	}
}

// otherProgramFirst is a content store whose first read has another
// program save file (a path in DIR) there, making DIR if need be, and
// whose second fails if fail is set.
type otherProgramFirst struct {
	checkoutBlobs
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
	return o.checkoutBlobs.Get(ctx, h)
}

// checkoutBesideOtherProgram checks run "others" out into a new or an
// empty DIR while another program saves file there, and returns DIR and
// the error.
func checkoutBesideOtherProgram(t *testing.T, existing bool, file string, fail bool) (string, error) {
	t.Helper()
	st := openCheckoutStore(t)
	seedCheckoutRun(t, st, "others")
	dir := filepath.Join(t.TempDir(), "co")
	if existing {
		require.NoError(t, os.Mkdir(dir, 0o755))
	}
	_, err := st.checkout(context.Background(), "others", runs.Live, dir, CheckoutOptions{}, seams(st, func(b checkoutBlobs) checkoutBlobs {
		return &otherProgramFirst{checkoutBlobs: b, dir: dir, file: file, fail: fail}
	}, nil))
	return dir, err
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
			dir, err := checkoutBesideOtherProgram(t, existing, "notes.txt", true)
			assert.Equal(t, wserr.Internal, wserr.CodeOf(err), "%v", err)
			onlyOthersFile(t, dir, "notes.txt")
		})
	}
}

// TestCheckoutLeavesWhatOthersMadeWhereItsFilesGo: another program makes
// DIR, or in an empty DIR a directory the workspace has, and saves a
// file there while the checkout writes: putting the checkout's files in
// place would overwrite or merge with it, so the checkout is
// store.conflict, the other program's file stays, and of the checkout
// nothing is left, not even the directories moved into DIR before the
// one taken.
func TestCheckoutLeavesWhatOthersMadeWhereItsFilesGo(t *testing.T) {
	for name, existing := range map[string]bool{"NewDir": false, "EmptyDir": true} {
		t.Run(name, func(t *testing.T) {
			dir, err := checkoutBesideOtherProgram(t, existing, "output/notes.txt", false)
			assert.Equal(t, wserr.Conflict, wserr.CodeOf(err), "%v", err)
			assert.ErrorContains(t, err, "another program put files there")
			onlyOthersFile(t, dir, "output/notes.txt")
		})
	}
}

// changeFirst runs change before the first Get: another process's change
// between checkout's listing and its first file.
type changeFirst struct {
	checkoutBlobs
	change func()
	once   sync.Once
}

func (c *changeFirst) Get(ctx context.Context, h cas.Hash) (io.ReadCloser, error) {
	c.once.Do(c.change)
	return c.checkoutBlobs.Get(ctx, h)
}

// TestCheckoutBesideAChange: the run is deleted, or a file rewritten,
// after checkout read the trees and before it wrote the files, and a gc
// collects the contents: that is run.not_found or store.conflict, never
// store.corrupt, and the directory is left empty.
func TestCheckoutBesideAChange(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		run    string
		change func(st *Store)
		code   wserr.Code
		want   string
	}{
		{"RunDeleted", "run_a", func(st *Store) {
			_, err := st.Runs.CancelAndDeleteRun(ctx, "run_a")
			require.NoError(t, err)
		}, wserr.RunNotFound, `run\.not_found: .*deleted while it was being checked out`},
		{"FileRewritten", "run_b", func(st *Store) {
			// No checkpoint holds the old contents: the run takes none.
			_, err := st.Runs.Workspace("run_b", runs.ModelScope).Write(ctx, vfs.MustPath("output/draft.md"), []byte("second draft\n"), vfs.WriteOptions{})
			require.NoError(t, err)
		}, wserr.Conflict, `output/draft\.md: store\.conflict: the file changed while`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := openCheckoutStore(t)
			seedCheckoutRun(t, st, "run_a")
			off := false
			_, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "chat-b"}, RunID: "run_b",
				Profile: &runs.Profile{AutoCheckpoint: &off}})
			require.NoError(t, err)
			_, err = st.Runs.Workspace("run_b", runs.ModelScope).Write(ctx, vfs.MustPath("output/draft.md"), []byte("first draft\n"), vfs.WriteOptions{})
			require.NoError(t, err)
			dir := t.TempDir()
			_, err = st.checkout(ctx, tc.run, runs.Live, dir, CheckoutOptions{}, seams(st, func(b checkoutBlobs) checkoutBlobs {
				return &changeFirst{checkoutBlobs: b, change: func() {
					tc.change(st)
					_, err := st.GC(ctx, GCOptions{Grace: -1})
					require.NoError(t, err)
				}}
			}, nil))
			assert.Equal(t, tc.code, wserr.CodeOf(err), "%v", err)
			assert.Regexp(t, tc.want, err.Error())
			assert.Empty(t, treeOf(t, dir))
		})
	}
}

// TestCheckoutBesideAChangeOfItsTrees: the live run changes while its
// trees are walked, and a gc without grace collects the directory the
// walk has yet to read (the tree cache no longer holding it): that is
// the run moving on, store.conflict as a file changed meanwhile is, not
// store.corrupt, and the directory is left empty.
func TestCheckoutBesideAChangeOfItsTrees(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 20,000 files")
	}
	ctx := context.Background()
	st := openCheckoutStore(t)
	off := false
	_, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "moved"}, RunID: "moved",
		Profile: &runs.Profile{AutoCheckpoint: &off}})
	require.NoError(t, err)
	// More entries than the tree cache keeps, so the last directory is
	// read from its row again by the walk that writes the files.
	const dirs, per = 200, 100
	edits := make([]runs.Edit, 0, dirs*per)
	for i := range dirs * per {
		edits = append(edits, runs.Edit{Path: vfs.MustPath(fmt.Sprintf("output/d%03d/f%05d.md", i/per, i)), Content: []byte("x")})
	}
	_, err = st.Runs.Workspace("moved", runs.HostScope).Apply(ctx, edits)
	require.NoError(t, err)
	dir := t.TempDir()
	// With Progress the trees are walked once before the files are
	// written, as wsctl does on a terminal.
	_, err = st.checkout(ctx, "moved", runs.Live, dir, CheckoutOptions{Progress: func(int, int) {}}, seams(st, func(b checkoutBlobs) checkoutBlobs {
		return &changeFirst{checkoutBlobs: b, change: func() {
			// The last directory removed: its tree is no other's base.
			gone := make([]runs.Edit, 0, per)
			for i := (dirs - 1) * per; i < dirs*per; i++ {
				gone = append(gone, runs.Edit{Path: vfs.MustPath(fmt.Sprintf("output/d%03d/f%05d.md", i/per, i)), Remove: true})
			}
			_, err := st.Runs.Workspace("moved", runs.HostScope).Apply(ctx, gone)
			require.NoError(t, err)
			_, err = st.GC(ctx, GCOptions{Grace: -1})
			require.NoError(t, err)
		}}
	}, nil))
	assert.Equal(t, wserr.Conflict, wserr.CodeOf(err), "%v", err)
	assert.ErrorContains(t, err, "store.conflict: the run changed while it was being checked out")
	assert.Empty(t, treeOf(t, dir))
}
