-- +goose Up
-- The number of versions each actor space still holds (its journal's rows
-- with a root, not pruned by gc), moved in the transaction of each change
-- and prune, so a space's stats read no journal rows. Counted here for
-- the spaces there are; NULL means not counted, and the next change of
-- the space counts it.
ALTER TABLE actor_spaces ADD COLUMN versions INTEGER;
UPDATE actor_spaces SET versions = (
    SELECT count(*) FROM actor_changes c WHERE c.actor = actor_spaces.actor AND c.root IS NOT NULL);

-- +goose Down
ALTER TABLE actor_spaces DROP COLUMN versions;
