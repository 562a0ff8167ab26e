// Package rss measures the peak resident set size of a child process, so
// a test can run a real binary and assert that its memory stays bounded
// whatever the size of its input. Peak reports the kernel's high-water
// mark of the child's own address space (VmHWM), never the parent's.
package rss
