package wsstore_test

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/archive"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

// TestReusedBlobIsTouchedWithinItsWait: an import finds one blob the store
// has (garbage an hour old), then streams fresh ones over more than the
// 5 s a re-used blob waits for its touch (the store's clock moves as a
// slow pipe stalls). A gc in another process with the default grace then
// runs: the re-used blob was touched, so the gc keeps it and the import
// succeeds.
func TestReusedBlobIsTouchedWithinItsWait(t *testing.T) {
	ctx := context.Background()
	_, _, arc := fiveFilesArchive(t, storetest.OpenStore(t))

	// The first blob entry's content, and where the later blobs' headers are.
	tr := tar.NewReader(bytes.NewReader(arc))
	var first []byte
	var later []int
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		if !strings.HasPrefix(hdr.Name, "blobs/") {
			continue
		}
		if first == nil {
			first, err = io.ReadAll(tr)
			require.NoError(t, err)
			continue
		}
		later = append(later, bytes.Index(arc, []byte(hdr.Name)))
	}
	require.GreaterOrEqual(t, len(later), 3)

	// Store B holds the first blob only, as garbage an hour old.
	clock := storetest.NewClock()
	dir := t.TempDir()
	b, err := wsstore.Open(ctx, dir, wsstore.Options{Now: clock.Now})
	require.NoError(t, err)
	defer b.Close()
	old, err := b.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "chat", StableChatID: "old"}})
	require.NoError(t, err)
	_, err = b.Runs.Workspace(old.ID, runs.ModelScope).Write(ctx, vfs.MustPath("output/x.md"), first, vfs.WriteOptions{})
	require.NoError(t, err)
	_, err = b.Runs.CancelAndDeleteRun(ctx, old.ID)
	require.NoError(t, err)
	clock.Advance(time.Hour)

	other, err := wsstore.Open(ctx, dir, wsstore.Options{Now: clock.Now})
	require.NoError(t, err)
	defer other.Close()
	// The fresh blobs stream slowly (6 s in all over the stalls before
	// each, a slow pipe); the import then pauses before the last one.
	r := &stallingReader{r: bytes.NewReader(arc), stalls: later[:len(later)-1], stall: 6 * time.Second / time.Duration(len(later)-1), pauseAt: later[len(later)-1],
		paused: make(chan struct{}), resume: make(chan struct{}), clock: clock}
	paused := r.paused
	done := make(chan error, 1)
	go func() {
		_, err := b.Archive.Import(ctx, r, archive.Options{})
		done <- err
	}()
	<-paused // 6 s on the store's clock after the first (re-used) blob was noted, fresh ones since
	_, err = other.GC(ctx, wsstore.GCOptions{})
	require.NoError(t, err)
	close(r.resume)
	err = <-done
	assert.NoError(t, err, "the re-used blob was touched within 5 s, so the gc kept it")
	storetest.RequireSound(t, b)
}

// stallingReader moves clock on by stall when the read reaches each
// offset in stalls, as a slow pipe would, and pauses at pauseAt until
// resume is closed.
type stallingReader struct {
	r              io.Reader
	off            int
	stalls         []int
	stall          time.Duration
	pauseAt        int
	paused, resume chan struct{}
	clock          *storetest.Clock
}

func (s *stallingReader) Read(b []byte) (int, error) {
	next := s.pauseAt
	if len(s.stalls) > 0 {
		next = s.stalls[0]
	}
	if s.off == next {
		if len(s.stalls) > 0 {
			s.stalls = s.stalls[1:]
			s.clock.Advance(s.stall)
		} else {
			close(s.paused)
			<-s.resume
			s.pauseAt = -1
		}
		return s.Read(b)
	}
	if s.off < next && len(b) > next-s.off { // next -1: no more stops
		b = b[:next-s.off]
	}
	n, err := s.r.Read(b)
	s.off += n
	return n, err
}
