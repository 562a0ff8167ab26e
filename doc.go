// Package wsstore ties the store's packages together: Open a directory and
// get the index, the content store and the run service over one SQLite
// file.
//
// A store directory holds wsstore.db (with its -wal and -shm files while
// open). Everything — blobs, trees, chats, runs, checkpoints, the journal —
// lives in that one file, so copying a closed store directory copies the
// whole store.
package wsstore
