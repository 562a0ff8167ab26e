-- +goose Up
-- records is the tree of what the host recorded for a run (tool-args/,
-- tool-results/, model-responses/): beside the live workspace, not in it,
-- so the model never sees it and rollbacks and checkpoints leave it
-- alone. NULL: nothing recorded yet.
ALTER TABLE runs ADD COLUMN records BLOB;

-- +goose Down
ALTER TABLE runs DROP COLUMN records;
