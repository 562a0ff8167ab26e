// Package cas implements the content-addressable store for file contents.
//
// A blob's address is the BLAKE3-256 of its plain bytes (Hash), whatever
// form it is stored in: one zstd frame, raw bytes when compression does not
// pay, or, for content larger than Options.InlineMax, a list of
// content-defined chunks (about 1 MiB each) stored as rows of their own so
// that equal pieces of different files are stored once and a Put of any size
// streams with bounded memory.
//
// Guarantees:
//   - Get never returns bytes that do not hash to their address: single-row
//     blobs are verified before the first byte is returned, chunks before
//     each chunk's bytes are, and mismatches fail with ErrCorrupt.
//   - The same content is stored once, also under concurrent Puts: every
//     insert is an upsert on the address, on the store's single write
//     connection.
//   - Every row records when it was last written or re-used, so a gc that
//     sweeps only rows older than its start never deletes what a concurrent
//     writer has just put.
package cas
