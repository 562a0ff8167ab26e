// Package replica replicates a store's SQLite database to an S3-compatible
// object store, and restores it from there, through Litestream's library
// (github.com/benbjohnson/litestream, 0.5 series, on modernc.org/sqlite):
// the write-ahead log is shipped as LTX files that a restore replays into
// a database file at one consistent transaction. There is no protocol of
// this project's own here.
//
// It guarantees that a restore yields a database at a transaction the
// source committed, never a torn one (Litestream checks it with SQLite's
// integrity check), and that Close ships every transaction committed
// before it was called. A Replicator compacts what it ships (Options):
// the replica and Litestream's local state hold one or two snapshots and the
// recent changes, not every transaction ever shipped. One store replicates to a replica path: an
// owner object there names it, and Start refuses another store (remote.ClaimReplica); two
// writers reconcile with sync, never through one replica (docs/remote.md).
package replica
