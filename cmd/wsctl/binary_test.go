package main

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

var (
	builtOnce sync.Once
	builtPath string
	builtErr  error
)

// TestMain removes the binary wsctlBinary built once every test ran. It
// turns SQLite's count of its heap on first, as the sql command does as
// it starts: the tests run sql in process after others used SQLite.
func TestMain(m *testing.M) {
	if err := enableMemStatus(); err != nil {
		panic(err)
	}
	code := m.Run()
	if builtPath != "" {
		os.RemoveAll(filepath.Dir(builtPath))
	}
	os.Exit(code)
}

// wsctlBinary builds the wsctl binary once per test process and returns
// its path; the campaigns run it as a child, as a host would. It skips
// the test in -short mode or when there is no go command.
func wsctlBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build wsctl with")
	}
	builtOnce.Do(func() {
		dir, err := os.MkdirTemp("", "wsctl-bin-")
		if err != nil {
			builtErr = err
			return
		}
		builtPath = filepath.Join(dir, "wsctl")
		if runtime.GOOS == "windows" {
			builtPath += ".exe"
		}
		build := exec.Command(goBin, "build", "-o", builtPath, ".")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, err := build.CombinedOutput()
		if err != nil {
			builtErr = errors.Join(err, errors.New(string(out)))
		}
	})
	if builtErr != nil {
		t.Fatalf("go build: %v", builtErr)
	}
	return builtPath
}

// exitStatusOf returns the exit status err (from exec.Cmd.Wait or Run)
// carries: 0 for nil, -1 if the process did not exit normally.
func exitStatusOf(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// binCLI runs the built wsctl on one store.
type binCLI struct {
	t     *testing.T
	bin   string
	store string
}

// run runs wsctl --store store args with stdin and returns stdout, stderr
// and the exit status.
func (c binCLI) run(stdin string, args ...string) (string, string, int) {
	c.t.Helper()
	cmd := exec.Command(c.bin, append([]string{"--store", c.store}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	status := exitStatusOf(err)
	require.NotEqual(c.t, -1, status, "%v: %v", args, err)
	return out.String(), errOut.String(), status
}

// batch runs one batch session and returns each response's error code
// ("" for ok), in order.
func (c binCLI) batch(lines ...string) []string {
	c.t.Helper()
	out, errOut, status := c.run(strings.Join(lines, "\n")+"\n", "batch")
	require.Equal(c.t, 0, status, errOut)
	var codes []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var r struct {
			OK    bool `json:"ok"`
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		require.NoError(c.t, json.Unmarshal([]byte(l), &r), l)
		if !r.OK && r.Error.Code == "" {
			r.Error.Code = "?"
		}
		codes = append(codes, r.Error.Code)
	}
	require.Len(c.t, codes, len(lines), out)
	return codes
}

func writeLine(run, path, content string) string {
	b, _ := json.Marshal(map[string]any{"op": "write", "runId": run, "path": path, "content": content})
	return string(b)
}

const createLine = `{"op":"run.create","chat":{"kind":"character","stableChatId":"f"},"runId":"r"}`

// TestDemoRemovesItsStoreWhenItsReaderGoes: `wsctl demo | head -1` does
// not leave the temporary store behind: a reader that goes away does not
// end demo before it removes it.
func TestDemoRemovesItsStoreWhenItsReaderGoes(t *testing.T) {
	bin := wsctlBinary(t)
	tmp := t.TempDir()
	cmd := exec.Command(bin, "demo")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	line := make([]byte, 1)
	_, err = out.Read(line)
	require.NoError(t, err)
	require.NoError(t, out.Close()) // the reader goes, as head's does
	require.NoError(t, cmd.Wait(), "demo ends quietly")
	left, err := filepath.Glob(filepath.Join(tmp, "wsctl-demo-*"))
	require.NoError(t, err)
	require.Empty(t, left, "the temporary store is removed")
}
