-- +goose Up
-- The zstd dictionaries trained from the store's own small blobs (owner:
-- cas). Each row lists one dictionary, oldest first by id; its bytes are
-- the blob at hash, which zstd blobs compressed with it name as their
-- base (codec 1 with a base), so gc keeps a dictionary while any blob uses it and every
-- dictionary listed here is a gc root. size is the dictionary's length,
-- samples the blobs it was trained from, blobs the small blobs the store
-- held then.
CREATE TABLE dicts (
    id      INTEGER PRIMARY KEY,
    hash    BLOB NOT NULL UNIQUE CHECK (length(hash) = 32),
    size    INTEGER NOT NULL CHECK (size > 0),
    samples INTEGER NOT NULL,
    blobs   INTEGER NOT NULL,
    created INTEGER NOT NULL
);

-- +goose Down
DROP TABLE dicts;
