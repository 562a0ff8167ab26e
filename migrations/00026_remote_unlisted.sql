-- +goose Up
-- The objects no segment of this device has listed yet, in the order a
-- segment lists them (remote/syncobj.go, ObjectDelta), so that a sync's
-- object changes cost what changed rather than every object the store
-- records.
CREATE INDEX remote_objects_unlisted ON remote_objects (kind, hash) WHERE listed = 0;

-- +goose Down
DROP INDEX remote_objects_unlisted;
