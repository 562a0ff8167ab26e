package cas_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
)

// TestDictTrainedInARolledBackWrite: a write transaction that trained a
// dictionary and then failed leaves no trace of it. Later writes do not
// compress with the dictionary the rollback took away, so what they store
// reads back in a process that never saw it, and verifies.
func TestDictTrainedInARolledBackWrite(t *testing.T) {
	ctx := context.Background()
	s, db := newDictStore(t, cas.Options{DictTrainAfter: 32})
	putSmallFiles(t, s, 31)
	failed := errors.New("the caller's write fails after its puts")
	err := db.Update(ctx, func(tx *index.Tx) error {
		for i := 31; i < 40; i++ {
			if _, err := s.PutBytes(ctx, tx, smallFile(i)); err != nil {
				return err
			}
		}
		n := 0
		require.NoError(t, s.EachDict(ctx, tx, func(cas.DictInfo) error { n++; return nil }))
		require.Equal(t, 1, n, "the write that crossed the line trained in its transaction")
		return failed
	})
	require.ErrorIs(t, err, failed)
	ds, err := s.Dicts(ctx)
	require.NoError(t, err)
	require.Empty(t, ds, "the rollback took the dictionary away")

	var later []cas.Hash
	for i := 100; i < 110; i++ {
		h, err := s.PutBytes(ctx, nil, smallFile(i))
		require.NoError(t, err)
		later = append(later, h)
	}
	fresh, err := cas.New(db, cas.Options{DictTrainAfter: -1})
	require.NoError(t, err)
	for i, h := range later {
		info, err := fresh.Stat(ctx, h)
		require.NoError(t, err)
		assert.True(t, info.Base.IsZero(), "file %d is compressed with no dictionary", i)
		b, err := fresh.ReadAll(ctx, h)
		require.NoError(t, err, "file %d reads back in another process", i)
		assert.Equal(t, smallFile(100+i), b)
	}
	rep, err := fresh.Verify(ctx, nil)
	require.NoError(t, err)
	assert.Empty(t, rep.Problems)
}

// reencodeHook is the store's SQLite storage with a hook that may fail
// Reencode, the call a training makes for each sample after it lists its
// dictionary.
type reencodeHook struct {
	*cas.SQLiteStorage
	fail func(ctx context.Context, tx *index.Tx) error
}

func (r reencodeHook) Reencode(ctx context.Context, tx *index.Tx, h cas.Hash, codec cas.Codec, base cas.Hash, data []byte) error {
	if r.fail != nil {
		if err := r.fail(ctx, tx); err != nil {
			return err
		}
	}
	return r.SQLiteStorage.Reencode(ctx, tx, h, codec, base, data)
}

// blobCount is how many blob rows the store holds.
func blobCount(t *testing.T, db *index.DB) int {
	t.Helper()
	var n int
	require.NoError(t, db.View(context.Background(), func(tx *index.Tx) error {
		return tx.GetContext(context.Background(), &n, `SELECT count(*) FROM blobs`)
	}))
	return n
}

