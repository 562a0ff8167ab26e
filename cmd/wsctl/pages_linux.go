package main

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// dropCodePages tells the kernel this process no longer needs the pages
// of its own executable it has touched so far (madvise MADV_DONTNEED on
// each mapping of the file that cannot be written: code and read-only
// data). They stay in the page cache; the ones the process touches again
// come back on the next access, one fault each, and the rest, which
// opening the store and package initialization touched once, leave its
// resident set. Writable mappings (initialized data) are left alone, as
// dropping them would reset their content to the file's. Errors are
// ignored: this only lowers the resident set, nothing depends on it.
func dropCodePages() {
	exe, err := os.Executable()
	if err != nil {
		return
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return
	}
	defer f.Close()
	type span struct{ lo, hi uintptr }
	var spans []span
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// address perms offset dev inode path
		line := sc.Text()
		fields := strings.Fields(line)
		at := strings.IndexByte(line, '/')
		if len(fields) < 6 || at < 0 || line[at:] != exe || strings.ContainsRune(fields[1], 'w') {
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		if !ok {
			continue
		}
		l, err1 := strconv.ParseUint(lo, 16, 64)
		h, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || h <= l {
			continue
		}
		spans = append(spans, span{uintptr(l), uintptr(h)})
	}
	for _, s := range spans {
		_, _, _ = syscall.Syscall(syscall.SYS_MADVISE, s.lo, s.hi-s.lo, syscall.MADV_DONTNEED)
	}
}
