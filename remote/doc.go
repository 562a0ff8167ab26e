// Package remote implements the remote blob tier: a cas.Storage whose
// blobs and chunks live on an S3-compatible object store (aws-sdk-go-v2,
// pure Go), small objects gathered into packs with an index, every key the
// BLAKE3 of its bytes and written once (If-None-Match: *). Its local index
// and cache are the tables remote_objects, remote_chunks and remote_cache,
// which it alone names.
//
// It guarantees that a Put commits with the caller's transaction and
// holds the object's bytes locally until Push has them on the object
// store, so no failure of the network loses an object; that a Push cut
// short keeps what landed; and that Get never hands back a byte range
// whose hash differs from its index's (the cas Store verifies content on
// top). Layout and errors: docs/remote.md.
package remote
