package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/index"
)

// TestExportOfARowPastTheCapKeepsItsCode: a row longer than an archive
// holds (64 MiB) is workspace.size_limit_exceeded from wsctl export, as
// from batch export and the Go API, not a command-line mistake: the
// command line was right, the store holds what no import reads back.
func TestExportOfARowPastTheCapKeepsItsCode(t *testing.T) {
	c := newCLI(t)
	st := c.open()
	c.seedRun(st, "r1")
	// A chatRef of 34 MiB whose quotes double as the row's JSON, written
	// as an older build let it be written.
	ref := `"` + strings.Repeat(`\"`, 17<<20) + `"`
	require.NoError(t, st.DB.Update(context.Background(), func(tx *index.Tx) error {
		_, err := tx.ExecContext(context.Background(), `UPDATE runs SET chat_ref = ? WHERE id = 'r1'`, ref)
		return err
	}))
	require.NoError(t, st.Close())

	file := filepath.Join(t.TempDir(), "r1.wsar")
	errOut := c.fails(4, "export", "--run", "r1", file)
	assert.Contains(t, errOut, "workspace.size_limit_exceeded")
	assert.NoFileExists(t, file)
}
