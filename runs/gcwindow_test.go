package runs_test

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/archive"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// TestGCBetweenPutAndItsChange: a streamed write stores its content with
// Put before the transaction that references it; a gc with no grace in
// the same process between the two keeps the content, and the write, a
// large file's and an append to it, commit and read back whole.
func TestGCBetweenPutAndItsChange(t *testing.T) {
	ctx := context.Background()
	st := storetest.OpenStore(t)
	blobs := &storetest.GCAfterPut{Store: st.Blobs, TB: t, GC: st}
	d := deps(st)
	d.Blobs = blobs
	svc := runs.New(d, runs.Options{})
	_, err := svc.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "chat", StableChatID: "c1"}, RunID: "r"})
	require.NoError(t, err)
	ws := svc.Workspace("r", runs.HostScope)

	note := vfs.MustPath("output/note.md")
	_, err = ws.WriteFrom(ctx, note, bytes.NewReader([]byte("a streamed note\n")), vfs.WriteOptions{})
	require.NoError(t, err, "the streamed write")
	res, err := ws.Read(ctx, note, vfs.ReadOptions{})
	require.NoError(t, err)
	assert.Equal(t, "a streamed note\n", string(res.Content))

	big := vfs.MustPath("output/big.log")
	content := numberedLines(runs.MaxReadBytes + 1<<20)
	_, err = ws.WriteFrom(ctx, big, bytes.NewReader(content), vfs.WriteOptions{})
	require.NoError(t, err, "the large streamed write")
	more := []byte("one more line\n")
	_, err = ws.Write(ctx, big, more, vfs.WriteOptions{Mode: vfs.Append})
	require.NoError(t, err, "the append to the large file")
	require.Equal(t, 3, blobs.GCs, "a gc ran after each Put")

	rc, _, err := ws.Open(ctx, big)
	require.NoError(t, err)
	got, err := io.ReadAll(rc)
	require.NoError(t, rc.Close())
	require.NoError(t, err)
	assert.Equal(t, cas.Sum(append(content, more...)), cas.Sum(got), "the large file reads back whole")

	rep, err := st.Fsck(ctx, nil)
	require.NoError(t, err)
	assert.True(t, rep.OK(), "%+v", rep.Problems)
}

// TestNilReaders: a nil reader is a coded invalid argument wherever a
// stream is taken, never a panic, and stores nothing.
func TestNilReaders(t *testing.T) {
	ctx := context.Background()
	st := storetest.OpenStore(t)
	_, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "chat", StableChatID: "c1"}, RunID: "r"})
	require.NoError(t, err)
	_, err = st.Runs.Workspace("r", runs.HostScope).WriteFrom(ctx, vfs.MustPath("output/n.md"), nil, vfs.WriteOptions{})
	assert.True(t, wserr.Is(err, wserr.InvalidArgument), "WriteFrom: %v", err)
	_, err = st.Blobs.Put(ctx, nil)
	assert.True(t, wserr.Is(err, wserr.InvalidArgument), "Put: %v", err)
	_, err = st.Actors.Upload(ctx, "alice", "a.md", nil)
	assert.True(t, wserr.Is(err, wserr.InvalidArgument), "Upload: %v", err)
	_, err = st.Archive.Import(ctx, nil, archive.Options{})
	assert.True(t, wserr.Is(err, wserr.InvalidArgument), "Import: %v", err)
}

// TestGCElsewhereBetweenPutAndItsChange: a gc with no grace through
// another handle (as another process would run it) cannot see this
// process's holds and takes the content a streamed write stored; the write
// then fails with store.busy, changes nothing, and succeeds sent again.
func TestGCElsewhereBetweenPutAndItsChange(t *testing.T) {
	ctx := context.Background()
	st := storetest.OpenStore(t)
	other, err := wsstore.Open(ctx, st.Dir, wsstore.Options{})
	require.NoError(t, err)
	defer other.Close()
	blobs := &storetest.GCAfterPut{Store: st.Blobs, TB: t, GC: other}
	d := deps(st)
	d.Blobs = blobs
	svc := runs.New(d, runs.Options{})
	_, err = svc.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "chat", StableChatID: "c1"}, RunID: "r"})
	require.NoError(t, err)
	ws := svc.Workspace("r", runs.HostScope)
	note := vfs.MustPath("output/note.md")
	_, err = ws.WriteFrom(ctx, note, strings.NewReader("a streamed note\n"), vfs.WriteOptions{})
	require.Error(t, err)
	assert.True(t, wserr.Is(err, wserr.Busy), "%v", err)
	assert.Contains(t, err.Error(), "write it again")
	_, err = ws.Stat(ctx, note)
	assert.True(t, wserr.Is(err, wserr.FileNotFound), "nothing was changed: %v", err)

	_, err = st.Runs.Workspace("r", runs.HostScope).WriteFrom(ctx, note, strings.NewReader("a streamed note\n"), vfs.WriteOptions{})
	require.NoError(t, err, "sent again")
}

// TestStreamOfADeletedRun: a stream of a run's file whose run is deleted,
// and whose content a gc collects, before the stream ends fails with
// store.conflict: the store is sound, only the file is gone.
func TestStreamOfADeletedRun(t *testing.T) {
	ctx := context.Background()
	st := storetest.OpenStore(t)
	_, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "chat", StableChatID: "c1"}, RunID: "r"})
	require.NoError(t, err)
	ws := st.Runs.Workspace("r", runs.HostScope)
	big := vfs.MustPath("output/big.log")
	_, err = ws.WriteFrom(ctx, big, bytes.NewReader(numberedLines(runs.MaxReadBytes+1<<20)), vfs.WriteOptions{})
	require.NoError(t, err)
	rc, _, err := ws.Open(ctx, big)
	require.NoError(t, err)
	defer rc.Close()
	_, err = io.ReadFull(rc, make([]byte, 64<<10))
	require.NoError(t, err)

	require.NoError(t, st.Runs.SetStatus(ctx, "r", runs.Cancelled, "test"))
	require.NoError(t, st.Runs.DeleteRun(ctx, "r"))
	rep, err := st.GC(ctx, wsstore.GCOptions{Grace: -1})
	require.NoError(t, err)
	require.Positive(t, rep.Freed.Chunks)
	_, err = io.Copy(io.Discard, rc)
	assert.Equal(t, wserr.Conflict, wserr.CodeOf(err), "error: %v", err)
}
