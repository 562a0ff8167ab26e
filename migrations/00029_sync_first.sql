-- +goose Up
-- A run id can name several runs over time: one deleted, another created
-- later under the same id. sync_items.first is the hash of a run's first
-- event (as last is of its last), and sync_tombstones keeps one tombstone
-- per run so named (first), so a deletion of one never hides or replaces
-- a deletion of another, and a run created later is not taken for one
-- deleted. first is NULL in sync_items rows from before, and x'' in
-- tombstones whose run is not known (chats, and runs from before), which
-- apply to any run under their id as they did.
ALTER TABLE sync_items ADD COLUMN first BLOB;

-- The rows wait in a temporary table, so the new table takes the pages
-- the old one leaves instead of leaving them free.
CREATE TEMP TABLE sync_tombstones_lives AS SELECT * FROM sync_tombstones;
DROP TABLE sync_tombstones;
CREATE TABLE sync_tombstones (
    remote  TEXT NOT NULL,
    kind    TEXT NOT NULL,
    id      TEXT NOT NULL,
    first   BLOB NOT NULL DEFAULT x'',
    parent  TEXT NOT NULL DEFAULT '',
    seq     INTEGER NOT NULL DEFAULT 0,
    last    BLOB,
    device  TEXT NOT NULL,
    at      INTEGER NOT NULL,
    detail  TEXT NOT NULL DEFAULT '{}',
    pending INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (remote, kind, id, first)
) WITHOUT ROWID;
INSERT INTO sync_tombstones (remote, kind, id, first, parent, seq, last, device, at, detail, pending)
    SELECT remote, kind, id, x'', parent, seq, last, device, at, detail, pending FROM sync_tombstones_lives;
DROP TABLE sync_tombstones_lives;

-- +goose Down
-- One tombstone per id: the device's own pending ones win (the next
-- segment must carry them), then the later state.
CREATE TEMP TABLE sync_tombstones_one AS SELECT * FROM sync_tombstones;
DROP TABLE sync_tombstones;
CREATE TABLE sync_tombstones (
    remote  TEXT NOT NULL,
    kind    TEXT NOT NULL,
    id      TEXT NOT NULL,
    parent  TEXT NOT NULL DEFAULT '',
    seq     INTEGER NOT NULL DEFAULT 0,
    last    BLOB,
    device  TEXT NOT NULL,
    at      INTEGER NOT NULL,
    detail  TEXT NOT NULL DEFAULT '{}',
    pending INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (remote, kind, id)
) WITHOUT ROWID;
INSERT OR REPLACE INTO sync_tombstones (remote, kind, id, parent, seq, last, device, at, detail, pending)
    SELECT remote, kind, id, parent, seq, last, device, at, detail, pending FROM sync_tombstones_one ORDER BY pending != 0, seq;
DROP TABLE sync_tombstones_one;
ALTER TABLE sync_items DROP COLUMN first;
DELETE FROM meta WHERE key = 'remote.sync.first';
