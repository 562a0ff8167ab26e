// Package vfs presents every kind of workspace resource through one
// interface, and owns the structures that make a workspace cheap to version.
// It owns the trees table; maintenance reads tree rows only through its
// record readers, sweeps and checks (treemaint.go).
//
//   - Path is the WorkspacePath contract: a validated relative path. Paths
//     are parsed once, at the boundary; nothing else joins strings into
//     paths.
//   - Trees are Merkle directories: the canonical encoding of sorted entries
//     addressed by keyed BLAKE3, so a tree never shares an address with a
//     blob. A write rewrites only the trees on the path from the file to the
//     root (copy-on-write), and a diff skips equal subtrees by hash. A new
//     version of a directory is stored as a patch of the entries it changed
//     against an earlier version (skip-deltas, at most 8 patches deep; see
//     treepatch.go), so a write costs bytes in proportion to the change,
//     not to the size of the directories above it.
//   - FS is the one interface agent tools call, over materialized and
//     generated files (trees in the store), virtual resources (providers read
//     on demand, never stored, read-only) and host mounts (os.Root).
//     Optional abilities (writing, searching) are optional interfaces, as in
//     io/fs. A read-only view of any tree is an io/fs.FS.
package vfs
