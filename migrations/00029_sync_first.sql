-- +goose Up
-- sync_items.first: the hash of a run's first event (as last is of its
-- last), so that a tombstone names which run it deleted and a run created
-- later under the same id is not taken for it. NULL for rows from before,
-- whose tombstones are applied as they were.
ALTER TABLE sync_items ADD COLUMN first BLOB;

-- +goose Down
ALTER TABLE sync_items DROP COLUMN first;
