-- +goose Up
-- A queued job asks whether a later write replaced the version it is
-- about (then that write's job re-encodes it, and compressing it whole
-- first would be work thrown away): the queue is searched by prev.
CREATE INDEX blob_reencodes_prev ON blob_reencodes (prev);

-- +goose Down
DROP INDEX blob_reencodes_prev;
