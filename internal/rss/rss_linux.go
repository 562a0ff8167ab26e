package rss

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// pollEvery is how often Peak reads the child's high-water mark while it
// runs.
const pollEvery = time.Millisecond

// inheritSlack is how far above the parent's VmHWM a child's ru_maxrss
// may lie and still be the parent's mark. Go starts children with vfork,
// and exec folds the parent's high-water mark into the child's ru_maxrss;
// exec reads that mark from the kernel's per-CPU counters, which lag the
// exact figure /proc reports by up to a batch of pages per CPU (a few
// hundred KiB on two CPUs, tens of MiB on a large host).
const inheritSlack = 32 << 20

// peak polls /proc/PID/status for VmHWM while the child runs: the mark is
// kept by the kernel, so a sample misses only growth in the last interval
// before exit. wait4's ru_maxrss closes that gap when it can be trusted:
// it is the child's own peak only when it is above the parent's mark by
// more than inheritSlack.
func peak(cmd *exec.Cmd) (int64, error) {
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	parent, _ := hwm("/proc/self/status")
	path := "/proc/" + strconv.Itoa(cmd.Process.Pid) + "/status"
	var (
		mu   sync.Mutex
		seen int64
		stop = make(chan struct{})
		wg   sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(pollEvery)
		defer tick.Stop()
		for {
			if n, ok := hwm(path); ok {
				mu.Lock()
				seen = max(seen, n)
				mu.Unlock()
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	err := cmd.Wait()
	close(stop)
	wg.Wait()
	if after, ok := hwm("/proc/self/status"); ok {
		parent = max(parent, after)
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		seen = childPeak(seen, int64(ru.Maxrss)<<10, parent)
	}
	return seen, err
}

// childPeak is the child's peak from the mark polled while it ran, its
// ru_maxrss and the parent's own mark: ru_maxrss counts only when it
// cannot be the parent's.
func childPeak(polled, maxrss, parent int64) int64 {
	if maxrss > parent+inheritSlack {
		return max(polled, maxrss)
	}
	return polled
}

// hwm reads the VmHWM line of a /proc status file, in bytes. It reports
// false once the process is gone or has released its memory.
func hwm(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	_, rest, ok := bytes.Cut(b, []byte("\nVmHWM:"))
	if !ok {
		return 0, false
	}
	line, _, _ := bytes.Cut(rest, []byte("\n"))
	f := bytes.Fields(line) // "1234", "kB"
	if len(f) != 2 || string(f[1]) != "kB" {
		return 0, false
	}
	n, err := strconv.ParseInt(string(f[0]), 10, 64)
	if err != nil {
		return 0, false
	}
	return n << 10, true
}
