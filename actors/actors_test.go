package actors_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/actors"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

func openStore(t *testing.T) *wsstore.Store {
	return storetest.OpenStoreWith(t, wsstore.Options{Now: storetest.NewClock().Now})
}

func upload(t *testing.T, s *wsstore.Store, actor, path, content string) actors.Change {
	t.Helper()
	c, err := s.Actors.Upload(context.Background(), actor, path, strings.NewReader(content))
	require.NoError(t, err)
	return c
}

func download(t *testing.T, s *wsstore.Store, actor, path string) string {
	t.Helper()
	rc, _, err := s.Actors.Download(context.Background(), actor, path)
	require.NoError(t, err)
	defer rc.Close()
	b, err := io.ReadAll(rc)
	require.NoError(t, err)
	return string(b)
}

func paths(ls []vfs.Listed) []string {
	var out []string
	for _, l := range ls {
		out = append(out, l.Path.String())
	}
	return out
}

func TestUploadDownloadList(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	c := upload(t, s, "alice", "reports/weekly.md", "# weekly")
	assert.Equal(t, int64(1), c.Seq)
	assert.Equal(t, actors.OpUpload, c.Op)
	assert.Equal(t, int64(8), c.Bytes)
	upload(t, s, "alice", "reports/2026/q1.md", "q1")
	upload(t, s, "alice", "notes/meeting.md", "meeting")
	upload(t, s, "bob", "drafts/contract-v2.md", "contract")

	assert.Equal(t, "# weekly", download(t, s, "alice", "reports/weekly.md"))

	ls, err := s.Actors.List(ctx, "alice", "", 2)
	require.NoError(t, err)
	assert.Equal(t, []string{"notes", "notes/meeting.md", "reports", "reports/2026", "reports/weekly.md"}, paths(ls))
	ls, err = s.Actors.List(ctx, "alice", "reports/", 1)
	require.NoError(t, err)
	assert.Equal(t, []string{"reports/2026", "reports/weekly.md"}, paths(ls))

	t.Run("ActorsAreIsolated", func(t *testing.T) {
		ls, err := s.Actors.List(ctx, "bob", ".", 5)
		require.NoError(t, err)
		assert.Equal(t, []string{"drafts", "drafts/contract-v2.md"}, paths(ls))
		_, _, err = s.Actors.Download(ctx, "bob", "reports/weekly.md")
		assert.True(t, wserr.Is(err, wserr.FileNotFound), "%v", err)
	})
	t.Run("UnknownActorIsEmpty", func(t *testing.T) {
		ls, err := s.Actors.List(ctx, "carol", "", 1)
		require.NoError(t, err)
		assert.Empty(t, ls)
		st, err := s.Actors.Stats(ctx, "carol")
		require.NoError(t, err)
		assert.Zero(t, st.Files)
	})
	t.Run("SameContentRecordsNothing", func(t *testing.T) {
		c := upload(t, s, "alice", "notes/meeting.md", "meeting")
		assert.Zero(t, c.Seq)
	})
	t.Run("ErrPathIsDirectory", func(t *testing.T) {
		_, _, err := s.Actors.Download(ctx, "alice", "reports")
		assert.True(t, wserr.Is(err, wserr.PathIsDirectory), "%v", err)
		// Refused before the content is read: none of it is.
		r := strings.NewReader("x")
		_, err = s.Actors.Upload(ctx, "alice", "reports", r)
		assert.True(t, wserr.Is(err, wserr.PathIsDirectory), "%v", err)
		assert.Equal(t, 1, r.Len(), "nothing of the content read")
	})
	t.Run("ErrNotADirectory", func(t *testing.T) {
		for _, p := range []string{"notes/meeting.md/x", "notes/meeting.md/x/y"} {
			r := strings.NewReader("x")
			_, err := s.Actors.Upload(ctx, "alice", p, r)
			assert.True(t, wserr.Is(err, wserr.NotADirectory), "%s: %v", p, err)
			assert.Equal(t, 1, r.Len(), "%s: nothing of the content read", p)
		}
	})
	t.Run("ErrUploadRoot", func(t *testing.T) {
		_, err := s.Actors.Upload(ctx, "alice", ".", strings.NewReader("x"))
		assert.True(t, wserr.Is(err, wserr.InvalidPath), "%v", err)
	})
}

