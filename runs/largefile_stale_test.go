package runs_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// getHook is a blob storage that calls hook before each blob Get, one
// call at a time (a Get the hook makes itself goes straight through): a
// test changes a file there while a streamed append or patch reads it.
type getHook struct {
	cas.Storage
	hook atomic.Pointer[func(h cas.Hash)]
	busy atomic.Bool
}

func (s *getHook) Get(ctx context.Context, tx *index.Tx, kind cas.Kind, h cas.Hash, fn func(o cas.Object) error) error {
	if f := s.hook.Load(); f != nil && kind == cas.KindBlob && s.busy.CompareAndSwap(false, true) {
		(*f)(h)
		s.busy.Store(false)
	}
	return s.Storage.Get(ctx, tx, kind, h, fn)
}

// largeWorkspace opens a store over a getHook and writes content to p in
// a new run.
func largeWorkspace(t *testing.T, p vfs.Path, content []byte) (*wsstore.Store, *runs.Workspace, *getHook) {
	t.Helper()
	ctx := context.Background()
	hooked := &getHook{Storage: cas.NewSQLiteStorage()}
	st := storetest.OpenStoreWith(t, wsstore.Options{CAS: cas.Options{Storage: hooked}})
	t.Cleanup(func() { hooked.hook.Store(nil) })
	_, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "big"}, RunID: "big"})
	require.NoError(t, err)
	ws := st.Runs.Workspace("big", runs.HostScope)
	_, err = ws.WriteFrom(ctx, p, bytes.NewReader(content), vfs.WriteOptions{})
	require.NoError(t, err)
	return st, ws, hooked
}

// TestLargeAppendWithoutHashOutlastsChanges: an append to a large file
// with no ExpectedHash, built again each time another writer changed the
// file while it streamed (more often than the old bound of three), lands
// after the others, and its event records the size it made.
func TestLargeAppendWithoutHashOutlastsChanges(t *testing.T) {
	ctx := context.Background()
	p := vfs.MustPath("output/log.txt")
	content := numberedLines(9 << 20)
	st, ws, hooked := largeWorkspace(t, p, content)
	fired := 0
	hook := func(cas.Hash) {
		if fired < 5 {
			fired++
			_, err := ws.Write(ctx, p, fmt.Appendf(nil, "other %d\n", fired), vfs.WriteOptions{Mode: vfs.Append})
			require.NoError(t, err)
		}
	}
	hooked.hook.Store(&hook)
	fi, err := ws.Write(ctx, p, []byte("mine\n"), vfs.WriteOptions{Mode: vfs.Append})
	hooked.hook.Store(nil)
	require.NoError(t, err)
	assert.Equal(t, 5, fired)

	want := append(content, "other 1\nother 2\nother 3\nother 4\nother 5\nmine\n"...)
	assert.Equal(t, int64(len(want)), fi.Size)
	assert.Equal(t, cas.Sum(want), fi.Hash)
	evs, err := st.Journal.Page(ctx, "big", journal.PageQuery{Limit: journal.MaxLimit})
	require.NoError(t, err)
	var written journal.FileWritten
	for _, ev := range evs {
		if ev.Type == journal.WorkspaceFileWritten {
			require.NoError(t, json.Unmarshal(ev.Payload, &written))
		}
	}
	assert.Equal(t, int64(len(want)), written.Bytes, "the size of the version it made")
}

