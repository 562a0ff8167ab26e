// Package runs implements chat workspaces, agent runs and the workspace
// operations agent tools call.
//
// runs owns the chats, runs and commits tables: chat workspaces (the
// persist/ layer a chat's runs share), run lifecycle and status machine,
// profiles, manifests, artifact assembly and commit, and persist
// promotion. It works through the parts of a store it is given (Deps):
// file contents in the content store, workspaces as trees, events in the
// journal, checkpoints in the checkpoint store. Each is a narrow interface
// defined here, holding only what runs calls, and runs never hands one out:
// wsstore.Open builds the parts and gives callers each of them directly.
//
// A chat workspace is identified by the chat's stable identity (never its
// file or display name). A run owns a live workspace: a Merkle tree root
// on its row, with the checkpoint that heads it. Every operation that
// changes a workspace runs in one transaction that writes the new blobs
// and trees, moves the run's head (one update of its row, the same for a
// write, an apply, a checkpoint and a rollback), appends the journal
// events that record it and, when the profile asks for it, the checkpoint
// row: all of it commits or none of it does, so a failure of any part, the
// journal's or the checkpoint store's included, leaves the store as it
// was. Rows and events are stamped with Options.Now, the store's one
// clock. Beside the live workspace each run holds a records tree: what
// the host recorded of its tool calls and model rounds (tool-args/,
// tool-results/, model-responses/), each file with its journal event in
// one transaction, readable only in HostScope with manifest.json and
// checkpoints/<id>/checkpoint.json; rollbacks and checkpoints leave it
// alone, and no profile can show it, or input/, to the model.
// Model-correctable failures are *wserr.Error values with the
// workspace.* codes and change nothing.
//
// A run's scratch/ is collected when it ends (unless its profile keeps
// it): removed from the live tree and from every checkpoint's root in the
// transaction of the final status, recorded by scratch_collected, so gc
// frees it. It is never committed. A profile's allowed host paths appear
// as host/<name>/…, reached through vfs.OpenHost: boundaries only, never
// stored, checkpointed or collected. Run.PrimaryRoot is the run's active
// project (seed 004's fallback chain).
package runs
