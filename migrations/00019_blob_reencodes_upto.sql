-- +goose Up
-- A queued job asks whether a later write replaced the version it is
-- about (then that write's job re-encodes it, and compressing it whole
-- first would be work thrown away): the queue is searched by prev.
CREATE INDEX blob_reencodes_prev ON blob_reencodes (prev);
-- upto is the raw bytes of this job and of every job queued before it, so
-- a write reads what the queue holds raw from its first and last rows
-- rather than by summing every row.
ALTER TABLE blob_reencodes ADD COLUMN upto INTEGER NOT NULL DEFAULT 0;
UPDATE blob_reencodes SET upto = (SELECT sum(raw) FROM blob_reencodes q WHERE q.id <= blob_reencodes.id);

-- +goose Down
ALTER TABLE blob_reencodes DROP COLUMN upto;
DROP INDEX blob_reencodes_prev;
