// Package wsstore ties the store's packages together: Open a directory and
// get every part of the store over one SQLite file.
//
// Open is the one place the parts are built and wired: the index (the
// database and its migrations), the content store, the tree store, the
// journal, the checkpoint store and the run service, which consumes the
// others through narrow interfaces of its own. Store exposes each part as
// a field; a caller pages the journal or lists checkpoints through those
// parts and changes runs through Store.Runs. Every part reads one clock,
// Options.Now, so the times on rows and events and the grace gc measures
// against them come from the same source.
//
// Store.Checkout writes a run's workspace, or a checkpoint, into a new or
// empty directory on the host, as wsctl checkout does: every name is made
// exclusively, and the files are put in place only once all are written,
// so a failure leaves the directory as it was. The hidden directories it
// writes into are judged by the file system's times, against the wall
// clock rather than Options.Now.
//
// A store directory holds wsstore.db (with its -wal and -shm files while
// open). Everything — blobs, trees, chats, runs, checkpoints, the journal —
// lives in that one file, so copying a closed store directory copies the
// whole store.
package wsstore
