// Package remote implements the remote blob tier: a cas.Storage whose
// blobs and chunks live on an S3-compatible object store (aws-sdk-go-v2,
// pure Go), small objects gathered into packs with an index, every key the
// BLAKE3 of its bytes and written once (If-None-Match: *). Its local index
// and cache are the tables remote_objects, remote_chunks and remote_cache;
// the state of sync through the tier (segments, tombstones, what each
// device published and took in, locks on the object store) is in
// remote_dropped, sync_items, sync_devices, sync_tombstones, sync_remotes,
// sync_indexes and sync_changes (filled by the index's triggers). It alone
// names these tables.
//
// It guarantees that a Put commits with the caller's transaction and
// holds the object's bytes locally until Push has them on the object
// store, so no failure of the network loses an object; that a Push cut
// short keeps what landed; and that Get never hands back a byte range
// whose hash differs from its index's (the cas Store verifies content on
// top); that a sync segment is taken in only when its bytes hash to its
// key, and a header or tombstone section read alone (a pull, reclaim) is
// decoded only when it hashes to what the segment's first line or header
// says (version 3);
// and that Reclaim never runs while a sync holds its lock. Layout, format
// and errors: docs/remote.md.
package remote
