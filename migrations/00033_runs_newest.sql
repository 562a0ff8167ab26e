-- +goose Up
-- A page of the newest runs (ORDER BY created_at DESC, id LIMIT n: wsctl
-- runs --limit, latest) reads its rows from an index in that order,
-- without sorting every run, or every run of the status asked for, first.
CREATE INDEX runs_newest ON runs (created_at DESC, id);
DROP INDEX runs_status;
CREATE INDEX runs_status ON runs (status, created_at DESC, id);

-- +goose Down
DROP INDEX runs_status;
CREATE INDEX runs_status ON runs (status);
DROP INDEX runs_newest;
