package httpapi_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/internal/storetest"
)

// vmHWM returns the peak resident set size of process pid, in bytes
// (VmHWM in /proc/PID/status).
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			require.NoError(t, err, line)
			return kb << 10
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}

// resetHWM sets process pid's peak resident set size back to its current
// one (clear_refs 5), so the next peak is the next step's; it reports
// whether the system allows it.
func resetHWM(pid int) bool {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0) == nil
}

// child is wsctl serve running in its own process on a fresh store.
type child struct {
	cmd   *exec.Cmd
	url   string
	token string
	log   bytes.Buffer
}

// startServe builds wsctl, creates a token and starts wsctl serve on a
// loopback port. The process is interrupted when the test ends.
func startServe(t *testing.T) *child {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build wsctl with")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "wsctl")
	out, err := exec.Command(gobin, "build", "-o", bin, "github.com/wsstore/wsstore/cmd/wsctl").CombinedOutput()
	require.NoError(t, err, "%s", out)
	store := filepath.Join(dir, "store")
	out, err = exec.Command(bin, "--store", store, "token", "create").Output()
	require.NoError(t, err, "%s", out)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	c := &child{token: lines[len(lines)-1]}

	c.cmd = exec.Command(bin, "--store", store, "serve", "--listen", "127.0.0.1:0", "--json")
	c.cmd.Stderr = &c.log
	stdout, err := c.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, c.cmd.Start())
	t.Cleanup(func() {
		_ = c.cmd.Process.Signal(syscall.SIGINT)
		done := make(chan error, 1)
		go func() { done <- c.cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = c.cmd.Process.Kill()
			<-done
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err, "the startup line; log: %s", &c.log)
	var start struct{ URL string }
	require.NoError(t, json.Unmarshal([]byte(line), &start), line)
	c.url = start.URL
	go io.Copy(io.Discard, stdout)
	return c
}

func (c *child) do(t *testing.T, method, path string, body io.Reader) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, c.url+path, body)
	require.NoError(t, err)
	if body != nil {
		req.ContentLength = -1 // chunked: the size is not announced
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	return resp
}

// TestServeRSS streams a generated file up to wsctl serve, down again, a
// range of it and an export of it, and measures the server process's peak
// resident set size (VmHWM) through each: all under 64 MiB, whatever the
// file's size (32 MiB by default; 1 GiB with -httpapi.huge).
func TestServeRSS(t *testing.T) {
	if testing.Short() {
		t.Skip("builds wsctl and streams 32 MiB")
	}
	size := int64(32 << 20)
	if *huge {
		size = 1 << 30
	}
	const limit = 64 << 20
	c := startServe(t)
	pid := c.cmd.Process.Pid
	idle := vmHWM(t, pid)
	t.Logf("wsctl serve at start: VmHWM %.1f MiB", float64(idle)/(1<<20))
	perStep := resetHWM(pid)
	peak := func(step string) {
		t.Helper()
		hwm := vmHWM(t, pid)
		st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		var parts []string
		for _, l := range strings.Split(string(st), "\n") {
			if strings.HasPrefix(l, "Rss") || strings.HasPrefix(l, "VmRSS") {
				parts = append(parts, strings.Join(strings.Fields(l), " "))
			}
		}
		t.Logf("%s of %d MiB: wsctl serve VmHWM %.1f MiB (now %s)", step, size>>20, float64(hwm)/(1<<20), strings.Join(parts, ", "))
		assert.Less(t, hwm, int64(limit), "%s: the server's peak RSS", step)
		if perStep {
			resetHWM(pid)
		}
	}

	resp := c.do(t, http.MethodPost, "/workspace/upload?actor=alice&path=big.log", storetest.Text(size))
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	peak("upload")

	resp = c.do(t, http.MethodGet, "/workspace/file?actor=alice&path=big.log", nil)
	cw := &compareWriter{want: storetest.Text(size)}
	_, err := io.Copy(cw, resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, size, cw.n)
	assert.False(t, cw.differ, "the downloaded bytes are the uploaded ones")
	peak("download")

	req, err := http.NewRequest(http.MethodGet, c.url+"/workspace/file?actor=alice&path=big.log", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Range", fmt.Sprintf("bytes=%d-", size/2))
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	assert.Equal(t, http.StatusPartialContent, resp.StatusCode)
	assert.Equal(t, size-size/2, n)
	peak("range download of the second half")

	arc, err := os.Create(filepath.Join(t.TempDir(), "alice.wsar"))
	require.NoError(t, err)
	defer arc.Close()
	resp = c.do(t, http.MethodGet, "/v1/export?actor=alice", nil)
	n, err = io.Copy(arc, resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Greater(t, n, size, "the archive holds the file")
	peak("export")

	_, err = arc.Seek(0, io.SeekStart)
	require.NoError(t, err)
	resp = c.do(t, http.MethodPost, "/v1/import", arc)
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	assert.Contains(t, string(b), `"unchanged":["actor alice"]`)
	peak("import of the export")
}
