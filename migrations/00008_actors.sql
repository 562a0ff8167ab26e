-- +goose Up
-- actor_spaces: one row per actor's artifact space (seed 004's ArtifactDir).
-- root is the space's live tree; seq is the last change recorded in
-- actor_changes. An actor with no row has an empty space.
CREATE TABLE actor_spaces (
    actor   TEXT PRIMARY KEY,
    root    BLOB NOT NULL CHECK (length(root) = 32),
    seq     INTEGER NOT NULL,
    created INTEGER NOT NULL,
    updated INTEGER NOT NULL
) WITHOUT ROWID;

-- actor_changes: the journal of an actor's space, seq from 1 without gaps,
-- written in the transaction of the change. root is the tree after the
-- change, a version that can be listed and diffed like a checkpoint; it is
-- NULL once gc has pruned the version (the record stays).
CREATE TABLE actor_changes (
    actor   TEXT NOT NULL,
    seq     INTEGER NOT NULL CHECK (seq >= 1),
    op      TEXT NOT NULL,
    path    TEXT NOT NULL,
    files   INTEGER NOT NULL,
    bytes   INTEGER NOT NULL,
    root    BLOB CHECK (root IS NULL OR length(root) = 32),
    created INTEGER NOT NULL,
    PRIMARY KEY (actor, seq)
) WITHOUT ROWID;

-- +goose Down
DROP TABLE actor_changes;
DROP TABLE actor_spaces;
