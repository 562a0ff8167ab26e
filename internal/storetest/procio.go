package storetest

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
)

// ProcIO returns the counter name ("rchar" or "wchar") of /proc/self/io:
// the bytes this process has read or written through system calls so
// far, whichever goroutine made them, the store's included. It skips t
// where the file or the counter is missing (not Linux).
func ProcIO(t testing.TB, name string) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/io")
	if err != nil {
		t.Skipf("no /proc/self/io: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+": "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("/proc/self/io: %s: %v", name, err)
			}
			return n
		}
	}
	t.Skipf("no %s in /proc/self/io", name)
	return 0
}