func TestParseActor(t *testing.T) {
	for _, ok := range []string{"alice", "bob-2", "user@example.com", "Ünïcode"} {
		_, err := actors.ParseActor(ok)
		assert.NoError(t, err, ok)
	}
	for _, bad := range []string{"", ".", "..", "a/b", `a\b`, "../alice", "a\x00", "CON", "nul.txt", "a:b", "alice.", "alice ",
		"a\u202eb", "a\u200bb", "e\u0301", strings.Repeat("a", actors.MaxActorLen+1)} {
		_, err := actors.ParseActor(bad)
		assert.True(t, wserr.Is(err, wserr.InvalidActor), "%q: %v", bad, err)
	}
	s := openStore(t)
	_, err := s.Actors.Upload(context.Background(), "../etc", "x", strings.NewReader("x"))
	assert.True(t, wserr.Is(err, wserr.InvalidActor), "%v", err)
	_, err = s.Actors.List(context.Background(), "a/b", "", 1)
	assert.True(t, wserr.Is(err, wserr.InvalidActor), "%v", err)
}

func TestDeleteAndPrefix(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	for _, p := range []string{"temp/a.txt", "temp/sub/b.txt", "temp.md", "temp2/c.txt", "keep/temp.md", "reports/2025-01.md", "reports/2025-02.md", "reports/2026-01.md"} {
		upload(t, s, "alice", p, p)
	}
	c, err := s.Actors.DeleteByPrefix(ctx, "alice", "temp/")
	require.NoError(t, err)
	assert.Equal(t, int64(2), c.Files)
	assert.Equal(t, actors.OpDeletePrefix, c.Op)
	c, err = s.Actors.DeleteByPrefix(ctx, "alice", "reports/2025-")
	require.NoError(t, err)
	assert.Equal(t, int64(2), c.Files)
	c, err = s.Actors.DeleteByPrefix(ctx, "alice", "temp")
	require.NoError(t, err)
	assert.Equal(t, int64(2), c.Files, "temp.md and temp2/c.txt")
	c, err = s.Actors.DeleteByPrefix(ctx, "alice", "nothing/here")
	require.NoError(t, err)
	assert.Zero(t, c.Seq)
	ls, err := s.Actors.List(ctx, "alice", "", 5)
	require.NoError(t, err)
	assert.Equal(t, []string{"keep", "keep/temp.md", "reports", "reports/2026-01.md"}, paths(ls))

	for _, empty := range []string{"", "/", "//"} {
		_, err = s.Actors.DeleteByPrefix(ctx, "alice", empty)
		assert.True(t, wserr.Is(err, wserr.InvalidPath), "%v", err)
		assert.ErrorContains(t, err, "whole space", "%q", empty)
	}
	_, err = s.Actors.DeleteByPrefix(ctx, "alice", "../")
	assert.True(t, wserr.Is(err, wserr.InvalidPath), "%v", err)

	c, err = s.Actors.Delete(ctx, "alice", "reports")
	require.NoError(t, err)
	assert.Equal(t, int64(1), c.Files)
	_, err = s.Actors.Delete(ctx, "alice", "reports")
	assert.True(t, wserr.Is(err, wserr.FileNotFound), "%v", err)
}

func TestJournalAndDiff(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	upload(t, s, "alice", "a.md", "one")
	upload(t, s, "alice", "b.md", "two")
	upload(t, s, "alice", "a.md", "one, edited")
	_, err := s.Actors.Delete(ctx, "alice", "b.md")
	require.NoError(t, err)

	cs, err := s.Actors.Changes(ctx, "alice", 0, 0)
	require.NoError(t, err)
	require.Len(t, cs, 4)
	for i, c := range cs {
		assert.Equal(t, int64(i+1), c.Seq)
		assert.False(t, c.Root.IsZero())
	}
	assert.Equal(t, []actors.Op{actors.OpUpload, actors.OpUpload, actors.OpUpload, actors.OpDelete}, []actors.Op{cs[0].Op, cs[1].Op, cs[2].Op, cs[3].Op})
	assert.True(t, cs[1].Created.Before(cs[2].Created), "stamped by the injected clock")
	page, err := s.Actors.Changes(ctx, "alice", 2, 1)
	require.NoError(t, err)
	require.Len(t, page, 1)
	assert.Equal(t, int64(3), page[0].Seq)

	d, err := s.Actors.Diff(ctx, "alice", 2, 4)
	require.NoError(t, err)
	require.Len(t, d, 2)
	assert.Equal(t, "a.md", d[0].Path.String())
	assert.Equal(t, vfs.Modified, d[0].Op)
	assert.Equal(t, "b.md", d[1].Path.String())
	assert.Equal(t, vfs.Deleted, d[1].Op)

	ls, err := s.Actors.ListAt(ctx, "alice", 2, "", 1)
	require.NoError(t, err)
	assert.Equal(t, []string{"a.md", "b.md"}, paths(ls))

	t.Run("GCPrunesOldVersions", func(t *testing.T) {
		rep, err := s.Actors.GC(ctx, actors.GCOptions{KeepVersions: 2})
		require.NoError(t, err)
		assert.Equal(t, int64(2), rep.Pruned)
		_, err = s.Actors.Diff(ctx, "alice", 1, 4)
		assert.True(t, wserr.Is(err, wserr.NotFound), "%v", err)
		_, err = s.Actors.Diff(ctx, "alice", 3, 4)
		assert.NoError(t, err)
		cs, err := s.Actors.Changes(ctx, "alice", 0, 0)
		require.NoError(t, err)
		require.Len(t, cs, 5, "the journal keeps every change and records the gc")
		assert.Equal(t, actors.OpGC, cs[4].Op)
		rep, err = s.Actors.GC(ctx, actors.GCOptions{KeepVersions: 2})
		require.NoError(t, err)
		assert.Zero(t, rep.Pruned, "a second gc has nothing to prune and records nothing")
		st, err := s.Actors.Stats(ctx, "alice")
		require.NoError(t, err)
		assert.Equal(t, int64(5), st.Seq)
		assert.Equal(t, int64(2), st.Versions)
	})
}

