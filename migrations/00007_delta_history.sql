-- +goose Up
-- gen numbers a blob within the history of versions it belongs to (0: not
-- yet part of one), and opens, on the newest version of a history only,
-- lists the older versions whose delta base will change as the history
-- grows (see the cas package). Older builds still read every row: deltas
-- are deltas.
ALTER TABLE blobs ADD COLUMN gen INTEGER NOT NULL DEFAULT 0;
ALTER TABLE blobs ADD COLUMN opens BLOB;

-- +goose Down
ALTER TABLE blobs DROP COLUMN opens;
ALTER TABLE blobs DROP COLUMN gen;
