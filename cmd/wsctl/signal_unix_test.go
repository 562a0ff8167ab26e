//go:build unix

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptrace"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSecondInterruptEndsAtOnce: the first SIGINT stops `wsctl serve`
// from accepting and lets a request in flight finish (here an upload whose
// client has gone quiet, with an hour of --shutdown-timeout); a second one
// ends the process at once, as SIGINT's default does, and the store opens
// clean after it. So it does for a serve started with SIGINT ignored (a
// background job of a shell script), whose default is to ignore it: that
// one exits with status 130.
func TestSecondInterruptEndsAtOnce(t *testing.T) {
	t.Run("Default", func(t *testing.T) {
		testSecondInterrupt(t, func(bin string, args ...string) *exec.Cmd { return exec.Command(bin, args...) })
	})
	t.Run("StartedIgnoringIt", func(t *testing.T) {
		testSecondInterrupt(t, func(bin string, args ...string) *exec.Cmd {
			return exec.Command("sh", append([]string{"-c", `trap "" INT; exec "$0" "$@"`, bin}, args...)...)
		})
	})
}

func testSecondInterrupt(t *testing.T, command func(bin string, args ...string) *exec.Cmd) {
	c := binCLI{t: t, bin: wsctlBinary(t), store: filepath.Join(t.TempDir(), "store")}
	out, errOut, status := c.run("", "token", "create")
	require.Equal(t, 0, status, errOut)
	tok := lastLine(out)

	cmd := command(c.bin, "--store", c.store, "serve", "--listen", "127.0.0.1:0", "--json", "--shutdown-timeout", "1h")
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	go io.Copy(io.Discard, stdout)
	var start struct{ URL string }
	require.NoError(t, json.Unmarshal([]byte(line), &start), line)

	// An upload the server's handler is reading, whose body never ends.
	bodyR, bodyW := io.Pipe()
	defer bodyW.Close()
	continued := make(chan struct{})
	go func() {
		r, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
			Got100Continue: func() { close(continued) },
		}), http.MethodPost, start.URL+"/workspace/upload?actor=alice&path=slow.md", bodyR)
		if err != nil {
			close(continued)
			return
		}
		r.Header.Set("Authorization", "Bearer "+tok)
		r.Header.Set("Expect", "100-continue")
		client := &http.Client{Transport: &http.Transport{ExpectContinueTimeout: time.Hour}}
		if resp, err := client.Do(r); err == nil {
			resp.Body.Close()
		}
	}()
	_, err = bodyW.Write([]byte("never finished"))
	require.NoError(t, err)
	<-continued

	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	select {
	case err := <-exited:
		t.Fatalf("serve ended on the first interrupt with a request in flight: %v", err)
	case <-time.After(300 * time.Millisecond): // the shutdown waits for the upload
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	select {
	case err := <-exited:
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee)
		ws, ok := ee.Sys().(syscall.WaitStatus)
		require.True(t, ok)
		assert.True(t, ws.Signaled() && ws.Signal() == syscall.SIGINT || ws.Exited() && ws.ExitStatus() == 130, "ended by the second SIGINT: %v", err)
	case <-time.After(20 * time.Second): // the shutdown timeout is an hour
		t.Fatal("the second interrupt did not end serve")
	}

	_, errOut, status = c.run("", "fsck")
	assert.Equal(t, 0, status, errOut)
	assert.False(t, strings.Contains(errOut, "corrupt"), errOut)
}
