package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

var (
	builtOnce sync.Once
	builtPath string
	builtErr  error
)

// TestMain removes the binary wsctlBinary built once every test ran.
func TestMain(m *testing.M) {
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
