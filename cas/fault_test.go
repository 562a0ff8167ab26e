package cas_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/cas/storagetest"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/wserr"
)

// openFaulty opens a store whose objects go through the fault-injecting
// wrapper over the SQLite storage.
func openFaulty(t *testing.T, opts cas.Options) (*index.DB, *cas.Store, *storagetest.Faults) {
	t.Helper()
	db := storetest.OpenDB(t, index.Options{})
	st, faults := storagetest.NewFaulty(cas.NewSQLiteStorage())
	opts.Storage = st
	s, err := cas.New(db, opts)
	require.NoError(t, err)
	return db, s, faults
}

func onKind(k cas.Kind) func(storagetest.Call) bool {
	return func(c storagetest.Call) bool { return c.Kind == k }
}

// TestFailedWriteLeavesNothing: a storage write that fails inside the
// caller's transaction fails the transaction, and nothing of the blob
// is left once it rolls back, whether the write failed before or after it
// reached the storage.
func TestFailedWriteLeavesNothing(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name  string
		data  []byte
		fault storagetest.Fault
	}{
		{"Inline/Before", textBytes(8<<10, 1), storagetest.Fault{Method: storagetest.Put, Nth: 1}},
		{"Inline/After", textBytes(8<<10, 2), storagetest.Fault{Method: storagetest.Put, Nth: 1, After: true}},
		{"Chunked/BlobAfterChunks", randomBytes(3<<20, 3),
			storagetest.Fault{Method: storagetest.Put, When: onKind(cas.KindBlob), After: true}},
		{"Chunked/SecondChunk", randomBytes(3<<20, 4),
			storagetest.Fault{Method: storagetest.Put, When: onKind(cas.KindChunk), Nth: 2, After: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, s, faults := openFaulty(t, cas.Options{InlineMax: 1 << 20})
			faults.Add(tt.fault)
			err := db.Update(ctx, func(tx *index.Tx) error {
				_, err := s.PutBytes(ctx, tx, tt.data)
				return err
			})
			require.ErrorIs(t, err, storagetest.ErrInjected)
			assert.Equal(t, 1, faults.Fired())
			ok, err := s.Has(ctx, cas.Sum(tt.data))
			require.NoError(t, err)
			assert.False(t, ok, "the blob is absent")
			assert.Zero(t, count(t, db, `SELECT count(*) FROM blobs`))
			assert.Zero(t, count(t, db, `SELECT count(*) FROM chunks`), "no chunk of it is left")

			faults.Clear()
			h, err := s.PutBytes(ctx, nil, tt.data)
			require.NoError(t, err, "the same write goes through once the storage does")
			got, err := s.ReadAll(ctx, h)
			require.NoError(t, err)
			assert.True(t, bytes.Equal(tt.data, got))
		})
	}
}

// TestFailedVersionWriteRollsBackItsDelta: with InlineDeltas, when any
// storage write of a PutVersion fails, the re-encoding of the previous version as a delta
// rolls back with the new version: the previous version is whole and
// unchanged, the new one absent.
func TestFailedVersionWriteRollsBackItsDelta(t *testing.T) {
	ctx := context.Background()
	v1 := textBytes(16<<10, 5)
	v2 := append(bytes.Clone(v1), []byte("\none more paragraph at the end of the draft\n")...)
	for _, m := range []storagetest.Method{storagetest.Reencode, storagetest.PutAt, storagetest.SetHistory} {
		t.Run(string(m), func(t *testing.T) {
			for _, inTx := range []bool{false, true} {
				_, s, faults := openFaulty(t, cas.Options{InlineDeltas: true})
				h1, err := s.PutVersion(ctx, nil, v1, cas.Hash{})
				require.NoError(t, err)
				before, err := s.Stat(ctx, h1)
				require.NoError(t, err)
				require.Equal(t, cas.CodecZstd, before.Codec)

				// The last call of the method in the write fails, after
				// it reached the storage.
				faults.Add(storagetest.Fault{Method: m, After: true, When: func(c storagetest.Call) bool {
					return m != storagetest.SetHistory || c.Hash == cas.Sum(v2)
				}})
				if inTx {
					err = s.DB().Update(ctx, func(tx *index.Tx) error {
						_, err := s.PutVersion(ctx, tx, v2, h1)
						return err
					})
				} else {
					_, err = s.PutVersion(ctx, nil, v2, h1)
				}
				require.ErrorIs(t, err, storagetest.ErrInjected)
				require.Equal(t, 1, faults.Fired())

				after, err := s.Stat(ctx, h1)
				require.NoError(t, err)
				assert.Equal(t, before, after, "the previous version is as it was")
				ok, err := s.Has(ctx, cas.Sum(v2))
				require.NoError(t, err)
				assert.False(t, ok, "the new version is absent")
				got, err := s.ReadAll(ctx, h1)
				require.NoError(t, err)
				assert.True(t, bytes.Equal(v1, got))

				faults.Clear()
				h2, err := s.PutVersion(ctx, nil, v2, h1)
				require.NoError(t, err)
				delta, err := s.Stat(ctx, h1)
				require.NoError(t, err)
				assert.Equal(t, cas.CodecDelta, delta.Codec, "once the storage works, the delta is made")
				assert.Equal(t, h2, delta.Base)
			}
		})
	}
}

