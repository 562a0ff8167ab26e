-- +goose Up
-- The remote blob tier's local index (owner: remote). remote_objects lists
-- every object the tier holds, with where its bytes are: pack is the key
-- of the pack on the object store holding them at off (stored bytes long,
-- sum their BLAKE3), '' for a chunked blob (its chunk list is all it has,
-- kept in the remote index), NULL until a push has uploaded them; until
-- then remote_cache holds them. kind: 0 blob, 1 chunk; the columns size,
-- stored, codec, base and created mean what they mean in blobs.
CREATE TABLE remote_objects (
    kind    INTEGER NOT NULL CHECK (kind IN (0, 1)),
    hash    BLOB NOT NULL CHECK (length(hash) = 32),
    size    INTEGER NOT NULL CHECK (size >= 0),
    stored  INTEGER NOT NULL CHECK (stored >= 0),
    codec   INTEGER NOT NULL,
    base    BLOB CHECK (base IS NULL OR length(base) = 32),
    created INTEGER NOT NULL,
    pack    TEXT,
    off     INTEGER NOT NULL DEFAULT 0,
    sum     BLOB,
    PRIMARY KEY (kind, hash)
) WITHOUT ROWID;

-- remote_chunks lists a chunked blob's chunks in order, as blob_chunks
-- does for the SQLite tier.
CREATE TABLE remote_chunks (
    blob  BLOB NOT NULL,
    idx   INTEGER NOT NULL,
    chunk BLOB NOT NULL,
    off   INTEGER NOT NULL,
    PRIMARY KEY (blob, idx)
) WITHOUT ROWID;
CREATE INDEX remote_chunks_chunk ON remote_chunks (chunk);

-- remote_cache holds stored forms on this device: every object until it is
-- pushed, and what reads in write transactions fetched since. Rows of kind
-- 2, with empty data, name the index objects of the object store (by the
-- hash in their key) whose entries this device has taken in, so each is
-- read once.
CREATE TABLE remote_cache (
    kind INTEGER NOT NULL,
    hash BLOB NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (kind, hash)
) WITHOUT ROWID;

-- +goose Down
DROP TABLE remote_cache;
DROP TABLE remote_chunks;
DROP TABLE remote_objects;
