package cas_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
)

const rowidSchema = `DROP TABLE blob_chunks; DROP TABLE chunks; DROP TABLE blobs;
CREATE TABLE blobs (hash BLOB PRIMARY KEY, size INTEGER NOT NULL, stored INTEGER NOT NULL, codec INTEGER NOT NULL,
    base BLOB, depth INTEGER NOT NULL DEFAULT 0, data BLOB, created INTEGER NOT NULL);
CREATE TABLE chunks (hash BLOB PRIMARY KEY, size INTEGER NOT NULL, stored INTEGER NOT NULL, codec INTEGER NOT NULL,
    data BLOB NOT NULL, created INTEGER NOT NULL);
CREATE TABLE blob_chunks (blob BLOB NOT NULL REFERENCES blobs (hash) ON DELETE CASCADE, idx INTEGER NOT NULL,
    chunk BLOB NOT NULL REFERENCES chunks (hash), off INTEGER NOT NULL, PRIMARY KEY (blob, idx)) WITHOUT ROWID;`

func TestProbeSchemas(t *testing.T) {
	for _, rowid := range []bool{false, true} {
		for _, ps := range []int{4096, 65536} {
			t.Run(fmt.Sprintf("rowid=%v/page=%d", rowid, ps), func(t *testing.T) {
				ctx := context.Background()
				path := storetest.NewPath(t)
				raw, err := sql.Open("sqlite", path)
				require.NoError(t, err)
				_, err = raw.Exec(fmt.Sprintf("PRAGMA page_size=%d; CREATE TABLE x(y); DROP TABLE x;", ps))
				require.NoError(t, err)
				raw.Close()
				db := storetest.OpenDBAt(t, path, index.Options{})
				if rowid {
					exec(t, db, rowidSchema)
				}
				s, _ := cas.New(db, cas.Options{})
				var hs []cas.Hash
				start := time.Now()
				for n := 1; n <= 128; n++ {
					h, err := s.PutBytes(ctx, nil, randomBytes(1<<20, uint64(n)))
					require.NoError(t, err)
					hs = append(hs, h)
				}
				putSmall := time.Since(start)
				start = time.Now()
				for _, h := range hs {
					s.Has(ctx, h)
				}
				has := time.Since(start) / time.Duration(len(hs))
				start = time.Now()
				for _, h := range hs {
					_, err := s.ReadAll(ctx, h)
					require.NoError(t, err)
				}
				getSmall := time.Since(start)
				start = time.Now()
				h, err := s.Put(ctx, io.LimitReader(randomReader(1), 128<<20))
				require.NoError(t, err)
				putBig := time.Since(start)
				start = time.Now()
				rc, _ := s.Get(ctx, h)
				io.Copy(io.Discard, rc)
				getBig := time.Since(start)
				mb := func(n int, d time.Duration) string { return fmt.Sprintf("%.0f MB/s", float64(n)/d.Seconds()/1e6) }
				t.Logf("put 1MiB x128 %s, has %v, get 1MiB %s, put 128MiB %s, get 128MiB %s",
					mb(128<<20, putSmall), has, mb(128<<20, getSmall), mb(128<<20, putBig), mb(128<<20, getBig))
			})
		}
	}
}
