// Package checkpoint implements checkpoints of run workspaces.
//
// It owns the checkpoints table: runs takes, reads, prunes and deletes
// checkpoints through a Store, and maintenance reads their roots through
// EachRoot.
//
// A run's live workspace is a Merkle tree root held on the run's row, and
// trees are immutable, so a checkpoint is one row (run, seq, root, parent,
// reason, eventSeq, createdAt) written with its checkpoint_created event in
// the caller's transaction: its cost does not depend on the workspace's
// size. Reading a file at a checkpoint walks that checkpoint's tree, so it
// returns the bytes of that moment whatever happened to the live workspace
// since. Checkpoints are never rewritten. They are deleted with their run,
// or, oldest first, by a cap on how many a run keeps (Prune), in the
// transaction of the checkpoint that crossed it, which the caller records
// by a checkpoints_pruned event; a pruned checkpoint reads as checkpoint.not_found,
// and its seq is never reused. Ids are cp_000001, cp_000002, … per run.
package checkpoint
