-- +goose Up
-- dead_bytes is what a checkpoint's parent held that it no longer does: the
-- stored bytes of the file versions the step from the parent replaced or
-- removed. cum_dead sums dead_bytes over the run's checkpoints up to this
-- one (by seq), so what a run's checkpoints keep beyond its newest is two
-- row reads, whatever the run's history (see the checkpoint package).
ALTER TABLE checkpoints ADD COLUMN dead_bytes INTEGER NOT NULL DEFAULT 0;
ALTER TABLE checkpoints ADD COLUMN cum_dead INTEGER NOT NULL DEFAULT 0;

-- policies: retention settings and caps, one row for the store ('*') and
-- one per chat workspace that overrides it; policy is JSON (see the runs
-- package).
CREATE TABLE policies (
    scope      TEXT PRIMARY KEY,
    policy     TEXT NOT NULL,
    updated_at INTEGER NOT NULL
) WITHOUT ROWID;

-- deletions: the store's deletion log. A row outlives what it names: what
-- was deleted (kind, chat, run, detail), why (reason: the setting or the
-- request), when, and the bytes the collection that followed freed.
CREATE TABLE deletions (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    at          INTEGER NOT NULL,
    kind        TEXT NOT NULL,
    chat_id     TEXT NOT NULL DEFAULT '',
    run_id      TEXT NOT NULL DEFAULT '',
    reason      TEXT NOT NULL,
    detail      TEXT NOT NULL DEFAULT '{}',
    bytes_freed INTEGER NOT NULL DEFAULT 0
);

-- +goose Down
DROP TABLE deletions;
DROP TABLE policies;
ALTER TABLE checkpoints DROP COLUMN cum_dead;
ALTER TABLE checkpoints DROP COLUMN dead_bytes;