// TestFailedReencodeStaysQueued: a queued re-encoding whose storage write
// fails (as a crash in its transaction would) rolls back whole: the
// previous version is as it was, the new one reads, and the job is still
// queued; run again once the storage works, it makes the delta, once. A
// failure of the write itself leaves neither the version nor a job.
func TestFailedReencodeStaysQueued(t *testing.T) {
	ctx := context.Background()
	v1 := textBytes(16<<10, 5)
	v2 := append(bytes.Clone(v1), []byte("\none more paragraph at the end of the draft\n")...)
	for _, m := range []storagetest.Method{storagetest.Reencode, storagetest.SetHistory, storagetest.PutAt} {
		t.Run(string(m), func(t *testing.T) {
			_, s, faults := openFaulty(t, cas.Options{})
			h1, err := s.PutVersion(ctx, nil, v1, cas.Hash{})
			require.NoError(t, err)
			before, err := s.Stat(ctx, h1)
			require.NoError(t, err)
			faults.Add(storagetest.Fault{Method: m, After: true, When: func(c storagetest.Call) bool {
				return m != storagetest.SetHistory || c.Hash == cas.Sum(v2)
			}})
			h2, err := s.PutVersion(ctx, nil, v2, h1)
			pending, perr := s.PendingReencodes(ctx)
			require.NoError(t, perr)
			if m == storagetest.PutAt {
				// The write's own insert failed: nothing of it is left.
				require.ErrorIs(t, err, storagetest.ErrInjected)
				assert.Zero(t, pending, "no job for a write that did not commit")
				ok, err := s.Has(ctx, cas.Sum(v2))
				require.NoError(t, err)
				assert.False(t, ok)
				return
			}
			require.NoError(t, err, "the write itself only stores the new version")
			require.Equal(t, 1, pending)
			n, err := s.Reencode(ctx, 0)
			require.ErrorIs(t, err, storagetest.ErrInjected)
			assert.Zero(t, n)
			require.Equal(t, 1, faults.Fired())

			after, err := s.Stat(ctx, h1)
			require.NoError(t, err)
			assert.Equal(t, before, after, "the previous version is as it was")
			for h, want := range map[cas.Hash][]byte{h1: v1, h2: v2} {
				got, err := s.ReadAll(ctx, h)
				require.NoError(t, err)
				assert.True(t, bytes.Equal(want, got))
			}
			pending, err = s.PendingReencodes(ctx)
			require.NoError(t, err)
			assert.Equal(t, 1, pending, "the job is still queued")

			faults.Clear()
			n, err = s.Reencode(ctx, 0)
			require.NoError(t, err)
			assert.Equal(t, 1, n)
			delta, err := s.Stat(ctx, h1)
			require.NoError(t, err)
			assert.Equal(t, cas.CodecDelta, delta.Codec, "once the storage works, the delta is made")
			assert.Equal(t, h2, delta.Base)
			n, err = s.Reencode(ctx, 0)
			require.NoError(t, err)
			assert.Zero(t, n, "done once")
		})
	}
}

