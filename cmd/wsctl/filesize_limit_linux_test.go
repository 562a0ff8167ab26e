package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFilesPastTheFileSizeLimit: a file the file system takes no larger
// (EFBIG: the process's file size limit, or a FAT32 volume's 4 GiB) is
// met as a full disk is: export, checkout and actor download into a file,
// and cat, actor download and export to standard output redirected to a
// file, fail with store.disk_full (exit status 8), leaving no archive,
// hidden file or checkout directory behind.
func TestFilesPastTheFileSizeLimit(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash to set the file size limit with")
	}
	bin := wsctlBinary(t)
	c := binCLI{t: t, bin: bin, store: filepath.Join(t.TempDir(), "store")}
	big := randomLetters(5, 6, 1<<20)
	require.Equal(t, []string{"", ""}, c.batch(createLine, writeLine("r", "output/big.md", string(big))))
	bigFile := filepath.Join(t.TempDir(), "big.md")
	require.NoError(t, os.WriteFile(bigFile, big, 0o644))
	_, errOut, status := c.run("", "actor", "upload", "alice", "big.md", bigFile)
	require.Equal(t, 0, status, errOut)

	dir := t.TempDir()
	// limitedTo runs wsctl with a file size limit of kib KiB, its
	// standard output the file named by stdout if not "".
	limitedTo := func(kib int, stdout string, args ...string) (string, int) {
		t.Helper()
		_, errOut, status := fileLimited(bash, kib, stdout, bin, append([]string{"--store", c.store}, args...)...)
		return errOut, status
	}
	limited := func(stdout string, args ...string) (string, int) {
		t.Helper()
		return limitedTo(256, stdout, args...)
	}
	for _, args := range [][]string{
		{"export", "--all", filepath.Join(dir, "x.wsar")},
		{"checkout", "r", filepath.Join(dir, "co")},
		{"actor", "download", "alice", "big.md", filepath.Join(dir, "big.md")},
	} {
		errOut, status := limited("", args...)
		assert.Equal(t, 8, status, "%v: %s", args, errOut)
		assert.Contains(t, errOut, "store.disk_full", "%v", args)
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		assert.Empty(t, entries, "%v leaves nothing", args)
	}
	// The store's own files: SQLite reports the limit met growing its
	// log index as an I/O error, which no part codes; it prints with
	// store.internal, the code of its exit status, and changes nothing.
	errOut, status = limitedTo(16, "", "policy", "--set", "keepCompletedRuns=3")
	assert.Equal(t, 1, status, errOut)
	assert.Contains(t, errOut, "store.internal: ")
	out, errOut, status := c.run("", "--json", "policy")
	require.Equal(t, 0, status, errOut)
	assert.Contains(t, out, `"policy": {}`)

	// Standard output redirected to a file.
	for _, args := range [][]string{
		{"cat", "r", "output/big.md"},
		{"actor", "download", "alice", "big.md", "-"},
		{"export", "--all", "-"},
	} {
		errOut, status := limited(filepath.Join(t.TempDir(), "out"), args...)
		assert.Equal(t, 8, status, "%v: %s", args, errOut)
		assert.Contains(t, errOut, "store.disk_full", "%v", args)
	}
}

// fileLimited runs bin with args under a file size limit of kib KiB
// (through bash's ulimit), its standard output into the file stdout
// names, or returned when stdout is "", and returns that output, its
// standard error and its exit status.
func fileLimited(bash string, kib int, stdout, bin string, args ...string) (string, string, int) {
	script := fmt.Sprintf(`ulimit -f %d && exec "$@"`, kib)
	if stdout != "" {
		script += ` > "$WSCTL_TEST_OUT"`
	}
	cmd := exec.Command(bash, append([]string{"-c", script, "bash", bin}, args...)...)
	cmd.Env = append(os.Environ(), "WSCTL_TEST_OUT="+stdout)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	status := exitStatusOf(cmd.Run())
	return out.String(), errOut.String(), status
}
