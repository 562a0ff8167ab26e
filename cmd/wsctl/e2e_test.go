package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEndToEnd builds the wsctl binary and runs the README's commands on a
// fresh machine: nothing but temporary directories for the store, HOME and
// XDG_DATA_HOME.
func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	t.Parallel()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build wsctl with")
	}
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "wsctl")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	build := exec.Command(goBin, "build", "-o", bin, ".")
	build.Stderr = os.Stderr
	require.NoError(t, build.Run(), "go build")

	home, xdg, store := filepath.Join(tmp, "home"), filepath.Join(tmp, "xdg"), filepath.Join(tmp, "store")
	env := []string{"HOME=" + home, "XDG_DATA_HOME=" + xdg, "LocalAppData=" + filepath.Join(tmp, "appdata")}
	for _, kv := range os.Environ() {
		switch strings.SplitN(kv, "=", 2)[0] {
		case "HOME", "XDG_DATA_HOME", "WSSTORE_DIR", "LocalAppData", "LOCALAPPDATA":
		default:
			env = append(env, kv)
		}
	}
	withStore := append([]string{"WSSTORE_DIR=" + store}, env...)
	wsctl := func(env []string, stdin string, args ...string) (string, string, int) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		cmd.Stdin = strings.NewReader(stdin)
		var out, errOut strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else {
			require.NoError(t, err)
		}
		return out.String(), errOut.String(), code
	}

	// wsctl demo on a machine with no store.
	out, errOut, code := wsctl(withStore, "", "demo")
	require.Equal(t, 0, code, errOut)
	assert.Less(t, strings.Count(out, "\n"), 41)
	assert.Contains(t, out, "timeline")
	assert.Contains(t, out, "run_completed")
	assert.FileExists(t, filepath.Join(store, "wsstore.db"))

	out, errOut, code = wsctl(withStore, "", "runs")
	require.Equal(t, 0, code, errOut)
	assert.Regexp(t, `(?m)^demo_\S+\s+completed\s+chat_`, out)

	out, errOut, code = wsctl(withStore, "", "fsck")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "ok: no problems found")
	assert.NotContains(t, out, "\r", "no progress bar when piped")

	// A host session over the binary's stdin and stdout, one request at a
	// time.
	cmd := exec.Command(bin, "batch")
	cmd.Env = withStore
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	answers := bufio.NewReader(stdout)
	ask := func(line string) map[string]any {
		t.Helper()
		_, err := io.WriteString(stdin, line+"\n")
		require.NoError(t, err)
		got, err := answers.ReadString('\n')
		require.NoError(t, err)
		var r map[string]any
		require.NoError(t, json.Unmarshal([]byte(got), &r), got)
		return r
	}
	r := ask(`{"op":"run.create","chat":{"kind":"character","stableChatId":"e2e"},"runId":"e2e_run","inputs":{"prompt_snapshot.json":"{}"}}`)
	require.Equal(t, true, r["ok"], r)
	r = ask(`{"op":"write","path":"output/main.md","content":"from the host\n"}`)
	require.Equal(t, true, r["ok"], r)
	r = ask(`{"op":"write","path":"input/x","content":"no"}`)
	assert.Equal(t, false, r["ok"])
	r = ask("\x00\x01garbage")
	assert.Equal(t, "batch.invalid_json", r["error"].(map[string]any)["code"])
	r = ask(`{"op":"commit"}`)
	require.Equal(t, true, r["ok"], r)
	assert.Equal(t, "from the host\n", r["result"].(map[string]any)["message"].(map[string]any)["mes"])
	r = ask(`{"op":"finish"}`)
	require.Equal(t, true, r["ok"], r)
	require.NoError(t, stdin.Close())
	rest, err := io.ReadAll(answers)
	require.NoError(t, err)
	assert.Empty(t, rest)
	require.NoError(t, cmd.Wait())

	out, errOut, code = wsctl(withStore, "", "cat", "e2e_run", "output/main.md")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "from the host\n", out)

	// sql refuses writes and the runs stay.
	_, errOut, code = wsctl(withStore, "", "sql", "DELETE FROM runs")
	assert.Equal(t, 8, code)
	assert.Contains(t, errOut, "refused")
	out, _, code = wsctl(withStore, "", "sql", "SELECT count(*) AS runs FROM runs", "--json")
	require.Equal(t, 0, code)
	assert.JSONEq(t, `[{"runs":2}]`, out)

	_, _, code = wsctl(withStore, "", "frobnicate")
	assert.Equal(t, 2, code)
	out, _, code = wsctl(withStore, "", "--help")
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "Exit status:")

	// Without WSSTORE_DIR the store goes to the user's data directory.
	out, errOut, code = wsctl(env, "", "demo")
	require.Equal(t, 0, code, errOut)
	var def string
	switch runtime.GOOS {
	case "windows":
		def = filepath.Join(tmp, "appdata", "wsstore")
	case "darwin":
		def = filepath.Join(home, "Library", "Application Support", "wsstore")
	default:
		def = filepath.Join(xdg, "wsstore")
	}
	assert.Contains(t, out, def)
	assert.FileExists(t, filepath.Join(def, "wsstore.db"))
	_, errOut, code = wsctl(env, "", "fsck")
	assert.Equal(t, 0, code, errOut)
}
