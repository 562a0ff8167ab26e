// Package archive implements export and import of runs, chat workspaces,
// actor spaces and whole stores as one portable file (docs/archive.md
// describes the format).
//
// An archive is a tar stream written and read front to back: a manifest
// naming every blob and tree address it holds, the blobs as plain bytes,
// the trees in their canonical encoding (children before parents), the rows
// as JSON lines, and an end entry with a digest of everything before it.
// Nothing is held in memory whole: blobs stream through cas Put and Get.
//
// Import guarantees that nothing becomes visible unless the whole archive
// verified: every blob hashes to its address, every tree to its own and
// references only what came before it, every row references only trees in
// the archive, and the digest matches. Blobs and trees are stored as they
// verify (each is content-addressed, so one nothing references is garbage
// gc collects, never corruption); every row is written in one final
// transaction that commits only after the end entry checked out. A
// damaged archive fails with archive.corrupt, one of another format version
// with archive.unsupported_version, and the store's rows are unchanged.
//
// Export never includes a run's scratch/ tree (seed 004's INV-IO-08): run
// roots and checkpoint roots are exported without their top-level scratch
// entry. The package names no table: it goes through the owners' export
// and import methods.
package archive
