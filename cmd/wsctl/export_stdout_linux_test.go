package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An export to a FILE that is standard output by another name
// (/dev/stdout, /proc/self/fd/1 of a pipe) prints its summary on standard
// error, as an export to "-" does: the archive alone goes down the pipe,
// so "wsctl export --all /dev/stdout | wsctl import -" imports it.
func TestExportToStandardOutputByNameKeepsTheSummaryOut(t *testing.T) {
	desk := newCLI(t)
	st := desk.open()
	desk.seedRun(st, "r1")
	require.NoError(t, st.Close())

	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	read := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(r)
		read <- b
	}()
	var errOut bytes.Buffer
	code := execute(context.Background(), desk.app(), []string{"--store", desk.store, "export", "--run", "r1", fmt.Sprintf("/proc/self/fd/%d", w.Fd())}, strings.NewReader(""), w, &errOut)
	require.NoError(t, w.Close())
	archiveBytes := <-read
	require.Equal(t, 0, code, errOut.String())
	assert.Contains(t, errOut.String(), "exported 1 chats, 1 runs", "the summary goes to standard error")
	assert.False(t, bytes.Contains(archiveBytes, []byte("exported 1 chats")), "the archive stream holds no summary")

	phone := newCLI(t)
	out, stderr, code := phone.runCtx(context.Background(), bytes.NewReader(archiveBytes), "import", "-")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "added 2")
}
