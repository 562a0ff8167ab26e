// Package actors implements per-actor artifact spaces (seed 004's
// ArtifactDir, {CellDataDir}/workspace/{actor}/): a versioned tree per
// actor, in the store's one content store and tree store, with a journal of
// its own.
//
// actors owns the actor_spaces and actor_changes tables. A space is a row
// naming its live root tree; every change (upload, delete, delete by
// prefix, gc) rewrites only the trees on the changed paths, moves the root
// and appends one actor_changes row holding the new root, all in one
// transaction, so a crash leaves both or neither. Each change is therefore
// also a version that can be listed and diffed like a checkpoint, until gc
// prunes it.
//
// Guarantees:
//   - Actor names and paths are validated at the boundary (ParseActor,
//     vfs.ParsePath); nothing joins strings into paths.
//   - Upload streams through cas.Store.Put and Download through
//     cas.Store.Get, so memory stays bounded whatever a file's size; the
//     bytes a download returns always hash to their address.
//   - Write order is blobs, then trees, then rows: an upload whose
//     transaction fails leaves at most garbage for the store's gc, never a
//     row naming something missing. The uploaded blob is touched in the
//     transaction that references it, so a concurrent gc counts it young.
//   - Every live root and every unpruned version is a gc root
//     (EachActorRoot), so the store's gc keeps their trees and blobs.
//   - The change journal of an actor is numbered from 1 without gaps and is
//     never rewritten, except that GC clears the root of the versions it
//     prunes (the record of the change stays).
//   - A space's row keeps its tree's totals and the number of versions its
//     journal holds, moved in the transaction of each change, prune and
//     import, so Stats reads that row and no journal row (EachMiscounted
//     and EachSpaceTotals let fsck hold the count to the journal and the
//     totals to the tree).
//
// Seen together the spaces are seed 004's workspace/ directory, a
// directory per actor (WorkspacePage, StatsPage), read a page of spaces at
// a time, never every space at once.
//
// actors knows nothing of runs, chats or checkpoints.
package actors
