package wsstore_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/archive"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// pausingReader yields r's first n bytes, then says so on paused and
// waits for resume before the rest.
type pausingReader struct {
	r              io.Reader
	n              int
	paused, resume chan struct{}
}

func (p *pausingReader) Read(b []byte) (int, error) {
	if p.n == 0 && p.paused != nil {
		close(p.paused)
		p.paused = nil
		<-p.resume
	}
	if p.n > 0 && len(b) > p.n {
		b = b[:p.n]
	}
	n, err := p.r.Read(b)
	if p.n > 0 {
		p.n -= n
	}
	return n, err
}

// streamingContent returns 9 MiB of random bytes (several chunks) and a
// reader of them that pauses after 7 MiB, once the Put reading it has
// committed chunks it has not listed yet.
func streamingContent(seed uint64) ([]byte, *pausingReader) {
	content := make([]byte, 9<<20)
	rng := rand.New(rand.NewPCG(seed, seed+1))
	for i := range content {
		content[i] = byte(rng.Uint32())
	}
	return content, &pausingReader{r: bytes.NewReader(content), n: 7 << 20, paused: make(chan struct{}), resume: make(chan struct{})}
}

// TestGCKeepsAStreamingPut: a gc with no grace, in the process where a
// large Put is streaming, keeps the chunks the Put has committed and not
// yet listed in its blob; the Put then completes and reads back whole.
func TestGCKeepsAStreamingPut(t *testing.T) {
	ctx := context.Background()
	collections := map[string]func(st *wsstore.Store) error{
		"GC": func(st *wsstore.Store) error {
			_, err := st.GC(ctx, wsstore.GCOptions{Grace: -1})
			return err
		},
		"CollectSteps": func(st *wsstore.Store) error {
			_, err := st.CollectSteps(ctx, wsstore.GCStepOptions{GCOptions: wsstore.GCOptions{Grace: -1}})
			return err
		},
	}
	for name, collect := range collections {
		t.Run(name, func(t *testing.T) {
			st := storetest.OpenStore(t)
			content, r := streamingContent(1)
			paused := r.paused
			type result struct {
				h   cas.Hash
				err error
			}
			done := make(chan result, 1)
			go func() {
				h, err := st.Blobs.Put(ctx, r)
				done <- result{h, err}
			}()
			<-paused
			var chunks int
			require.NoError(t, st.DB.View(ctx, func(tx *index.Tx) error {
				return tx.GetContext(ctx, &chunks, `SELECT count(*) FROM chunks`)
			}))
			require.Positive(t, chunks, "the Put has committed chunks that no blob lists yet")

			require.NoError(t, collect(st))
			close(r.resume)
			res := <-done
			require.NoError(t, res.err)
			assert.Equal(t, cas.Sum(content), res.h)
			got, err := st.Blobs.ReadAll(ctx, res.h)
			require.NoError(t, err)
			assert.True(t, bytes.Equal(content, got), "the content reads back whole")
		})
	}
}

// TestGCElsewhereFailsAStreamingPutClearly: a gc with no grace through
// another handle on the store (as another process would be) cannot see
// the Put streaming here, and collects its chunks; the Put then fails with
// store.busy saying so, stores nothing, and succeeds when written again.
func TestGCElsewhereFailsAStreamingPutClearly(t *testing.T) {
	ctx := context.Background()
	st := storetest.OpenStore(t)
	other, err := wsstore.Open(ctx, st.Dir, wsstore.Options{})
	require.NoError(t, err)
	defer other.Close()
	content, r := streamingContent(3)
	paused := r.paused
	done := make(chan error, 1)
	go func() {
		_, err := st.Blobs.Put(ctx, r)
		done <- err
	}()
	<-paused
	_, err = other.GC(ctx, wsstore.GCOptions{Grace: -1})
	require.NoError(t, err)
	close(r.resume)
	err = <-done
	require.Error(t, err)
	assert.Equal(t, wserr.Busy, wserr.CodeOf(err), "%v", err)
	assert.Contains(t, err.Error(), "write it again")
	has, err := st.Blobs.Has(ctx, cas.Sum(content))
	require.NoError(t, err)
	assert.False(t, has, "nothing was stored")

	h, err := st.Blobs.Put(ctx, bytes.NewReader(content))
	require.NoError(t, err)
	assert.Equal(t, cas.Sum(content), h)
}

// fiveFilesArchive writes five files into a new run of st and exports
// the store: the run, the files by path and the archive.
func fiveFilesArchive(t *testing.T, st *wsstore.Store) (runs.Run, map[string]string, []byte) {
	t.Helper()
	ctx := context.Background()
	run, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "chat", StableChatID: "c1"}})
	require.NoError(t, err)
	ws := st.Runs.Workspace(run.ID, runs.ModelScope)
	files := map[string]string{}
	for i := range 5 {
		p := fmt.Sprintf("output/f%d.md", i)
		files[p] = strings.Repeat(fmt.Sprintf("line %d of file %d\n", i, i), 200+i)
		_, err := ws.Write(ctx, vfs.MustPath(p), []byte(files[p]), vfs.WriteOptions{})
		require.NoError(t, err)
	}
	var arc bytes.Buffer
	_, err = st.Archive.Export(ctx, &arc, archive.Scope{All: true}, archive.Options{})
	require.NoError(t, err)
	return run, files, arc.Bytes()
}