// TestFailedReadIsAnError: a storage read that fails surfaces as an error
// from every read of the Store, never as bytes.
func TestFailedReadIsAnError(t *testing.T) {
	ctx := context.Background()
	v1 := textBytes(16<<10, 6)
	v2 := append(bytes.Clone(v1), "and an ending"...)
	big := randomBytes(3<<20, 7)
	_, s, faults := openFaulty(t, cas.Options{InlineMax: 1 << 20})
	small, err := s.PutBytes(ctx, nil, textBytes(2000, 8))
	require.NoError(t, err)
	chunked, err := s.Put(ctx, bytes.NewReader(big))
	require.NoError(t, err)
	h1, err := putVersion(ctx, s, v1, cas.Hash{})
	require.NoError(t, err)
	_, err = putVersion(ctx, s, v2, h1)
	require.NoError(t, err)
	info, err := s.Stat(ctx, h1)
	require.NoError(t, err)
	require.Equal(t, cas.CodecDelta, info.Codec)

	tests := []struct {
		name  string
		h     cas.Hash
		fault storagetest.Fault
	}{
		{"Blob", small, storagetest.Fault{Method: storagetest.Get}},
		{"ChunkList", chunked, storagetest.Fault{Method: storagetest.Get, When: onKind(cas.KindBlob)}},
		{"SecondChunk", chunked, storagetest.Fault{Method: storagetest.Get, When: onKind(cas.KindChunk), Nth: 2}},
		{"DeltaBase", h1, storagetest.Fault{Method: storagetest.Get, Nth: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			faults.Clear()
			faults.Add(tt.fault)
			got, err := s.ReadAll(ctx, tt.h)
			require.ErrorIs(t, err, storagetest.ErrInjected)
			assert.Nil(t, got)
			assert.False(t, errors.Is(err, cas.ErrNotFound), "a failed read is not a missing blob")
		})
	}
	t.Run("StreamStopsAtTheFault", func(t *testing.T) {
		faults.Clear()
		faults.Add(storagetest.Fault{Method: storagetest.Get, When: onKind(cas.KindChunk), Nth: 2})
		rc, err := s.Get(ctx, chunked)
		require.NoError(t, err)
		defer rc.Close()
		n, err := io.Copy(io.Discard, rc)
		require.ErrorIs(t, err, storagetest.ErrInjected)
		assert.Less(t, n, int64(len(big)))
	})
	for _, m := range []storagetest.Method{storagetest.Has, storagetest.Stat} {
		t.Run(string(m), func(t *testing.T) {
			faults.Clear()
			faults.Fail(m, 0)
			_, err := s.Has(ctx, small)
			if m == storagetest.Has {
				require.ErrorIs(t, err, storagetest.ErrInjected)
			}
			_, err = s.Stat(ctx, small)
			if m == storagetest.Stat {
				require.ErrorIs(t, err, storagetest.ErrInjected)
			}
		})
	}
	t.Run("Verify", func(t *testing.T) {
		faults.Clear()
		faults.Fail(storagetest.Iterate, 1)
		_, err := s.Verify(ctx, nil)
		require.ErrorIs(t, err, storagetest.ErrInjected)
	})
	faults.Clear()
}