// TestStoreGCKeepsActorSpaces shows actor spaces are gc roots: the store's
// gc keeps every live file, and frees what only pruned versions held.
func TestStoreGCKeepsActorSpaces(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	upload(t, s, "alice", "a.md", "first version")
	upload(t, s, "alice", "a.md", "second version")
	upload(t, s, "bob", "b.md", "bob's")
	rep, err := s.GC(ctx, wsstore.GCOptions{Grace: -1})
	require.NoError(t, err)
	assert.Zero(t, rep.Freed.Blobs, "every version is still held")

	_, rep, err = s.ActorGC(ctx, actors.GCOptions{}, wsstore.GCOptions{Grace: -1})
	require.NoError(t, err)
	assert.Equal(t, 1, rep.Freed.Blobs, "the first version of a.md only a pruned version held")
	assert.Equal(t, "second version", download(t, s, "alice", "a.md"))
	assert.Equal(t, "bob's", download(t, s, "bob", "b.md"))
}

// TestCellSession is seed 004's session: two actors, a 200 MiB upload
// generated as it streams, 1,000 small files, lists at depth 2, stats,
// delete by prefix and gc.
func TestCellSession(t *testing.T) {
	if testing.Short() {
		t.Skip("uploads 200 MiB")
	}
	ctx := context.Background()
	s := openStore(t)
	const big = 200 << 20
	gen := storetest.Text(big)
	var c actors.Change
	peak := storetest.HeapGrowth(func() {
		var err error
		c, err = s.Actors.Upload(ctx, "alice", "data/big.bin", gen)
		require.NoError(t, err)
	})
	assert.Equal(t, int64(big), c.Bytes)
	t.Logf("heap grew by at most %d MiB during the upload", peak>>20)
	assert.Less(t, peak, uint64(64<<20), "the upload streams: heap stays bounded whatever the size")
	for i := range 1000 {
		upload(t, s, "bob", fmt.Sprintf("notes/%02d/note-%04d.md", i%10, i), fmt.Sprintf("note %d\n", i))
	}
	upload(t, s, "alice", "reports/weekly.md", "weekly")

	ls, err := s.Actors.List(ctx, "bob", "", 2)
	require.NoError(t, err)
	assert.Len(t, ls, 11, "notes and its ten directories")
	ls, err = s.Actors.List(ctx, "bob", "notes/03", 2)
	require.NoError(t, err)
	assert.Len(t, ls, 100)

	st, err := s.Actors.Stats(ctx, "alice")
	require.NoError(t, err)
	assert.Equal(t, int64(2), st.Files)
	assert.Equal(t, int64(big+6), st.Bytes)
	st, err = s.Actors.Stats(ctx, "bob")
	require.NoError(t, err)
	assert.Equal(t, int64(1000), st.Files)

	// The download streams and is checked against the generator's bytes.
	rc, e, err := s.Actors.Download(ctx, "alice", "data/big.bin")
	require.NoError(t, err)
	assert.Equal(t, int64(big), e.Size)
	var n int64
	peak = storetest.HeapGrowth(func() {
		n, err = io.Copy(&compareWriter{t: t, want: storetest.Text(big)}, rc)
		require.NoError(t, err)
	})
	assert.Less(t, peak, uint64(64<<20), "the download streams")
	require.NoError(t, rc.Close())
	assert.Equal(t, int64(big), n)

	c, err = s.Actors.DeleteByPrefix(ctx, "bob", "notes/0")
	require.NoError(t, err)
	assert.Equal(t, int64(1000), c.Files)
	c, err = s.Actors.DeleteByPrefix(ctx, "alice", "data/")
	require.NoError(t, err)
	assert.Equal(t, int64(1), c.Files)

	_, rep, err := s.ActorGC(ctx, actors.GCOptions{}, wsstore.GCOptions{Grace: -1})
	require.NoError(t, err)
	assert.Positive(t, rep.Freed.Chunks, "the big file's chunks are freed")
	assert.Equal(t, "weekly", download(t, s, "alice", "reports/weekly.md"))
	st, err = s.Actors.Stats(ctx, "bob")
	require.NoError(t, err)
	assert.Zero(t, st.Files)
}

