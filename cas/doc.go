// Package cas implements the content-addressable store for file contents.
//
// A blob's address is the BLAKE3-256 of its plain bytes (Hash), whatever
// form it is stored in: one zstd frame, raw bytes when compression does not
// pay, one zstd frame compressed with a dictionary trained from the store's
// own small blobs (see dict.go), a delta against another version of the
// same file, as a zstd frame or, when the two differ in one place by a few
// bytes, as an edit (PutVersion; see delta.go for the bounded, acyclic
// chains, edit.go for edits), or, for content larger
// than Options.InlineMax, a list of content-defined chunks (128 KiB to
// 2 MiB, about 640 KiB) stored as objects of their own so that equal pieces of different
// files are stored once and a Put of any size streams with bounded memory.
//
// The package owns the blobs, chunks, blob_chunks, chunk_holds and dicts
// tables; no other package's SQL names them. Store holds the codecs,
// chunking, delta histories and verification, and keeps stored objects
// through a Storage (storage.go): put, get, has, stat, touch, delete and
// iterate over objects in their stored form, each in the caller's index transaction, plus the
// optional HistoryStorage ability that delta histories need. SQLiteStorage,
// over those tables, is the default; Options.Storage chooses another, which
// must pass the conformance suite in cas/storagetest.
//
// Guarantees:
//   - Get never returns bytes that do not hash to their address, whatever
//     the Storage hands back: single-row blobs are verified before the
//     first byte is returned, chunks before each chunk's bytes are, every
//     version on a delta chain as it is rebuilt, and mismatches fail with
//     ErrCorrupt. A chunk list that names sound chunks of other content is
//     caught by the hash of the whole, at the end: the last Read fails with
//     ErrCorrupt instead of returning io.EOF, so a reader that checks its
//     error never accepts the bytes. ReadAll returns no bytes with an
//     error; a Storage's read error is returned, never bytes.
//   - Writes given a transaction (PutBytes, PutVersion, Touch) commit or
//     roll back with it: a failed write leaves no part of the blob, and a
//     failed PutVersion leaves the previous version as it was.
//   - A PutVersion stores its version whole and queues the re-encoding of
//     the older versions it moves (reencode.go); the queue is run in
//     order, a job per transaction while the store is idle (a batch per
//     transaction in Drain), so every read's chain stays within
//     Options.MaxChain at every moment, and a crash leaves the queue as
//     the last commit left it.
//   - Memory is bounded whatever the content's size: a Put holds one buffer
//     of max(5 MiB, InlineMax+1), one zstd encoder and its output, a Get
//     one chunk. The store keeps a couple of each for the next Put.
//   - The same content is stored once, also under concurrent Puts: every
//     Storage.Put is idempotent on the address, and the SQLite storage
//     writes on the index's single write connection.
//   - Every object records when it was last written or re-used (less
//     TouchSlack), so a gc that sweeps only objects older than its start
//     never deletes what a concurrent writer has just put.
package cas
