package archive

import (
	"bufio"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/wserr"
)

// TestReadRowLimit: a row of exactly the limit reads, with or without
// its newline and across the reader's buffer; one byte more is corrupt.
func TestReadRowLimit(t *testing.T) {
	const max = 40 // past bufio's 16-byte minimum buffer: several slices
	at := strings.Repeat("r", max)
	r := bufio.NewReaderSize(strings.NewReader(at+"\n"+at), 16)
	for range 2 {
		row, err := readRow(r, max)
		require.NoError(t, err)
		assert.Equal(t, at, string(row))
	}
	_, err := readRow(r, max)
	assert.Equal(t, io.EOF, err)

	for _, over := range []string{at + "r\n", at + "r"} {
		_, err := readRow(bufio.NewReaderSize(strings.NewReader(over), 16), max)
		assert.Equal(t, wserr.ArchiveCorrupt, wserr.CodeOf(err), "%q: %v", over, err)
	}
}
