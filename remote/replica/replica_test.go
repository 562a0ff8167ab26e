package replica_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/remote/replica"
	"github.com/wsstore/wsstore/wserr"
)

// TestCABundleIsRefusedClearly: Litestream's S3 client cannot take
// AWS_CA_BUNDLE (the SDK fails to add its roots to the client's own HTTP
// client), so replication and restore refuse it up front, saying what to
// use instead, before any request.
func TestCABundleIsRefusedClearly(t *testing.T) {
	t.Setenv("AWS_CA_BUNDLE", filepath.Join(t.TempDir(), "ca.pem"))
	url := "s3://wsb/replica?endpoint=http://127.0.0.1:1&region=us-east-1"
	err := replica.Restore(context.Background(), url, filepath.Join(t.TempDir(), "wsstore.db"), replica.Options{})
	require.Error(t, err)
	assert.Equal(t, wserr.InvalidOptions, wserr.CodeOf(err))
	assert.Contains(t, err.Error(), "SSL_CERT_FILE")
	_, err = replica.Start(context.Background(), filepath.Join(t.TempDir(), "wsstore.db"), url, replica.Options{Owner: testOwner})
	assert.Equal(t, wserr.InvalidOptions, wserr.CodeOf(err), "%v", err)
}
