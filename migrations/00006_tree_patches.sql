-- +goose Up
-- A tree row may hold a patch against another tree, its base, instead of
-- the tree's whole encoding (see the vfs package): a write then stores the
-- entries it changed, not the whole directory. Older builds cannot read
-- such rows, so the format version moves to 2.
ALTER TABLE trees ADD COLUMN base BLOB CHECK (base IS NULL OR length(base) = 32);
UPDATE meta SET value = '2' WHERE key = 'format_version';

-- +goose Down
-- Going back would leave patched rows that format 1 cannot read: refuse
-- while any exists (the insert fails its CHECK and the migration rolls
-- back).
CREATE TEMP TABLE patched_trees (n INTEGER CHECK (n = 0));
INSERT INTO patched_trees SELECT count(*) FROM trees WHERE base IS NOT NULL;
DROP TABLE patched_trees;
ALTER TABLE trees DROP COLUMN base;
UPDATE meta SET value = '1' WHERE key = 'format_version';
