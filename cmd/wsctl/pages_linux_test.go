package main

import (
	"bufio"
	"context"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// executableRSS returns the bytes of this process's own executable that
// are resident in its read-only mappings (/proc/self/smaps).
func executableRSS(t *testing.T) int64 {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	f, err := os.Open("/proc/self/smaps")
	require.NoError(t, err)
	defer f.Close()
	var total int64
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) >= 5 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":") {
			at := strings.IndexByte(line, '/')
			in = at >= 0 && line[at:] == exe && !strings.ContainsRune(fields[1], 'w')
			continue
		}
		if v, ok := strings.CutPrefix(line, "Rss:"); ok && in {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			require.NoError(t, err, line)
			total += kb << 10
		}
	}
	require.NoError(t, sc.Err())
	return total
}

// TestDropCodePages checks that dropCodePages takes the executable's
// pages out of the resident set and that the process runs on, faulting
// back in what it uses.
func TestDropCodePages(t *testing.T) {
	before := executableRSS(t)
	if before == 0 {
		t.Skip("the executable's mappings are not in /proc/self/smaps")
	}
	dropCodePages()
	after := executableRSS(t)
	t.Logf("executable's resident pages: %.1f MiB before, %.1f MiB after", float64(before)/(1<<20), float64(after)/(1<<20))
	assert.Less(t, after, before/2, "the pages touched so far left the resident set")
	// Code and read-only data still read as they were: a command runs.
	var out, errOut strings.Builder
	code := execute(context.Background(), newApp(), []string{"version", "--json"}, strings.NewReader(""), &out, &errOut)
	assert.Zero(t, code, errOut.String())
	assert.Contains(t, out.String(), "github.com/wsstore/wsstore")
}
