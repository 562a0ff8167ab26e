-- +goose Up
-- The byte cap deletes a run's oldest checkpoint and hands its parent to
-- its children; this index finds those children without reading the
-- run's other checkpoints, which the byte cap (unlike the count cap) does
-- not bound.
-- dead_bytes (00009) is measured from then on against the run's newest
-- checkpoint before, not the parent, so that a branch abandoned by a
-- rollback counts; rows written before keep what they recorded.
CREATE INDEX checkpoints_parent ON checkpoints (run_id, parent_seq);

-- +goose Down
DROP INDEX checkpoints_parent;