// compareWriter fails the test at the first byte that differs from want.
type compareWriter struct {
	t    *testing.T
	want io.Reader
	buf  []byte
}

func (w *compareWriter) Write(b []byte) (int, error) {
	if cap(w.buf) < len(b) {
		w.buf = make([]byte, len(b))
	}
	want := w.buf[:len(b)]
	_, err := io.ReadFull(w.want, want)
	require.NoError(w.t, err)
	if !bytes.Equal(want, b) {
		return 0, fmt.Errorf("downloaded bytes differ from the uploaded ones")
	}
	return len(b), nil
}

// TestGCBetweenUploadPutAndItsChange: an upload stores its content with
// Put before the transaction that references it; a gc with no grace in
// the same process between the two keeps the content, and the upload
// commits and downloads whole.
func TestGCBetweenUploadPutAndItsChange(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	blobs := &storetest.GCAfterPut{Store: st.Blobs, TB: t, GC: st}
	sp := actors.New(st.DB, blobs, st.Trees, nil, time.Now)
	_, err := sp.Upload(ctx, "alice", "notes/a.md", strings.NewReader("an uploaded note\n"))
	require.NoError(t, err)
	require.Equal(t, 1, blobs.GCs)
	rc, _, err := sp.Download(ctx, "alice", "notes/a.md")
	require.NoError(t, err)
	defer rc.Close()
	got, err := io.ReadAll(rc)
	require.NoError(t, err)
	assert.Equal(t, "an uploaded note\n", string(got))
}

// TestGCElsewhereBetweenUploadPutAndItsChange: a gc with no grace through
// another handle takes the content an upload stored before its
// transaction; the upload fails with store.busy (sent again, it succeeds)
// and changes nothing.
func TestGCElsewhereBetweenUploadPutAndItsChange(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	other, err := wsstore.Open(ctx, st.Dir, wsstore.Options{})
	require.NoError(t, err)
	defer other.Close()
	blobs := &storetest.GCAfterPut{Store: st.Blobs, TB: t, GC: other}
	sp := actors.New(st.DB, blobs, st.Trees, nil, time.Now)
	_, err = sp.Upload(ctx, "alice", "notes/a.md", strings.NewReader("an uploaded note\n"))
	require.Error(t, err)
	assert.True(t, wserr.Is(err, wserr.Busy), "%v", err)
	_, err = st.Actors.Stat(ctx, "alice", "notes/a.md")
	assert.Error(t, err, "nothing was uploaded")
	upload(t, st, "alice", "notes/a.md", "an uploaded note\n")
}

// unread fails the test if anything reads it.
type unread struct{ t *testing.T }

func (u unread) Read([]byte) (int, error) {
	u.t.Error("a refused upload read its content")
	return 0, io.EOF
}

