-- +goose Up
-- The objects not pushed yet, in the order a push reads them (remote/push.go),
-- so that a push, and every sync's look for something to push, costs what
-- is pending rather than every object the store records.
CREATE INDEX remote_objects_pending ON remote_objects (kind, base IS NULL, hash) WHERE pack IS NULL;

-- +goose Down
DROP INDEX remote_objects_pending;
