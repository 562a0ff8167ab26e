-- +goose Up
-- meta holds store-wide settings; format_version guards against older builds
-- opening a store they would misread.
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;
INSERT INTO meta (key, value) VALUES ('format_version', '1');

-- blobs: one row per distinct content, addressed by BLAKE3-256 of the plain
-- bytes. codec: 0 raw, 1 zstd, 2 chunked (data is NULL, content in
-- blob_chunks), 3 zstd delta against base. size is the plain length, stored
-- the bytes held for this row (chunks are counted in their own rows).
-- created is the unix time in nanoseconds the row was last written or
-- re-used, so gc never sweeps what a concurrent writer has just put.
-- blobs and chunks are rowid tables: their rows are large, and SQLite keeps
-- large rows better outside the primary-key b-tree.
CREATE TABLE blobs (
    hash    BLOB PRIMARY KEY CHECK (length(hash) = 32),
    size    INTEGER NOT NULL CHECK (size >= 0),
    stored  INTEGER NOT NULL CHECK (stored >= 0),
    codec   INTEGER NOT NULL CHECK (codec BETWEEN 0 AND 3),
    base    BLOB CHECK (base IS NULL OR length(base) = 32),
    depth   INTEGER NOT NULL DEFAULT 0,
    data    BLOB,
    created INTEGER NOT NULL
);

-- chunks: pieces of large blobs, each addressed by BLAKE3 of its plain
-- bytes, so equal pieces of different files are stored once.
CREATE TABLE chunks (
    hash    BLOB PRIMARY KEY CHECK (length(hash) = 32),
    size    INTEGER NOT NULL CHECK (size >= 0),
    stored  INTEGER NOT NULL CHECK (stored >= 0),
    codec   INTEGER NOT NULL CHECK (codec BETWEEN 0 AND 1),
    data    BLOB NOT NULL,
    created INTEGER NOT NULL
);

-- blob_chunks lists a chunked blob's chunks in order; off is the plain
-- offset of the chunk in the blob.
CREATE TABLE blob_chunks (
    blob  BLOB NOT NULL REFERENCES blobs (hash) ON DELETE CASCADE,
    idx   INTEGER NOT NULL,
    chunk BLOB NOT NULL REFERENCES chunks (hash),
    off   INTEGER NOT NULL,
    PRIMARY KEY (blob, idx)
) WITHOUT ROWID;
CREATE INDEX blob_chunks_chunk ON blob_chunks (chunk);

-- +goose Down
DROP TABLE blob_chunks;
DROP TABLE chunks;
DROP TABLE blobs;
DROP TABLE meta;
