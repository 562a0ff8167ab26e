-- +goose Up
-- A write stores a file's new version whole and queues the re-encoding of
-- the versions it replaces as deltas against it (see the cas package):
-- one row per write, done in order (id) by a background step in small
-- transactions, and deleted in the transaction that does it. blob is the
-- new version, prev the version it replaced. The queue holds no
-- references: gc collects what it names as it would without it, and a
-- job whose rows are gone is dropped. raw is how many bytes the write
-- stored uncompressed, leaving their compression to the job (0 for none),
-- so the queue can bound them.
CREATE TABLE blob_reencodes (
	id   INTEGER PRIMARY KEY,
	blob BLOB NOT NULL,
	prev BLOB NOT NULL,
	raw  INTEGER NOT NULL DEFAULT 0
);

-- +goose Down
DROP TABLE blob_reencodes;
