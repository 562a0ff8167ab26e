package replica

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"

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
