package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/wserr"
)

// An export to the file batch's responses go to (its output redirected to
// a file, named by that file's path) is refused: the archive would replace
// the file, and the responses after it would go nowhere a host reads.
func TestBatchExportRefusesItsOwnOutput(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	outPath := filepath.Join(t.TempDir(), "responses.jsonl")
	out, err := os.Create(outPath)
	require.NoError(t, err)
	defer out.Close()
	input := strings.Join([]string{
		`{"op":"run.create","chat":{"kind":"character","stableChatId":"s1"},"runId":"r1"}`,
		`{"op":"export","id":"exp","path":` + quote(outPath) + `,"runs":["r1"]}`,
		`{"op":"list","id":"after"}`,
	}, "\n") + "\n"
	var errOut strings.Builder
	code := execute(context.Background(), c.app(), []string{"--store", c.store, "batch"}, strings.NewReader(input), out, &errOut)
	require.Equal(t, 0, code, errOut.String())

	b, err := os.ReadFile(outPath)
	require.NoError(t, err)
	rs := decodeResponses(t, string(b))
	require.Len(t, rs, 3, "one response a request, all in the file")
	assert.False(t, rs[1].OK)
	assert.Equal(t, string(wserr.InvalidArgument), rs[1].code())
	assert.Contains(t, rs[1].Error.Message, "standard output")
	assert.JSONEq(t, `"after"`, string(rs[2].ID))
	assert.True(t, rs[2].OK)
}

// An import of batch's own standard input (/proc/self/fd/N of its pipe) is
// refused at once, rather than waiting for the host's next lines and
// reading them as the archive: every request after it is answered.
func TestBatchImportRefusesItsOwnInput(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("names the input pipe by /proc/self/fd")
	}
	t.Parallel()
	c := newCLI(t)
	inR, inW, err := os.Pipe()
	require.NoError(t, err)
	defer inR.Close()
	defer inW.Close()
	outR, outW := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- execute(context.Background(), c.app(), []string{"--store", c.store, "batch"}, inR, outW, io.Discard)
		outW.Close()
	}()
	answers := make(chan resp)
	go func() {
		defer close(answers)
		br := bufio.NewReader(outR)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			var r resp
			if json.Unmarshal([]byte(line), &r) == nil {
				answers <- r
			}
		}
	}()
	next := func() resp {
		t.Helper()
		select {
		case r, ok := <-answers:
			require.True(t, ok, "batch ended early")
			return r
		case <-time.After(20 * time.Second):
			require.FailNow(t, "no answer: the import waits for the host's input")
			return resp{}
		}
	}
	self := "/proc/self/fd/" + strconv.Itoa(int(inR.Fd()))
	_, err = io.WriteString(inW, `{"op":"run.create","chat":{"kind":"character","stableChatId":"s1"},"runId":"r1"}`+"\n")
	require.NoError(t, err)
	require.True(t, next().OK)
	_, err = io.WriteString(inW, `{"op":"import","id":"imp","path":`+quote(self)+`}`+"\n")
	require.NoError(t, err)
	r := next()
	assert.JSONEq(t, `"imp"`, string(r.ID))
	assert.Equal(t, string(wserr.InvalidArgument), r.code())
	assert.Contains(t, r.Error.Message, "standard input")

	_, err = io.WriteString(inW, `{"op":"list","id":"after"}`+"\n")
	require.NoError(t, err)
	r = next()
	assert.JSONEq(t, `"after"`, string(r.ID))
	assert.True(t, r.OK)
	require.NoError(t, inW.Close())
	assert.Equal(t, 0, <-done)
}
