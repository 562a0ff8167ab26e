package remote_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/cas/storagetest"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/remote"
	"github.com/wsstore/wsstore/remote/s3fake"
)

// testEnv sets credentials the fake and moto accept, so no test reads the
// machine's AWS files.
func testEnv(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

func openDB(t *testing.T) *index.DB {
	t.Helper()
	db, err := index.Open(context.Background(), filepath.Join(t.TempDir(), "wsstore.db"), index.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}

func openStorage(t *testing.T, endpoint, bucket, prefix string, opts remote.Options) *remote.Storage {
	t.Helper()
	if opts.MaxAttempts == 0 {
		opts.MaxAttempts = 2
	}
	if opts.MaxBackoff == 0 {
		opts.MaxBackoff = 10e6
	}
	st, err := remote.Open(context.Background(), fmt.Sprintf("s3://%s/%s?endpoint=%s&region=us-east-1", bucket, prefix, endpoint), opts)
	require.NoError(t, err)
	return st
}

func TestConformanceFake(t *testing.T) {
	testEnv(t)
	srv := s3fake.New("b")
	t.Cleanup(srv.Close)
	for _, mode := range []struct {
		name string
		opts remote.Options
	}{{"WriteBack", remote.Options{}}, {"WriteThrough", remote.Options{WriteThrough: true}}} {
		t.Run(mode.name, func(t *testing.T) {
			n := 0
			storagetest.Run(t, func(t *testing.T) (*index.DB, cas.Storage) {
				n++
				return openDB(t), openStorage(t, srv.URL, "b", fmt.Sprintf("%s-%d", mode.name, n), mode.opts)
			})
		})
	}
}

func TestConformanceMoto(t *testing.T) {
	testEnv(t)
	m := s3fake.StartMoto(t)
	m.CreateBucket("wsstore-test")
	n := 0
	storagetest.Run(t, func(t *testing.T) (*index.DB, cas.Storage) {
		n++
		return openDB(t), openStorage(t, m.URL, "wsstore-test", fmt.Sprintf("suite-%d", n), remote.Options{WriteThrough: true})
	})
}
