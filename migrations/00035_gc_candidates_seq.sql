-- +goose Up
-- A reclaim after one operation checks the candidates that operation
-- recorded, and only a bounded number of those queued before it: seq is a
-- candidate's place in the queue, so "what this operation recorded" is the
-- stretch between two places. A candidate recorded by a deletion takes the
-- next place; one a collection records (what a deleted tree named, one
-- kept for the grace) takes the place of the candidate it came from.
-- Candidates queued before this migration are at place 0, behind all.
-- gc_candidates_last holds the highest place ever given out, kept when the
-- candidates at the end of the queue are taken, so a place is never given
-- twice.
ALTER TABLE gc_candidates ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
CREATE INDEX gc_candidates_seq ON gc_candidates (seq);

CREATE TABLE gc_candidates_last (
    id  INTEGER PRIMARY KEY CHECK (id = 1),
    seq INTEGER NOT NULL
);
INSERT INTO gc_candidates_last (id, seq) VALUES (1, 0);

-- +goose Down
DROP TABLE gc_candidates_last;
DROP INDEX gc_candidates_seq;
ALTER TABLE gc_candidates DROP COLUMN seq;