// TestLargePatchWithoutHashChecksTheNewContent: a patch of a large file
// with no ExpectedHash that is built again because the file changed is
// checked against the new content: a second occurrence appended meanwhile
// makes it ambiguous, and nothing is replaced.
func TestLargePatchWithoutHashChecksTheNewContent(t *testing.T) {
	ctx := context.Background()
	p := vfs.MustPath("output/log.txt")
	content := append(numberedLines(9<<20), "MARK\n"...)
	_, ws, hooked := largeWorkspace(t, p, content)
	fired := false
	hook := func(cas.Hash) {
		if !fired {
			fired = true
			_, err := ws.Write(ctx, p, []byte("MARK\n"), vfs.WriteOptions{Mode: vfs.Append})
			require.NoError(t, err)
		}
	}
	hooked.hook.Store(&hook)
	_, err := ws.Patch(ctx, p, "MARK", "DONE", vfs.PatchOptions{})
	hooked.hook.Store(nil)
	assert.True(t, wserr.Is(err, wserr.PatchOldStringNotUnique), "%v", err)

	rc, _, err := ws.Open(ctx, p)
	require.NoError(t, err)
	defer rc.Close()
	var got bytes.Buffer
	_, err = got.ReadFrom(rc)
	require.NoError(t, err)
	assert.Equal(t, 2, bytes.Count(got.Bytes(), []byte("MARK\n")))
	assert.Zero(t, bytes.Count(got.Bytes(), []byte("DONE")))
}

// TestConcurrentLargeAppendsAllLand: writers on two Stores over one
// directory (two processes) append to one large file at once with no
// ExpectedHash: every append lands, once.
func TestConcurrentLargeAppendsAllLand(t *testing.T) {
	ctx := context.Background()
	p := vfs.MustPath("output/log.txt")
	content := numberedLines(9 << 20)
	st, _, _ := largeWorkspace(t, p, content)
	other, err := wsstore.Open(ctx, st.Dir, wsstore.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, other.Close()) })

	const writers, each = 4, 5
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for i := range writers {
		s := st
		if i%2 == 1 {
			s = other
		}
		ws := s.Runs.Workspace("big", runs.HostScope)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range each {
				_, err := ws.Write(ctx, p, fmt.Appendf(nil, "writer %d token %d\n", i, j), vfs.WriteOptions{Mode: vfs.Append})
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}
	fi, err := st.Runs.Workspace("big", runs.HostScope).Stat(ctx, p)
	require.NoError(t, err)
	added := 0
	for i := range writers {
		for j := range each {
			added += len(fmt.Sprintf("writer %d token %d\n", i, j))
		}
	}
	assert.Equal(t, int64(len(content)+added), fi.Size)
}

// TestLargeChangePastTheRunCapStoresNothing: an append or a patch of a
// large file that would take the run past its MaxRunBytes is refused
// before its new version is stored, so no chunk of it is left behind to
// take the store's room until gc.
func TestLargeChangePastTheRunCapStoresNothing(t *testing.T) {
	e := newLifecycleEnv(t)
	r := e.create("capped", runs.CreateRequest{Profile: &runs.Profile{MaxRunBytes: 10 << 20}})
	ws := e.svc.Workspace(r.ID, runs.ModelScope)
	p := vfs.MustPath("output/big.bin")
	bytesOf := func(seed byte, n int64) []byte { // text: a patch needs it
		b, err := io.ReadAll(noise(seed, n/2))
		require.NoError(t, err)
		return []byte(hex.EncodeToString(b))
	}
	content := bytesOf(7, 9<<20)
	copy(content[1<<20:], "MARKER")
	_, err := ws.WriteFrom(e.ctx, p, bytes.NewReader(content), vfs.WriteOptions{})
	require.NoError(t, err)
	before := rowCounts(e)

	_, err = ws.Write(e.ctx, p, bytesOf(8, 2<<20), vfs.WriteOptions{Mode: vfs.Append})
	require.True(t, wserr.Is(err, wserr.SizeLimitExceeded), "append past the run's cap: %v", err)
	assert.Equal(t, before, rowCounts(e), "a refused append stores nothing")

	_, err = ws.Patch(e.ctx, p, "MARKER", string(bytesOf(9, 2<<20)), vfs.PatchOptions{})
	require.True(t, wserr.Is(err, wserr.SizeLimitExceeded), "patch past the run's cap: %v", err)
	assert.Equal(t, before, rowCounts(e), "a refused patch stores nothing")

	// Within the cap both still land.
	_, err = ws.Write(e.ctx, p, []byte("tail"), vfs.WriteOptions{Mode: vfs.Append})
	require.NoError(t, err)
	_, err = ws.Patch(e.ctx, p, "MARKER", "marker", vfs.PatchOptions{})
	require.NoError(t, err)
}