// TestDictTrainingThatFailsInAWrite: a training taken in a caller's write
// transaction that fails after listing its dictionary is undone to its
// savepoint: the write commits what it wrote, without the dictionary, its
// blob or any sample's new form. A training whose failure ended the
// transaction itself (as SQLite does on some full-disk and I/O errors)
// fails the write, and nothing of the write commits, not even what the
// caller ran after it.
func TestDictTrainingThatFailsInAWrite(t *testing.T) {
	ctx := context.Background()
	injected := errors.New("injected")
	for _, tc := range []struct {
		name string
		fail func(ctx context.Context, tx *index.Tx) error
		ends bool
	}{
		{"Undone", func(context.Context, *index.Tx) error { return injected }, false},
		{"UndoneAfterASample", func() func(context.Context, *index.Tx) error {
			n := 0
			return func(context.Context, *index.Tx) error {
				if n++; n == 1 {
					return nil // the first sample is re-encoded
				}
				return injected
			}
		}(), false},
		{"EndsTheTransaction", func(ctx context.Context, tx *index.Tx) error {
			_, err := tx.ExecContext(ctx, `ROLLBACK`)
			require.NoError(t, err)
			return injected
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hook := &reencodeHook{SQLiteStorage: cas.NewSQLiteStorage()}
			db := storetest.OpenDB(t, index.Options{})
			s, err := cas.New(db, cas.Options{Storage: hook, DictTrainAfter: 32})
			require.NoError(t, err)
			putSmallFiles(t, s, 31)
			before := blobCount(t, db)
			fired := 0
			hook.fail = func(ctx context.Context, tx *index.Tx) error {
				err := tc.fail(ctx, tx)
				if err != nil {
					fired++
				}
				return err
			}
			err = db.Update(ctx, func(tx *index.Tx) error {
				for i := 31; i < 40; i++ {
					if _, err := s.PutBytes(ctx, tx, smallFile(i)); err != nil {
						return err
					}
				}
				return nil
			})
			hook.fail = nil
			require.Equal(t, 1, fired, "the write trained, and its training failed")
			ds, derr := s.Dicts(ctx)
			require.NoError(t, derr)
			assert.Empty(t, ds, "no dictionary listed")
			if tc.ends {
				require.ErrorIs(t, err, injected)
				assert.Equal(t, before, blobCount(t, db), "nothing of the write committed")
			} else {
				require.NoError(t, err)
				assert.Equal(t, before+9, blobCount(t, db), "the write's blobs, no dictionary's")
				for i := range 40 {
					h := cas.Sum(smallFile(i))
					b, err := s.ReadAll(ctx, h)
					require.NoError(t, err)
					assert.Equal(t, smallFile(i), b)
					info, err := s.Stat(ctx, h)
					require.NoError(t, err)
					assert.True(t, info.Base.IsZero(), "file %d keeps the form it had: no sample's new form stays", i)
				}
			}
			rep, err := s.Verify(ctx, nil)
			require.NoError(t, err)
			assert.Empty(t, rep.Problems)
		})
	}
}

// TestDictTrainingFailuresBackOff: a training that fails is tried again
// only after twice as many inserts as the one before, however it failed,
// so a store whose trainings keep failing pays for few of them.
func TestDictTrainingFailuresBackOff(t *testing.T) {
	ctx := context.Background()
	injected := errors.New("injected")
	trainings := 0
	hook := &reencodeHook{SQLiteStorage: cas.NewSQLiteStorage(), fail: func(context.Context, *index.Tx) error {
		trainings++
		return injected
	}}
	db := storetest.OpenDB(t, index.Options{})
	s, err := cas.New(db, cas.Options{Storage: hook, DictTrainAfter: 32})
	require.NoError(t, err)
	for i := range 32 + 64 + 128 + 100 {
		require.NoError(t, db.Update(ctx, func(tx *index.Tx) error {
			_, err := s.PutBytes(ctx, tx, smallFile(i))
			return err
		}))
	}
	// after the 32nd insert, 64 more, then 128 more: not every 32
	assert.Equal(t, 3, trainings)
	ds, err := s.Dicts(ctx)
	require.NoError(t, err)
	assert.Empty(t, ds)
}

// statHook fails the first Stat of the blob at h with fail.
type statHook struct {
	*cas.SQLiteStorage
	h    cas.Hash
	fail func(ctx context.Context, tx *index.Tx) error
}

func (r *statHook) Stat(ctx context.Context, tx *index.Tx, kind cas.Kind, h cas.Hash) (cas.Object, error) {
	if f := r.fail; f != nil && h == r.h {
		r.fail = nil
		if err := f(ctx, tx); err != nil {
			return cas.Object{}, err
		}
	}
	return r.SQLiteStorage.Stat(ctx, tx, kind, h)
}

// failing returns a failure that returns injected, having first ended
// the transaction it is given when ends is set, as SQLite ends a whole
// transaction on some full-disk and I/O errors.
func failing(t *testing.T, injected error, ends bool) func(ctx context.Context, tx *index.Tx) error {
	return func(ctx context.Context, tx *index.Tx) error {
		if ends {
			_, err := tx.ExecContext(ctx, `ROLLBACK`)
			require.NoError(t, err)
		}
		return injected
	}
}

