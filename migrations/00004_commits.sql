-- +goose Up
-- commits: each hand-off of an assembled message to the host's chat sink.
-- A row is written as pending before the sink is called and completed or
-- failed after, so a crash in between leaves a pending row a host can
-- retry. checkpoint_seq names the tree the message was assembled from.
CREATE TABLE commits (
    id             TEXT PRIMARY KEY,
    run_id         TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq            INTEGER NOT NULL,
    checkpoint_seq INTEGER NOT NULL,
    mode           TEXT NOT NULL,
    kind           TEXT NOT NULL DEFAULT 'commit',
    status         TEXT NOT NULL,
    message        TEXT NOT NULL,
    receipt        TEXT NOT NULL DEFAULT '{}',
    error          TEXT NOT NULL DEFAULT '',
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL,
    UNIQUE (run_id, seq)
);

-- +goose Down
DROP TABLE commits;
