package wsstore_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/cas/storagetest"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// TestDiskFullRefusesTheWriteOnly: a blob write that meets a full disk
// (the storage failing with ENOSPC, as the fault wrapper injects it) is
// refused with store.disk_full, changes nothing, leaves fsck clean, and
// the same write succeeds once space frees.
func TestDiskFullRefusesTheWriteOnly(t *testing.T) {
	ctx := context.Background()
	st, faults := storagetest.NewFaulty(cas.NewSQLiteStorage())
	s, err := wsstore.Open(ctx, t.TempDir(), wsstore.Options{CAS: cas.Options{Storage: st}})
	require.NoError(t, err)
	defer s.Close()
	_, err = s.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "c"}, RunID: "r"})
	require.NoError(t, err)
	ws := s.Runs.Workspace("r", runs.HostScope)
	_, err = ws.Write(ctx, vfs.MustPath("output/a.md"), []byte("before\n"), vfs.WriteOptions{})
	require.NoError(t, err)
	cps, err := s.Checkpoints.List(ctx, "r")
	require.NoError(t, err)

	for _, content := range [][]byte{[]byte("small\n"), random(7, 300<<10)} {
		faults.Add(storagetest.Fault{Method: storagetest.Put, Err: fmt.Errorf("write: %w", syscall.ENOSPC)})
		_, err = ws.Write(ctx, vfs.MustPath("output/b.bin"), content, vfs.WriteOptions{})
		require.Error(t, err)
		assert.Equal(t, wserr.DiskFull, wserr.CodeOf(err), "%v", err)
		faults.Clear()

		after, err := s.Checkpoints.List(ctx, "r")
		require.NoError(t, err)
		assert.Equal(t, len(cps), len(after), "no checkpoint for the refused write")
		_, err = ws.Stat(ctx, vfs.MustPath("output/b.bin"))
		assert.Equal(t, wserr.FileNotFound, wserr.CodeOf(err))
		rep, err := s.Fsck(ctx, nil)
		require.NoError(t, err)
		assert.Empty(t, rep.Problems)
	}
	_, err = ws.Write(ctx, vfs.MustPath("output/b.bin"), []byte("after\n"), vfs.WriteOptions{})
	require.NoError(t, err, "writes work again once space frees")
}

// TestBlobStorageFaultsLoseNothing: every fault the blob storage can meet
// (an I/O error, a write cut short, a full disk, a write that went
// through but whose answer was lost) on a small file, a large one stored
// in chunks, and a new version stored as a delta, refuses the write with
// a code, leaves no checkpoint, file or event of it, keeps what was
// there, leaves fsck clean; and once the fault clears the same write
// succeeds. A read that meets an I/O error or damaged bytes fails with a
// code and returns nothing wrong.
func TestBlobStorageFaultsLoseNothing(t *testing.T) {
	ctx := context.Background()
	eio := fmt.Errorf("write: %w", syscall.EIO)
	faults := []struct {
		name  string
		fault storagetest.Fault
		code  wserr.Code
	}{
		{"IOError", storagetest.Fault{Err: eio}, wserr.Internal},
		{"ShortWrite", storagetest.Fault{Short: true}, wserr.Internal},
		{"DiskFull", storagetest.Fault{Err: fmt.Errorf("write: %w", syscall.ENOSPC)}, wserr.DiskFull},
		{"AnswerLost", storagetest.Fault{Err: eio, After: true}, wserr.Internal},
		{"SecondChunkFails", storagetest.Fault{Err: eio, Nth: 2}, wserr.Internal},
	}
	contents := []struct {
		name    string
		content func(prev []byte) []byte
	}{
		{"Small", func([]byte) []byte { return []byte("small\n") }},
		{"Chunked", func([]byte) []byte { return random(9, 300<<10) }},
		{"Delta", func(prev []byte) []byte { return append(append([]byte{}, prev...), "one more line\n"...) }},
	}
	for _, f := range faults {
		for _, c := range contents {
			t.Run(f.name+"/"+c.name, func(t *testing.T) {
				st, armed := storagetest.NewFaulty(cas.NewSQLiteStorage())
				s, err := wsstore.Open(ctx, t.TempDir(), wsstore.Options{CAS: cas.Options{Storage: st, InlineMax: 64 << 10}})
				require.NoError(t, err)
				defer s.Close()
				_, err = s.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "c"}, RunID: "r"})
				require.NoError(t, err)
				ws := s.Runs.Workspace("r", runs.HostScope)
				prev := []byte(string(random(3, 2000)) + "\n")
				doc := vfs.MustPath("output/doc.md")
				_, err = ws.Write(ctx, doc, prev, vfs.WriteOptions{})
				require.NoError(t, err)
				cps, err := s.Checkpoints.List(ctx, "r")
				require.NoError(t, err)
				events, err := s.Journal.Last(ctx, nil, "r")
				require.NoError(t, err)

				content := c.content(prev)
				fault := f.fault
				fault.When = func(call storagetest.Call) bool {
					return call.Method == storagetest.Put || call.Method == storagetest.PutAt
				}
				armed.Add(fault)
				_, err = ws.Write(ctx, doc, content, vfs.WriteOptions{})
				armed.Clear()
				if f.fault.Nth == 2 && armed.Fired() == 0 {
					// One put only: nothing to fail second.
					require.NoError(t, err)
					return
				}
				require.Error(t, err)
				require.Positive(t, armed.Fired())
				assert.Equal(t, f.code, wserr.CodeOf(err), "%v", err)

				after, err := s.Checkpoints.List(ctx, "r")
				require.NoError(t, err)
				assert.Len(t, after, len(cps), "no checkpoint for the refused write")
				n, err := s.Journal.Last(ctx, nil, "r")
				require.NoError(t, err)
				assert.Equal(t, events, n, "no event for the refused write")
				got, err := ws.Read(ctx, doc, vfs.ReadOptions{})
				require.NoError(t, err)
				assert.Equal(t, prev, got.Content, "what was there is kept")
				rep, err := s.Fsck(ctx, nil)
				require.NoError(t, err)
				assert.Empty(t, rep.Problems)

				_, err = ws.Write(ctx, doc, content, vfs.WriteOptions{})
				require.NoError(t, err, "the write works once the fault clears")
				got, err = ws.Read(ctx, doc, vfs.ReadOptions{})
				require.NoError(t, err)
				assert.Equal(t, content, got.Content)

				// Reads: an I/O error and damaged bytes.
				armed.Add(storagetest.Fault{Method: storagetest.Get, Err: fmt.Errorf("read: %w", syscall.EIO)})
				_, err = ws.Read(ctx, doc, vfs.ReadOptions{})
				armed.Clear()
				require.Error(t, err)
				assert.NotEmpty(t, wserr.CodeOf(err))
				armed.Add(storagetest.Fault{Method: storagetest.Get, Corrupt: func(b []byte) []byte {
					if len(b) > 0 {
						b[len(b)/2] ^= 1
					}
					return b
				}})
				_, err = ws.Read(ctx, doc, vfs.ReadOptions{})
				armed.Clear()
				require.Error(t, err)
				assert.Equal(t, wserr.Corrupt, wserr.CodeOf(err), "%v", err)
				rep, err = s.Fsck(ctx, nil)
				require.NoError(t, err)
				assert.Empty(t, rep.Problems)
			})
		}
	}
}
