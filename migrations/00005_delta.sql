-- +goose Up
-- saved counts the bytes a blob's delta encoding saved over the form it
-- was stored in before, for stats. The partial index lets gc and fsck find
-- the deltas that depend on a base without scanning every blob.
ALTER TABLE blobs ADD COLUMN saved INTEGER NOT NULL DEFAULT 0;
CREATE INDEX blobs_base ON blobs (base) WHERE base IS NOT NULL;

-- +goose Down
DROP INDEX blobs_base;
ALTER TABLE blobs DROP COLUMN saved;
