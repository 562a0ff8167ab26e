package remote_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/cas/storagetest"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/remote"
	"github.com/wsstore/wsstore/remote/s3fake"
	"github.com/wsstore/wsstore/wserr"
)

// testEnv points the AWS SDK at the test credentials (s3fake.TestEnv).
func testEnv(t testing.TB) { s3fake.TestEnv(t) }

// fakeBucket starts the in-process object store with bucket "bkt", under
// testEnv's credentials, and stops it when the test ends.
func fakeBucket(t testing.TB) *s3fake.Server {
	t.Helper()
	testEnv(t)
	srv := s3fake.New("bkt")
	t.Cleanup(srv.Close)
	return srv
}

func openDB(t *testing.T) *index.DB {
	t.Helper()
	db, err := index.Open(context.Background(), filepath.Join(t.TempDir(), "wsstore.db"), index.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}

func openStorage(t testing.TB, endpoint, bucket, prefix string, opts remote.Options) *remote.Storage {
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

// TestNoCredentialsIsAnOptionsError: with no credentials anywhere (none in
// the environment or the shared files, no instance metadata), a request
// fails with store.invalid_options, which says to fix the set-up, not
// store.busy, which says to try again later.
func TestNoCredentialsIsAnOptionsError(t *testing.T) {
	testEnv(t)
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	srv := s3fake.New("bkt")
	t.Cleanup(srv.Close)
	db := openDB(t)
	st := openStorage(t, srv.URL, "bkt", "store", remote.Options{MaxAttempts: 1})
	_, err := st.Pull(context.Background(), db)
	require.Error(t, err)
	assert.Equal(t, wserr.InvalidOptions, wserr.CodeOf(err), "%v", err)
	assert.Contains(t, err.Error(), "no credentials")
}
