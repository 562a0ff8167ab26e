-- +goose Up
-- A tree row may hold a patch against another tree, its base, instead of
-- the tree's whole encoding (see the vfs package): a write then stores the
-- entries it changed, not the whole directory. Rows are then small, so the
-- table is keyed by hash alone (WITHOUT ROWID): one b-tree instead of a
-- table and an index on hash. Format 2 also stores event payloads packed
-- (BLOBs; see the journal package). Older builds can read neither, so the
-- format version moves to 2.
CREATE TABLE trees_keyed (
    hash    BLOB PRIMARY KEY CHECK (length(hash) = 32),
    data    BLOB NOT NULL,
    base    BLOB CHECK (base IS NULL OR length(base) = 32),
    created INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO trees_keyed (hash, data, created) SELECT hash, data, created FROM trees;
DROP TABLE trees;
ALTER TABLE trees_keyed RENAME TO trees;
UPDATE meta SET value = '2' WHERE key = 'format_version';

-- +goose Down
-- Going back would leave patched trees or packed payloads that format 1
-- cannot read: refuse while any exists (the insert fails its CHECK and the
-- migration rolls back).
CREATE TEMP TABLE format_2_rows (n INTEGER CHECK (n = 0));
INSERT INTO format_2_rows SELECT (SELECT count(*) FROM trees WHERE base IS NOT NULL)
    + (SELECT count(*) FROM events WHERE typeof(payload) = 'blob');
DROP TABLE format_2_rows;
CREATE TABLE trees_rowid (
    hash    BLOB PRIMARY KEY CHECK (length(hash) = 32),
    data    BLOB NOT NULL,
    created INTEGER NOT NULL
);
INSERT INTO trees_rowid (hash, data, created) SELECT hash, data, created FROM trees;
DROP TABLE trees;
ALTER TABLE trees_rowid RENAME TO trees;
UPDATE meta SET value = '1' WHERE key = 'format_version';
