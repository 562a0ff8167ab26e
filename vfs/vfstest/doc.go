// Package vfstest is the conformance suite for vfs.FS and vfs.WriteFS: one
// set of checks that every resource kind (stored trees, virtual providers,
// host mounts) runs against its implementation, in the manner of
// testing/fstest. A resource kind that passes it behaves the same for an
// agent tool as every other one: the same error codes for the same
// mistakes, the same line and char ranges, the same listing order, and no
// change left behind by a failed write.
package vfstest