// TestCorruptBytesFromStorage: whatever bytes a storage hands back, Get
// returns only bytes that hash to their address; altered ones fail with
// ErrCorrupt, and Verify reports them.
func TestCorruptBytesFromStorage(t *testing.T) {
	ctx := context.Background()
	flipAt := func(frac float64) func([]byte) []byte {
		return func(b []byte) []byte {
			if len(b) > 0 {
				b[int(float64(len(b)-1)*frac)] ^= 0x40
			}
			return b
		}
	}
	truncate := func(b []byte) []byte { return b[:len(b)/2] }
	v1 := textBytes(16<<10, 9)
	v2 := append(bytes.Clone(v1), "and an ending"...)
	_, s, faults := openFaulty(t, cas.Options{InlineMax: 1 << 20})
	raw, err := s.PutBytes(ctx, nil, randomBytes(5000, 10))
	require.NoError(t, err)
	zst, err := s.PutBytes(ctx, nil, textBytes(50_000, 11))
	require.NoError(t, err)
	chunked, err := s.Put(ctx, bytes.NewReader(randomBytes(3<<20, 12)))
	require.NoError(t, err)
	h1, err := putVersion(ctx, s, v1, cas.Hash{})
	require.NoError(t, err)
	h2, err := putVersion(ctx, s, v2, h1)
	require.NoError(t, err)
	for h, c := range map[cas.Hash]cas.Codec{raw: cas.CodecRaw, zst: cas.CodecZstd, chunked: cas.CodecChunked, h1: cas.CodecDelta} {
		info, err := s.Stat(ctx, h)
		require.NoError(t, err)
		require.Equal(t, c, info.Codec)
	}

	tests := []struct {
		name string
		h    cas.Hash
		when func(storagetest.Call) bool
		mut  func([]byte) []byte
	}{
		{"Raw/Flip", raw, nil, flipAt(0.5)},
		{"Raw/Truncate", raw, nil, truncate},
		{"Zstd/Flip", zst, nil, flipAt(0.5)},
		{"Zstd/Truncate", zst, nil, truncate},
		{"Chunk/Flip", chunked, onKind(cas.KindChunk), flipAt(0.3)},
		{"Chunk/Empty", chunked, onKind(cas.KindChunk), func([]byte) []byte { return nil }},
		{"Delta/Flip", h1, func(c storagetest.Call) bool { return c.Hash == h1 }, flipAt(0.5)},
		{"DeltaBase/Flip", h1, func(c storagetest.Call) bool { return c.Hash == h2 }, flipAt(0.5)},
		{"Newest/Flip", h2, nil, flipAt(0.9)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			faults.Clear()
			faults.Add(storagetest.Fault{Method: storagetest.Get, When: tt.when, Corrupt: tt.mut})
			got, err := s.ReadAll(ctx, tt.h)
			require.ErrorIs(t, err, cas.ErrCorrupt)
			assert.Nil(t, got)
			require.Positive(t, faults.Fired())

			rep, err := s.Verify(ctx, nil)
			require.NoError(t, err)
			var bad []cas.Hash
			for _, p := range rep.Problems {
				bad = append(bad, p.Hash)
			}
			assert.Contains(t, bad, tt.h, "verify reports it")
		})
	}
	faults.Clear()
}

// TestStoreWithoutHistoryStoresVersionsWhole: over a storage without the
// history ability, PutVersion is PutBytes, and everything reads back.
func TestStoreWithoutHistoryStoresVersionsWhole(t *testing.T) {
	ctx := context.Background()
	db := storetest.OpenDB(t, index.Options{})
	s, err := cas.New(db, cas.Options{Storage: plainStorage{cas.NewSQLiteStorage()}})
	require.NoError(t, err)
	versions := draftHistory(20)
	hashes := putHistory(t, s, versions)
	for i, h := range hashes {
		info, err := s.Stat(ctx, h)
		require.NoError(t, err)
		assert.NotEqual(t, cas.CodecDelta, info.Codec)
		got, err := s.ReadAll(ctx, h)
		require.NoError(t, err)
		assert.True(t, bytes.Equal(versions[i], got), "version %d", i)
	}
	assert.Zero(t, count(t, db, `SELECT count(*) FROM blobs WHERE gen > 0`), "no history is recorded")
}

// TestVerifyStopsAtUnreachableStorage: an object the storage cannot read
// now (busy, a remote tier out of reach) stops the verification with that
// error; it is not reported as a damaged object. A damaged one still is.
func TestVerifyStopsAtUnreachableStorage(t *testing.T) {
	ctx := context.Background()
	_, s, faults := openFaulty(t, cas.Options{InlineMax: 1 << 20})
	for i := range 3 {
		_, err := s.Put(ctx, bytes.NewReader(textBytes(8<<10, uint64(10+i))))
		require.NoError(t, err)
	}
	faults.Add(storagetest.Fault{Method: storagetest.Get, Nth: 2, Err: wserr.New(wserr.Busy, "get", "", "remote tier: connection refused")})
	rep, err := s.Verify(ctx, nil)
	require.Error(t, err)
	assert.True(t, wserr.Is(err, wserr.Busy), "%v", err)
	assert.Empty(t, rep.Problems, "an unreachable object is not a damaged one")

	faults.Clear()
	faults.Add(storagetest.Fault{Method: storagetest.Get, Nth: 2, Corrupt: func(b []byte) []byte { b[len(b)-1] ^= 1; return b }})
	rep, err = s.Verify(ctx, nil)
	require.NoError(t, err)
	assert.Len(t, rep.Problems, 1)
}
