-- +goose Up
-- The totals of each actor space's live tree, moved with its root in the
-- transaction of each change by the difference of the two trees, so a
-- space's stats are one row read at any size. NULL: not counted yet (a
-- space written before this migration); the next change counts its tree
-- whole.
ALTER TABLE actor_spaces ADD COLUMN files INTEGER;
ALTER TABLE actor_spaces ADD COLUMN dirs INTEGER;
ALTER TABLE actor_spaces ADD COLUMN bytes INTEGER;

-- +goose Down
ALTER TABLE actor_spaces DROP COLUMN bytes;
ALTER TABLE actor_spaces DROP COLUMN dirs;
ALTER TABLE actor_spaces DROP COLUMN files;
