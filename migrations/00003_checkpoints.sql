-- +goose Up
-- checkpoints: one row per checkpoint; a checkpoint is this row and nothing
-- else, since root already names the whole immutable tree. parent_seq is
-- the checkpoint the workspace descended from when this one was taken (0:
-- none), so rollbacks followed by new checkpoints form a tree of history.
CREATE TABLE checkpoints (
    run_id     TEXT NOT NULL,
    seq        INTEGER NOT NULL CHECK (seq >= 1),
    root       BLOB NOT NULL CHECK (length(root) = 32),
    parent_seq INTEGER NOT NULL DEFAULT 0,
    reason     TEXT NOT NULL,
    event_seq  INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;

-- head_checkpoint is the checkpoint the live root descends from (0: none).
ALTER TABLE runs ADD COLUMN head_checkpoint INTEGER NOT NULL DEFAULT 0;
-- manifest is the run's manifest JSON (empty: the default manifest).
ALTER TABLE runs ADD COLUMN manifest TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE runs DROP COLUMN manifest;
ALTER TABLE runs DROP COLUMN head_checkpoint;
DROP TABLE checkpoints;
