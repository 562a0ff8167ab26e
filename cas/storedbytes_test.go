package cas_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
)

// TestStoredBytesOfAChunkedBlob: a chunked blob's stored bytes are its
// row's and each distinct chunk's once, read in a fixed number of
// statements however many chunks it has (a checkpoint after an edit of a
// large file counts them for the byte cap).
func TestStoredBytesOfAChunkedBlob(t *testing.T) {
	ctx := context.Background()
	var rec storetest.Statements
	db := storetest.OpenDB(t, index.Options{Trace: rec.Trace})
	s, err := cas.New(db, cas.Options{InlineMax: 64 << 10})
	require.NoError(t, err)
	r := rand.New(rand.NewPCG(3, 4))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b
	}
	block := random(3 << 20)
	for _, c := range []struct {
		name    string
		content []byte
	}{
		{"few chunks", random(3 << 20)},
		{"many chunks", random(24 << 20)},
		{"a repeated stretch", bytes.Join([][]byte{block, random(1 << 20), block}, nil)},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, err := s.Put(ctx, bytes.NewReader(c.content))
			require.NoError(t, err)
			var want, chunks int64
			require.NoError(t, db.View(ctx, func(tx *index.Tx) error {
				if err := tx.GetContext(ctx, &chunks, `SELECT count(*) FROM blob_chunks WHERE blob = ?`, h); err != nil {
					return err
				}
				return tx.GetContext(ctx, &want, `SELECT b.stored + (SELECT sum(c.stored) FROM chunks c
					WHERE c.hash IN (SELECT DISTINCT chunk FROM blob_chunks WHERE blob = b.hash)) FROM blobs b WHERE b.hash = ?`, h)
			}))
			require.Greater(t, chunks, int64(1), "the content is chunked")

			var got int64
			stmts := rec.Record(func() {
				require.NoError(t, db.View(ctx, func(tx *index.Tx) error {
					var err error
					got, err = s.StoredBytes(ctx, tx, h)
					return err
				}))
			})
			assert.Equal(t, want, got)
			assert.LessOrEqual(t, len(stmts), 2, "statements for %d chunks: %v", chunks, stmts)
		})
	}
}
