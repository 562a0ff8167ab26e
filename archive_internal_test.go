package wsstore

import (
	"io/fs"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/wsstore/wsstore/wserr"
)

// TestArchiveOpenErrorCodes: the failures to open an archive file keep
// their meaning (a permission error is one this test can make as root).
func TestArchiveOpenErrorCodes(t *testing.T) {
	for want, errno := range map[wserr.Code]syscall.Errno{
		wserr.NotFound:        syscall.ENOENT,
		wserr.InvalidArgument: syscall.ELOOP,
		wserr.DiskFull:        syscall.ENOSPC,
		wserr.Internal:        syscall.EIO,
	} {
		err := archiveOpenError("import", "a.wsar", &fs.PathError{Op: "open", Path: "a.wsar", Err: errno})
		assert.Equal(t, want, wserr.CodeOf(err), "%v", err)
		assert.ErrorIs(t, err, errno)
	}
}