// TestGuardedChanges: UploadWith and DeleteWith change the path only when
// their guard holds, and otherwise fail with workspace.write_stale_file,
// change nothing and (an upload) read nothing of the content.
func TestGuardedChanges(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	first := upload(t, s, "alice", "notes/a.md", "one")
	e, err := s.Actors.Stat(ctx, "alice", "notes/a.md")
	require.NoError(t, err)
	other := e.Hash
	other[0] ^= 1

	stale := []struct {
		path string
		opt  actors.ChangeOptions
	}{
		{"notes/a.md", actors.ChangeOptions{ExpectedHash: other}},
		{"notes/a.md", actors.ChangeOptions{MustNotExist: true}},
		{"notes", actors.ChangeOptions{ExpectedHash: e.Hash}}, // a directory
		{"notes/b.md", actors.ChangeOptions{ExpectedHash: e.Hash}},
		{"notes/b.md", actors.ChangeOptions{MustExist: true}},
		{"notes", actors.ChangeOptions{MustExist: true}},             // a directory, not a file
		{"notes/a.md/x", actors.ChangeOptions{ExpectedHash: e.Hash}}, // below a file
	}
	for _, c := range stale {
		_, err := s.Actors.UploadWith(ctx, "alice", c.path, unread{t}, c.opt)
		assert.True(t, wserr.Is(err, wserr.WriteStaleFile), "upload %s %+v: %v", c.path, c.opt, err)
		_, err = s.Actors.DeleteWith(ctx, "alice", c.path, c.opt)
		assert.True(t, wserr.Is(err, wserr.WriteStaleFile), "delete %s %+v: %v", c.path, c.opt, err)
	}
	st, err := s.Actors.Stats(ctx, "alice")
	require.NoError(t, err)
	assert.Equal(t, first.Seq, st.Seq, "no refused change was recorded")
	assert.Equal(t, "one", download(t, s, "alice", "notes/a.md"))

	c, err := s.Actors.UploadWith(ctx, "alice", "notes/a.md", strings.NewReader("two"), actors.ChangeOptions{ExpectedHash: e.Hash})
	require.NoError(t, err)
	assert.Equal(t, first.Seq+1, c.Seq)
	_, err = s.Actors.UploadWith(ctx, "alice", "notes/a.md", strings.NewReader("three"), actors.ChangeOptions{ExpectedHash: e.Hash})
	assert.True(t, wserr.Is(err, wserr.WriteStaleFile), "the hash read before the last change: %v", err)
	_, err = s.Actors.UploadWith(ctx, "alice", "notes/b.md", strings.NewReader("new"), actors.ChangeOptions{MustNotExist: true})
	require.NoError(t, err)
	_, err = s.Actors.UploadWith(ctx, "alice", "notes/b.md", strings.NewReader("newer"), actors.ChangeOptions{MustExist: true})
	require.NoError(t, err)
	e2, err := s.Actors.Stat(ctx, "alice", "notes/a.md")
	require.NoError(t, err)
	_, err = s.Actors.DeleteWith(ctx, "alice", "notes/a.md", actors.ChangeOptions{ExpectedHash: e2.Hash})
	require.NoError(t, err)
	_, err = s.Actors.Stat(ctx, "alice", "notes/a.md")
	assert.True(t, wserr.Is(err, wserr.FileNotFound), "%v", err)
	assert.Equal(t, "newer", download(t, s, "alice", "notes/b.md"))
}

// racing changes the file the first time it is read, as another writer
// would between an upload's first look and its transaction.
type racing struct {
	once   bool
	change func()
	r      io.Reader
}

func (r *racing) Read(b []byte) (int, error) {
	if !r.once {
		r.once = true
		r.change()
	}
	return r.r.Read(b)
}

// TestGuardCheckedInTheTransaction: a change made while a guarded upload
// reads its content fails the upload: the guard is checked again where
// the space changes.
func TestGuardCheckedInTheTransaction(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	upload(t, s, "alice", "a.md", "one")
	e, err := s.Actors.Stat(ctx, "alice", "a.md")
	require.NoError(t, err)
	src := &racing{r: strings.NewReader("mine"), change: func() { upload(t, s, "alice", "a.md", "theirs") }}
	_, err = s.Actors.UploadWith(ctx, "alice", "a.md", src, actors.ChangeOptions{ExpectedHash: e.Hash})
	assert.True(t, wserr.Is(err, wserr.WriteStaleFile), "%v", err)
	assert.Equal(t, "theirs", download(t, s, "alice", "a.md"))
}

// TestDownloadOfAFileCollectedMeanwhile: a download streaming a file that
// is removed, and whose chunks a gc collects, before the stream ends fails
// with store.conflict (download again), not store.corrupt: the store is
// sound and the file is simply gone.
func TestDownloadOfAFileCollectedMeanwhile(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	const big = 12 << 20
	_, err := s.Actors.Upload(ctx, "alice", "data/big.bin", storetest.Text(big))
	require.NoError(t, err)
	rc, _, err := s.Actors.Download(ctx, "alice", "data/big.bin")
	require.NoError(t, err)
	defer rc.Close()
	_, err = io.ReadFull(rc, make([]byte, 64<<10))
	require.NoError(t, err)

	_, err = s.Actors.Delete(ctx, "alice", "data/big.bin")
	require.NoError(t, err)
	_, rep, err := s.ActorGC(ctx, actors.GCOptions{}, wsstore.GCOptions{Grace: -1})
	require.NoError(t, err)
	require.Positive(t, rep.Freed.Chunks)

	_, err = io.Copy(io.Discard, rc)
	assert.Equal(t, wserr.Conflict, wserr.CodeOf(err), "error: %v", err)
}

