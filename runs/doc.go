// Package runs implements chat workspaces, agent runs and the workspace
// operations agent tools call.
//
// A chat workspace is identified by the chat's stable identity (never its
// file or display name) and holds the persist/ layer shared by the chat's
// runs. A run owns a live workspace: a Merkle tree root on its row. Every
// operation that changes a workspace runs in one transaction that writes
// the new blobs and trees, swaps the run's root, appends the journal event
// that records it and, when the profile asks for it, the checkpoint row:
// all of it commits or none of it does. Model-correctable failures are
// *wserr.Error values with the workspace.* codes and change nothing.
package runs
