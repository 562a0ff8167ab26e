-- +goose Up
-- Incremental sync (owner: remote). listed marks an object the device's
-- published object set already names (docs/remote.md, "Sync"); a record
-- gc drops after it was listed is kept in remote_dropped until the next
-- segment says so.
ALTER TABLE remote_objects ADD COLUMN listed INTEGER NOT NULL DEFAULT 0;

CREATE TABLE remote_dropped (
    kind INTEGER NOT NULL,
    hash BLOB NOT NULL,
    PRIMARY KEY (kind, hash)
) WITHOUT ROWID;

-- sync_items: for each remote (bucket/prefix), the state of each chat, run
-- and actor space as the store last published it there or took it in
-- from there: fp the fingerprint of the row and its journal length, seq
-- the journal's last seq (run) or the version (actor), last the hash of
-- the run's last event, parent the run's chat; sent is 1 when that state
-- is one the store published (so its base segments carry it), 0 when it
-- took it in.
CREATE TABLE sync_items (
    remote TEXT NOT NULL,
    kind   TEXT NOT NULL,
    id     TEXT NOT NULL,
    parent TEXT NOT NULL DEFAULT '',
    fp     BLOB NOT NULL,
    seq    INTEGER NOT NULL DEFAULT 0,
    last   BLOB,
    sent   INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (remote, kind, id)
) WITHOUT ROWID;

-- sync_devices: for each remote, the last segment of each other device
-- the store took in.
CREATE TABLE sync_devices (
    remote   TEXT NOT NULL,
    device   TEXT NOT NULL,
    last_key TEXT NOT NULL,
    PRIMARY KEY (remote, device)
) WITHOUT ROWID;

-- sync_tombstones: the deletions of chats and runs the store published or
-- took in, with the state the deleting device last synced (seq, last), so
-- a copy of the object another device still sends is deleted again, not
-- brought back. detail is JSON (a chat's kind and stable id); pending marks
-- one of the store's own that no published segment carries yet.
CREATE TABLE sync_tombstones (
    remote TEXT NOT NULL,
    kind   TEXT NOT NULL,
    id     TEXT NOT NULL,
    parent TEXT NOT NULL DEFAULT '',
    seq    INTEGER NOT NULL DEFAULT 0,
    last   BLOB,
    device TEXT NOT NULL,
    at     INTEGER NOT NULL,
    detail TEXT NOT NULL DEFAULT '{}',
    pending INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (remote, kind, id)
) WITHOUT ROWID;

-- +goose Down
DROP TABLE sync_tombstones;
DROP TABLE sync_devices;
DROP TABLE sync_items;
DROP TABLE remote_dropped;
ALTER TABLE remote_objects DROP COLUMN listed;
