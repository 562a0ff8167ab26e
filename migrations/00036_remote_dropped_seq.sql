-- +goose Up
-- A record gc drops after the device's object set listed it waits in
-- remote_dropped for the next segment. id is its place in the order the
-- drops were recorded (never given twice), so a segment whose object list
-- was taken at some place clears only the drops recorded up to it: a drop
-- recorded while the segment was being published waits for the next one.
-- Drops recorded before this migration come first, in (kind, hash) order.
CREATE TABLE remote_dropped_seq (
    id   INTEGER PRIMARY KEY AUTOINCREMENT,
    kind INTEGER NOT NULL,
    hash BLOB NOT NULL,
    UNIQUE (kind, hash)
);
INSERT INTO remote_dropped_seq (kind, hash) SELECT kind, hash FROM remote_dropped ORDER BY kind, hash;
DROP TABLE remote_dropped;
ALTER TABLE remote_dropped_seq RENAME TO remote_dropped;

-- +goose Down
CREATE TABLE remote_dropped_old (
    kind INTEGER NOT NULL,
    hash BLOB NOT NULL,
    PRIMARY KEY (kind, hash)
) WITHOUT ROWID;
INSERT INTO remote_dropped_old (kind, hash) SELECT kind, hash FROM remote_dropped;
DROP TABLE remote_dropped;
ALTER TABLE remote_dropped_old RENAME TO remote_dropped;