// TestDeleteByPrefixMatchesText: a prefix's last segment is the text names
// start with, so it need not be a valid name itself; its directory must
// be a valid path, and a NUL, "." or ".." is refused.
func TestDeleteByPrefixMatchesText(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	for _, p := range []string{"report.md", "report.pdf", "reports/x.md", "CONTRACT.md", "a b.md", "d/ab.md", "keep.md"} {
		upload(t, s, "pf", p, p)
	}
	for _, tc := range []struct {
		prefix string
		files  int64
	}{{"report.", 2}, {"CON", 1}, {"a ", 1}, {"d/a:", 0}, {"d/a", 1}} {
		c, err := s.Actors.DeleteByPrefix(ctx, "pf", tc.prefix)
		require.NoError(t, err, tc.prefix)
		assert.Equal(t, tc.files, c.Files, tc.prefix)
	}
	for _, bad := range []string{"", "..", "x/../y", "nul\x00", "d/.", "/abs"} {
		_, err := s.Actors.DeleteByPrefix(ctx, "pf", bad)
		assert.Equal(t, wserr.InvalidPath, wserr.CodeOf(err), "%q: %v", bad, err)
	}
	ls, err := s.Actors.List(ctx, "pf", "", 2)
	require.NoError(t, err)
	var left []string
	for _, l := range ls {
		if l.Kind == vfs.KindFile {
			left = append(left, l.Path.String())
		}
	}
	assert.Equal(t, []string{"keep.md", "reports/x.md"}, left)
}

// TestImportChangeKeepsTheStoresOwnCodes: a change row an import cannot
// insert because the store failed (here the caller's context ended)
// keeps that failure's code; only a row that does not fit (a seq written
// already) is store.corrupt.
func TestImportChangeKeepsTheStoresOwnCodes(t *testing.T) {
	s := openStore(t)
	bg := context.Background()
	root := vfs.EmptyTree
	rec := actors.ChangeRecord{Actor: "carol", Seq: 1, Op: string(actors.OpUpload), Path: "a.md", Files: 1, Bytes: 1, Created: 1}
	err := s.DB.Update(bg, func(tx *index.Tx) error {
		if _, err := s.Actors.ImportSpace(bg, tx, actors.SpaceRecord{Actor: "carol", Root: root, Seq: 1, Created: 1, Updated: 1}); err != nil {
			return err
		}
		ctx, cancel := context.WithCancel(bg)
		cancel()
		err := s.Actors.ImportChange(ctx, tx, rec)
		assert.Equal(t, wserr.Canceled, wserr.CodeOf(err), "%v", err)
		require.NoError(t, s.Actors.ImportChange(bg, tx, rec))
		err = s.Actors.ImportChange(bg, tx, rec)
		assert.Equal(t, wserr.Corrupt, wserr.CodeOf(err), "a seq written already: %v", err)
		return errors.New("roll back")
	})
	require.EqualError(t, err, "roll back")
}

// TestUploadOfStoredContentUnderATightCap: under a store cap with less
// room left than the content's size, an upload of content the store holds
// already adds no content bytes and is not refused: again to the same
// file (a retry whose answer was lost: it records nothing) and to a new
// path (a tree entry only), whether or not the upload gives its size, and
// whether the content is one row or chunks. New content of that size is
// still refused and stores nothing.
func TestUploadOfStoredContentUnderATightCap(t *testing.T) {
	for _, tc := range []struct {
		name  string
		n     int
		sized bool
	}{
		{"SizedRow", 1_000_000, true},
		{"UnsizedRow", 1_000_000, false},
		{"SizedChunks", 5 << 20, true},
		{"UnsizedChunks", 5 << 20, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s := openStore(t)
			content := make([]byte, tc.n)
			_, _ = rand.NewChaCha8([32]byte{byte(tc.n)}).Read(content)
			put := func(path string, b []byte) (actors.Change, error) {
				opt := actors.ChangeOptions{}
				if tc.sized {
					opt.Size = int64(len(b))
				}
				return s.Actors.UploadWith(ctx, "alice", path, bytes.NewReader(b), opt)
			}
			first, err := put("r.bin", content)
			require.NoError(t, err)
			used, err := s.DB.UsedBytes(ctx)
			require.NoError(t, err)
			limit := used + int64(tc.n)/2 // room for half the content
			require.NoError(t, s.Runs.SetPolicy(ctx, runs.StoreScope, runs.Policy{MaxStoreBytes: &limit}))

			again, err := put("r.bin", content)
			assert.NoError(t, err, "the content the file has already")
			assert.Zero(t, again.Seq, "records nothing")
			assert.Equal(t, first.Root, again.Root)

			other, err := put("r2.bin", content)
			require.NoError(t, err, "content stored under another path")
			assert.Equal(t, first.Seq+1, other.Seq)
			e, err := s.Actors.Stat(ctx, "alice", "r2.bin")
			require.NoError(t, err)
			assert.Equal(t, cas.Sum(content), e.Hash)
			assert.Equal(t, int64(tc.n), e.Size)

			fresh := bytes.Clone(content)
			fresh[0] ^= 1
			_, err = put("r3.bin", fresh)
			assert.Equal(t, wserr.SizeLimitExceeded, wserr.CodeOf(err), "new content that does not fit: %v", err)
			_, err = s.Actors.Stat(ctx, "alice", "r3.bin")
			assert.True(t, wserr.Is(err, wserr.FileNotFound), "%v", err)
			has, err := s.Blobs.Has(ctx, cas.Sum(fresh))
			require.NoError(t, err)
			assert.False(t, has, "the refused content is not stored")
			after, err := s.DB.UsedBytes(ctx)
			require.NoError(t, err)
			assert.LessOrEqual(t, after, limit)
		})
	}
}

