// Package maint implements the store's maintenance: garbage collection
// (GC), the consistency check (Fsck), and the size reports (Stats, DU).
//
// maint owns nothing stored and holds no SQL: it composes small interfaces
// the owners of the tables implement (parts.go). Runs and checkpoints give
// the roots of reachability (each run's live root and persist base, each
// chat's persist root, each checkpoint's root); the content store and the
// tree store give an inventory of their rows, the references of a blob or
// a tree, a sweep of given addresses older than a cutoff, and verification;
// the journal counts its events by run. A phase that must see one snapshot
// runs in one transaction from DB.View or DB.Update and hands it to every
// owner it asks.
//
// maint guarantees:
//
//   - GC never deletes what a root or a concurrent writer needs. Mark
//     reads one snapshot; sweep runs in one write transaction, walks the
//     roots again as they are then, and deletes only rows unreachable in
//     both, older than the grace, not refreshed since the snapshot, and not
//     referenced by any row it keeps. A blob whose number in its version
//     history changed since the snapshot is kept, whatever the writer's
//     clock. A tree kept only as the base of a patch keeps its row, and
//     what it names once anything needs the tree itself. A GC deletes
//     everything it reports or nothing.
//   - GC and DU refuse (store.corrupt) rather than guess when a
//     reachable object is missing or does not decode; GC then deletes
//     nothing. Stats reads only the root trees (their entries give the
//     sizes) and refuses when one of those is missing or does not decode.
//   - Fsck reports every problem it finds, never stopping at the first; its
//     error is only for a check that cannot run.
//   - Memory does not grow with the objects a store holds. The owners'
//     inventories are read a page at a time and each object is asked of
//     its owner as a walk reaches it; the sets a walk keeps (marks, labels,
//     the garbage and its order) hold up to 262,144 objects each in memory and
//     the rest in a scratch database on disk (index.Scratch), which the
//     operation deletes when it ends. Nor do the roots stay: each is read
//     from its owner as the walk reaches it, in chat and run order, so
//     memory does not grow with the runs, checkpoints or actor versions
//     either. What stays beside the sets is bounded memos of decoded
//     trees.
package maint
