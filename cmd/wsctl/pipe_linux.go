package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// growPipe raises the capacity of f, when f is a pipe, to pipeSize or the
// most the system allows an unprivileged process
// (/proc/sys/fs/pipe-max-size), and reports the capacity it has. A
// request line or a response larger than a pipe's default 64 KiB crosses
// in as many turns, each waiting for the other process to wake; in one
// write it crosses once (bench/RESULTS.md: a 231 KB line's round trip to
// a process that reads it whole and answers took 620–655 µs beyond the
// work at 64 KiB, 230–280 µs at 1 MiB). Anything but a pipe is left as it
// is, and a refusal leaves the pipe as it was: the batch works the same,
// only slower for large lines.
func growPipe(v any) int {
	f, ok := v.(*os.File)
	if !ok {
		return 0
	}
	if fi, err := f.Stat(); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		return 0
	}
	// Through SyscallConn, unlike Fd, the file keeps its blocking mode.
	rc, err := f.SyscallConn()
	if err != nil {
		return 0
	}
	size := 0
	_ = rc.Control(func(fd uintptr) {
		if cur, err := unix.FcntlInt(fd, unix.F_GETPIPE_SZ, 0); err == nil && cur >= pipeSize {
			size = cur
			return
		}
		for want := pipeSize; want > 64<<10; want /= 2 {
			if got, err := unix.FcntlInt(fd, unix.F_SETPIPE_SZ, want); err == nil {
				size = got
				return
			}
		}
		size, _ = unix.FcntlInt(fd, unix.F_GETPIPE_SZ, 0)
	})
	return size
}

// readerGone reports whether v is a pipe whose reading end is closed
// (`wsctl log --follow | head -1` once head exits): a follow with nothing
// new to write would otherwise never learn it, as only a write fails.
func readerGone(v any) bool {
	f, ok := v.(*os.File)
	if !ok {
		return false
	}
	if fi, err := f.Stat(); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		return false
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	gone := false
	_ = rc.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
		if n, err := unix.Poll(fds, 0); err == nil && n == 1 {
			gone = fds[0].Revents&(unix.POLLERR|unix.POLLHUP) != 0
		}
	})
	return gone
}
