package replica

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/wsstore/wsstore/remote"
	"github.com/wsstore/wsstore/wserr"
)

// TestRestoreErrorCodes: the failures of a restore that a test cannot
// make happen on a real object store and disk are coded by what failed:
// the local disk (full, or another error) or the restored database.
func TestRestoreErrorCodes(t *testing.T) {
	const url, path = "s3://b/meta", "/x/wsstore.db"
	for _, tc := range []struct {
		name string
		err  error
		want wserr.Code
	}{
		{"ErrDiskFull", fmt.Errorf("decode database: %w", &fs.PathError{Op: "write", Path: path + ".tmp", Err: syscall.ENOSPC}), wserr.DiskFull},
		{"ErrQuota", fmt.Errorf("create temp database path: %w", &fs.PathError{Op: "open", Path: path + ".tmp", Err: syscall.EDQUOT}), wserr.DiskFull},
		{"ErrLocalFile", fmt.Errorf("create temp database path: %w", &fs.PathError{Op: "open", Path: path + ".tmp", Err: syscall.EACCES}), wserr.Internal},
		{"ErrIntegrityCheck", errors.New("post-restore integrity check: integrity check failed: *** in database main ***"), wserr.Corrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := restoreError(url, path, tc.err)
			assert.Equal(t, tc.want, wserr.CodeOf(err), "%v", err)
			assert.NotContains(t, err.Error(), "post-restore integrity check:")
		})
	}
}

// TestSyncErrorCodes: a replication round is tried again (store.busy
// wrapping remote.ErrUnavailable) only when the object store did not
// answer; a failure of Litestream's local state is store.internal, which
// ends wsctl replicate rather than being retried for ever; a full disk
// store.disk_full; an untrusted certificate store.invalid_options.
func TestSyncErrorCodes(t *testing.T) {
	const path = "/x/wsstore.db"
	for _, tc := range []struct {
		name  string
		err   error
		want  wserr.Code
		retry bool
	}{
		{"Unanswered", fmt.Errorf("replica sync: %w", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}), wserr.Busy, true},
		{"ErrLocalState", fmt.Errorf("write ltx: %w", &fs.PathError{Op: "mkdir", Path: "/x/.wsstore.db-litestream/ltx/0", Err: syscall.ENOTDIR}), wserr.Internal, false},
		{"ErrDiskFull", fmt.Errorf("write ltx: %w", &fs.PathError{Op: "write", Path: "/x/ltx", Err: syscall.ENOSPC}), wserr.DiskFull, false},
		{"ErrUntrustedCertificate", &url.Error{Op: "Put", URL: "https://s3.example", Err: x509.UnknownAuthorityError{}}, wserr.InvalidOptions, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := syncError(path, tc.err)
			assert.Equal(t, tc.want, wserr.CodeOf(err), "%v", err)
			assert.Equal(t, tc.retry, errors.Is(err, remote.ErrUnavailable), "%v", err)
		})
	}
}
