// Package checkpoint implements checkpoints of run workspaces.
//
// A run's live workspace is a Merkle tree root held on the run's row, and
// trees are immutable, so a checkpoint is one row (run, seq, root, parent,
// reason, eventSeq, createdAt) written with its checkpoint_created event in
// the caller's transaction: its cost does not depend on the workspace's
// size. Reading a file at a checkpoint walks that checkpoint's tree, so it
// returns the bytes of that moment whatever happened to the live workspace
// since. Checkpoints are never rewritten; they are deleted only with their
// run. Ids are cp_000001, cp_000002, … per run.
package checkpoint