// TestGCKeepsAnImportInProgress: an import commits its blobs and trees
// before the rows that reference them; a gc with no grace in the same
// process between the two keeps them, and the imported run reads back
// whole with fsck clean.
func TestGCKeepsAnImportInProgress(t *testing.T) {
	ctx := context.Background()
	run, files, arc := fiveFilesArchive(t, storetest.OpenStore(t))
	// Pause the import where its rows begin: the objects are committed.
	at := bytes.Index(arc, []byte("records.jsonl"))
	require.Positive(t, at)

	dst := storetest.OpenStore(t)
	r := &pausingReader{r: bytes.NewReader(arc), n: at, paused: make(chan struct{}), resume: make(chan struct{})}
	paused := r.paused
	done := make(chan error, 1)
	go func() {
		_, err := dst.Archive.Import(ctx, r, archive.Options{})
		done <- err
	}()
	<-paused
	var blobs int
	require.NoError(t, dst.DB.View(ctx, func(tx *index.Tx) error {
		return tx.GetContext(ctx, &blobs, `SELECT count(*) FROM blobs`)
	}))
	require.Positive(t, blobs, "the import has committed objects no row references yet")
	_, err := dst.GC(ctx, wsstore.GCOptions{Grace: -1})
	require.NoError(t, err)
	close(r.resume)
	require.NoError(t, <-done)

	got := dst.Runs.Workspace(run.ID, runs.HostScope)
	for p, want := range files {
		res, err := got.Read(ctx, vfs.MustPath(p), vfs.ReadOptions{})
		require.NoError(t, err, p)
		assert.Equal(t, want, string(res.Content), p)
	}
}

// TestImportBesideAGCElsewhere: an import re-using content a deletion
// left an hour ago, with a gc in another Store (another process) between
// its objects and its rows. With the gc's default grace the re-used blobs
// were touched as the import found them, so the gc keeps them and the
// import reads back whole; with no grace the gc takes them, and the
// import fails with store.busy, leaving nothing visible, rather than
// commit rows naming what is gone. Importing again then stores them anew.
func TestImportBesideAGCElsewhere(t *testing.T) {
	for _, grace := range []time.Duration{0, -1} {
		t.Run(fmt.Sprintf("grace=%v", grace), func(t *testing.T) {
			ctx := context.Background()
			clock := storetest.NewClock()
			dir := t.TempDir()
			st, err := wsstore.Open(ctx, dir, wsstore.Options{Now: clock.Now})
			require.NoError(t, err)
			defer st.Close()
			run, files, arc := fiveFilesArchive(t, st)
			_, err = st.Runs.CancelAndDeleteRun(ctx, run.ID)
			require.NoError(t, err)
			clock.Advance(time.Hour)

			other, err := wsstore.Open(ctx, dir, wsstore.Options{Now: clock.Now})
			require.NoError(t, err)
			defer other.Close()
			at := bytes.Index(arc, []byte("records.jsonl"))
			require.Positive(t, at)
			r := &pausingReader{r: bytes.NewReader(arc), n: at, paused: make(chan struct{}), resume: make(chan struct{})}
			paused := r.paused
			done := make(chan error, 1)
			go func() {
				_, err := st.Archive.Import(ctx, r, archive.Options{})
				done <- err
			}()
			<-paused
			rep, err := other.GC(ctx, wsstore.GCOptions{Grace: grace})
			require.NoError(t, err)
			close(r.resume)
			err = <-done

			if grace == 0 { // the default
				require.NoError(t, err)
				assert.Zero(t, rep.Freed.Blobs, "the re-used blobs were touched")
			} else {
				require.Error(t, err)
				assert.Equal(t, wserr.Busy, wserr.CodeOf(err), "%v", err)
				require.Positive(t, rep.Freed.Blobs)
				_, err := st.Runs.Run(ctx, run.ID)
				assert.Equal(t, wserr.RunNotFound, wserr.CodeOf(err), "nothing visible")
				storetest.RequireSound(t, st)
				_, err = st.Archive.Import(ctx, bytes.NewReader(arc), archive.Options{})
				require.NoError(t, err)
			}
			got := st.Runs.Workspace(run.ID, runs.HostScope)
			for p, want := range files {
				res, err := got.Read(ctx, vfs.MustPath(p), vfs.ReadOptions{})
				require.NoError(t, err, p)
				assert.Equal(t, want, string(res.Content), p)
			}
			storetest.RequireSound(t, st)
		})
	}
}
