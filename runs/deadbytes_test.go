package runs_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

// TestWriteCountsReplacedAsStored: the automatic checkpoint of a write
// counts the version the write replaced at its stored size as the
// transaction leaves it, which the byte cap prunes by. Two files share
// each version; the other file's write queues a re-encoding of it, and
// with a queue of one the next write runs that job itself after queueing
// its own, re-encoding the very version it replaced before its
// checkpoint. A version stored in chunks counts its chunks too.
func TestWriteCountsReplacedAsStored(t *testing.T) {
	for name, opts := range map[string]cas.Options{
		"Queued":        {ReencodeIdle: time.Hour},
		"JobRunInWrite": {ReencodeIdle: time.Hour, MaxPending: 1},
		"Chunked":       {ReencodeIdle: time.Hour, InlineMax: 16 << 10},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := storetest.OpenStoreWith(t, wsstore.Options{Now: storetest.NewClock().Now, CAS: opts})
			run, err := s.Runs.CreateRun(ctx, runs.CreateRequest{Chat: testChat})
			require.NoError(t, err)
			ws := s.Runs.Workspace(run.ID, runs.ModelScope)
			p := vfs.MustPath("output/main.md")
			doc := []byte(strings.Repeat("The keeper lit the lamp at dusk and watched the ships pass.\n", 80))
			if name == "Chunked" {
				doc = []byte(strings.Repeat("The keeper lit the lamp at dusk and watched the ships pass.\n", 1000))
			}
			other := vfs.MustPath("output/copy.md")
			for _, q := range []vfs.Path{p, other} {
				_, err = ws.Write(ctx, q, doc, vfs.WriteOptions{})
				require.NoError(t, err)
			}
			for i := range 6 {
				_, err = ws.Write(ctx, other, fmt.Appendf(nil, "Copy %d.\n%s", i, doc[:4000]), vfs.WriteOptions{})
				require.NoError(t, err)
				before, err := ws.Stat(ctx, p)
				require.NoError(t, err)
				next := fmt.Appendf(nil, "Round %d.\n%s", i, doc[:4000])
				fi, err := ws.Write(ctx, p, next, vfs.WriteOptions{})
				require.NoError(t, err)
				require.NotEmpty(t, fi.Checkpoint)
				var dead, stored int64
				require.NoError(t, s.DB.View(ctx, func(tx *index.Tx) error {
					if err := tx.GetContext(ctx, &dead, `SELECT dead_bytes FROM checkpoints WHERE run_id = ? ORDER BY seq DESC LIMIT 1`, run.ID); err != nil {
						return err
					}
					return tx.GetContext(ctx, &stored, `SELECT b.stored + coalesce((SELECT sum(c.stored) FROM chunks c
						WHERE c.hash IN (SELECT chunk FROM blob_chunks WHERE blob = b.hash)), 0) FROM blobs b WHERE b.hash = ?`, before.Hash)
				}))
				assert.Positive(t, stored, "write %d", i)
				assert.Equal(t, stored, dead, "write %d: dead bytes of its checkpoint against the replaced version as stored", i)
				_, err = ws.Write(ctx, other, next, vfs.WriteOptions{})
				require.NoError(t, err)
			}
		})
	}
}