// unloadedDict returns a store whose newest dictionary writer trained
// (from the small files heads) and listed, and a Store s over it, with
// the hook on its storage, that has not loaded the dictionary yet, as
// after a restart: the first Stat of its blob through s fails with fail.
func unloadedDict(t *testing.T, fail func(ctx context.Context, tx *index.Tx) error) (db *index.DB, writer *cas.Store, heads []cas.Hash, s *cas.Store, hook *statHook) {
	t.Helper()
	db = storetest.OpenDB(t, index.Options{})
	writer, err := cas.New(db, cas.Options{DictTrainAfter: 32})
	require.NoError(t, err)
	heads = putSmallFiles(t, writer, 40)
	ds, err := writer.Dicts(context.Background())
	require.NoError(t, err)
	require.NotEmpty(t, ds, "a dictionary is listed")
	hook = &statHook{SQLiteStorage: cas.NewSQLiteStorage(), h: ds[len(ds)-1].Hash, fail: fail}
	s, err = cas.New(db, cas.Options{Storage: hook, DictTrainAfter: -1})
	require.NoError(t, err)
	return db, writer, heads, s, hook
}

// TestDictLoadThatFailsInAWrite: a write whose newest dictionary does not
// load stores its content without it and commits, unless the failure
// ended the transaction itself (as SQLite does on some full-disk and I/O
// errors): then the write fails and nothing of it commits, not even what
// the caller ran after it.
func TestDictLoadThatFailsInAWrite(t *testing.T) {
	ctx := context.Background()
	injected := errors.New("injected")
	for _, ends := range []bool{false, true} {
		t.Run(fmt.Sprintf("ends=%v", ends), func(t *testing.T) {
			db, _, _, s, hook := unloadedDict(t, failing(t, injected, ends))
			before := blobCount(t, db)
			err := db.Update(ctx, func(tx *index.Tx) error {
				for i := 100; i < 103; i++ {
					if _, err := s.PutBytes(ctx, tx, smallFile(i)); err != nil {
						return err
					}
				}
				return nil
			})
			require.Nil(t, hook.fail, "the write loaded the dictionary")
			if ends {
				require.ErrorIs(t, err, injected)
				assert.Equal(t, before, blobCount(t, db), "nothing of the write committed")
			} else {
				require.NoError(t, err)
				assert.Equal(t, before+3, blobCount(t, db))
				for i := 100; i < 103; i++ {
					b, err := s.ReadAll(ctx, cas.Sum(smallFile(i)))
					require.NoError(t, err)
					assert.Equal(t, smallFile(i), b)
				}
			}
			rep, err := s.Verify(ctx, nil)
			require.NoError(t, err)
			assert.Empty(t, rep.Problems)
		})
	}
}

// blobsState sums up the blob rows and the queue, to tell whether a
// transaction changed anything.
func blobsState(t *testing.T, db *index.DB) string {
	t.Helper()
	var s string
	require.NoError(t, db.View(context.Background(), func(tx *index.Tx) error {
		return tx.GetContext(context.Background(), &s, `SELECT (SELECT count(*) || '/' || total(stored) || '/' || total(codec) FROM blobs)
			|| ' queued ' || (SELECT count(*) FROM blob_reencodes)`)
	}))
	return s
}

// TestDictLoadThatFailsInAJob: a queued job that compresses a raw version
// with the newest dictionary, which does not load, compresses it without;
// a failure that ended the job's transaction fails the job, and nothing of
// it commits.
func TestDictLoadThatFailsInAJob(t *testing.T) {
	ctx := context.Background()
	injected := errors.New("injected")
	for _, ends := range []bool{false, true} {
		t.Run(fmt.Sprintf("ends=%v", ends), func(t *testing.T) {
			db, writer, heads, s, hook := unloadedDict(t, failing(t, injected, ends))
			for i := range 3 {
				_, err := writer.PutVersion(ctx, nil, append(smallFile(i), "\nedited\n"...), heads[i])
				require.NoError(t, err)
			}
			before := blobsState(t, db)
			require.Contains(t, before, "queued 3")
			_, err := s.Drain(ctx)
			require.Nil(t, hook.fail, "a job loaded the dictionary")
			if ends {
				require.ErrorIs(t, err, injected)
				assert.Equal(t, before, blobsState(t, db), "nothing of the job committed")
			} else {
				require.NoError(t, err)
				assert.Contains(t, blobsState(t, db), "queued 0")
			}
			for i := range 3 {
				b, err := s.ReadAll(ctx, cas.Sum(append(smallFile(i), "\nedited\n"...)))
				require.NoError(t, err)
				assert.Equal(t, append(smallFile(i), "\nedited\n"...), b)
			}
			rep, err := s.Verify(ctx, nil)
			require.NoError(t, err)
			assert.Empty(t, rep.Problems)
		})
	}
}
