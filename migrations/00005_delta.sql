-- +goose Up
-- saved counts the bytes a blob's delta encoding saved over the form it
-- was stored in before, for stats. prevkey, on a blob stored whole, names
-- the keyframe of the previous segment of its file's history: when this
-- blob's segment closes it becomes a delta against that keyframe (see the
-- cas package).
ALTER TABLE blobs ADD COLUMN saved INTEGER NOT NULL DEFAULT 0;
ALTER TABLE blobs ADD COLUMN prevkey BLOB CHECK (prevkey IS NULL OR length(prevkey) = 32);

-- +goose Down
ALTER TABLE blobs DROP COLUMN prevkey;
ALTER TABLE blobs DROP COLUMN saved;
