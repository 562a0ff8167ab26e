-- +goose Up
-- Segments name the index objects they add (owner: remote), so a device
-- learns new packs from the segments it reads instead of listing index/.
-- sync_indexes holds the index objects this device pushed or took in that
-- none of its published segments named yet (hash: the one in the key).
CREATE TABLE sync_indexes (
    hash BLOB NOT NULL PRIMARY KEY
) WITHOUT ROWID;
-- What the store took in before: its next segment names it.
INSERT INTO sync_indexes (hash) SELECT hash FROM remote_cache WHERE kind = 2;

-- indexed_key: the last segment of each other device whose index objects
-- the store took in (a pull reads segment headers after it); at least
-- last_key.
ALTER TABLE sync_devices ADD COLUMN indexed_key TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE sync_devices DROP COLUMN indexed_key;
DROP TABLE sync_indexes;