// TestGCOfOneActorReadsItsSpaceOnly counts the pages GC's read of the
// spaces reads when it is given one actor: about the same among 10 spaces
// as among 2,000. Matching the actor in a scan of every space read 100×
// the pages among 2,000.
func TestGCOfOneActorReadsItsSpaceOnly(t *testing.T) {
	ctx := context.Background()
	pages := func(n int) int {
		var rec storetest.Statements
		s := storetest.OpenStoreWith(t, wsstore.Options{Now: storetest.NewClock().Now, Index: index.Options{Trace: rec.Trace}})
		for i := range n {
			upload(t, s, fmt.Sprintf("actor%05d", i), "notes.md", fmt.Sprint("note ", i))
		}
		upload(t, s, "actor00003", "notes.md", "changed")
		var rep actors.GCReport
		stmts := rec.Record(func() {
			var err error
			rep, err = s.Actors.GC(ctx, actors.GCOptions{Actor: "actor00003"})
			require.NoError(t, err)
		})
		require.Equal(t, actors.GCReport{Actors: 1, Pruned: 1}, rep)
		require.NotEmpty(t, stmts)
		require.Contains(t, stmts[0], "FROM actor_spaces")
		return storetest.PagesRead(t, s.DB.Path(), stmts[0], "actor00003")
	}
	small, large := pages(10), pages(2000)
	t.Logf("pages of the space read by gc of one actor: %d among 10 spaces, %d among 2,000", small, large)
	assert.LessOrEqual(t, large, small+2, "pages among 2,000 spaces")
}

// TestEachSpaceRecordReadsPages: a walk of every actor space (an export,
// a sync) reads their rows a page at a time (two here), each page after
// the last actor of the one before, so it holds one page of rows however
// many spaces there are, and still reaches every space once, in actor
// order.
func TestEachSpaceRecordReadsPages(t *testing.T) {
	defer actors.SetSpacePage(2)()
	ctx := context.Background()
	var rec storetest.Statements
	s := storetest.OpenStoreWith(t, wsstore.Options{Now: storetest.NewClock().Now, Index: index.Options{Trace: rec.Trace}})
	for _, a := range []string{"e", "b", "d", "a", "c"} {
		upload(t, s, a, "notes.md", "from "+a)
	}
	var got []string
	pages := 0
	for _, q := range rec.Record(func() {
		require.NoError(t, s.DB.View(ctx, func(tx *index.Tx) error {
			return s.Actors.EachSpaceRecord(ctx, tx, func(r actors.SpaceRecord) error {
				got = append(got, r.Actor)
				return nil
			})
		}))
	}) {
		if strings.HasPrefix(q, "SELECT actor, root, seq, created, updated FROM actor_spaces") {
			assert.Contains(t, q, "LIMIT", "a page of rows, not all of them")
			pages++
		}
	}
	assert.Equal(t, []string{"a", "b", "c", "d", "e"}, got)
	assert.Equal(t, 3, pages, "rows 2, 2 and 1 at a time")
}

// TestGCOfEverySpaceWorksAPageAtATime: GC of every space reads and prunes
// the spaces a page at a time (two here), a write transaction each, and
// prunes every space that has versions past the keep, once; a space
// whose count of versions is within the keep costs no statement on its
// journal.
func TestGCOfEverySpaceWorksAPageAtATime(t *testing.T) {
	defer actors.SetGCPage(2)()
	ctx := context.Background()
	var rec storetest.Statements
	s := storetest.OpenStoreWith(t, wsstore.Options{Now: storetest.NewClock().Now, Index: index.Options{Trace: rec.Trace}})
	for _, a := range []string{"e", "b", "d", "a", "c"} {
		upload(t, s, a, "notes.md", "from "+a)
	}
	for _, a := range []string{"b", "e"} { // two versions each
		upload(t, s, a, "notes.md", "again "+a)
	}
	var rep actors.GCReport
	stmts := rec.Record(func() {
		var err error
		rep, err = s.Actors.GC(ctx, actors.GCOptions{})
		require.NoError(t, err)
	})
	assert.Equal(t, actors.GCReport{Actors: 2, Pruned: 2}, rep)
	pages, journal := 0, 0
	for _, q := range stmts {
		if strings.Contains(q, "FROM actor_spaces") && strings.Contains(q, "LIMIT") {
			pages++
		}
		if strings.Contains(q, "FROM actor_changes") {
			journal++
		}
	}
	assert.Equal(t, 3, pages, "spaces 2, 2 and 1 at a time")
	assert.Equal(t, 2*2, journal, "the journal read and pruned of b and e alone")
	for _, a := range []string{"a", "b", "c", "d", "e"} {
		st, err := s.Actors.Stats(ctx, a)
		require.NoError(t, err)
		assert.Equal(t, int64(1), st.Versions, a)
	}
	rep, err := s.Actors.GC(ctx, actors.GCOptions{})
	require.NoError(t, err)
	assert.Equal(t, actors.GCReport{}, rep, "nothing left to prune")
}

// TestGCPrunesAHistoryAChunkAtATime: the versions GC prunes of a space
// are read a chunk at a time (two here), oldest first, so a space of any
// history is pruned in bounded memory; every version before the newest
// kept is pruned, once, and those kept still list.
func TestGCPrunesAHistoryAChunkAtATime(t *testing.T) {
	defer actors.SetPruneChunk(2)()
	ctx := context.Background()
	var rec storetest.Statements
	s := storetest.OpenStoreWith(t, wsstore.Options{Now: storetest.NewClock().Now, Index: index.Options{Trace: rec.Trace}})
	for i := range 7 {
		upload(t, s, "alice", "notes.md", fmt.Sprint("version ", i))
	}
	var rep actors.GCReport
	stmts := rec.Record(func() {
		var err error
		rep, err = s.Actors.GC(ctx, actors.GCOptions{Actor: "alice", KeepVersions: 2})
		require.NoError(t, err)
	})
	assert.Equal(t, actors.GCReport{Actors: 1, Pruned: 5}, rep)
	chunks := 0
	for _, q := range stmts {
		if strings.HasPrefix(strings.TrimSpace(q), "SELECT seq, root FROM actor_changes") {
			assert.Contains(t, q, "LIMIT", "a chunk, not every version")
			chunks++
		}
	}
	assert.Equal(t, 3, chunks, "versions 1–2, 3–4 and 5")
	for seq := int64(1); seq <= 7; seq++ {
		_, err := s.Actors.ListAt(ctx, "alice", seq, "", 1)
		if seq <= 5 {
			assert.True(t, wserr.Is(err, wserr.NotFound), "version %d pruned: %v", seq, err)
		} else {
			assert.NoError(t, err, "version %d kept", seq)
		}
	}
	st, err := s.Actors.Stats(ctx, "alice")
	require.NoError(t, err)
	assert.Equal(t, int64(2), st.Versions)
}

// TestDeleteOfAFileAsADirectory: a delete whose path ends in "/" names a
// directory; given a file (reports/x.md/) it is workspace.not_a_directory
// and the file stays, as a download of one is; it removed the file. A
// directory so named is removed as without the slash.
func TestDeleteOfAFileAsADirectory(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	for _, p := range []string{"reports/x.md", "old/y.md"} {
		_, err := s.Actors.Upload(ctx, "alice", p, strings.NewReader("x"))
		require.NoError(t, err)
	}
	_, err := s.Actors.Delete(ctx, "alice", "reports/x.md/")
	assert.True(t, wserr.Is(err, wserr.NotADirectory), "%v", err)
	_, _, err = s.Actors.Download(ctx, "alice", "reports/x.md")
	assert.NoError(t, err, "the file stays")
	_, err = s.Actors.Delete(ctx, "alice", "old/")
	require.NoError(t, err)
	_, _, err = s.Actors.Download(ctx, "alice", "old/y.md")
	assert.True(t, wserr.Is(err, wserr.FileNotFound), "%v", err)
}
