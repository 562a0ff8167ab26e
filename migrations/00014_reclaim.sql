-- +goose Up
-- Incremental reclaim: after a deletion, gc checks only the objects the
-- deleted rows referenced, each against its possible referrers through an
-- index, instead of marking the whole store.

-- tree_refs lists what each tree row names: every entry of a whole tree,
-- or the entries a patch sets and the patch's base, so "does a stored tree
-- name X" is one lookup in its primary key. child is the first 8 bytes of
-- X's address as a big-endian integer: a row is small, and two addresses
-- sharing a prefix only make a lookup answer yes where it could say no
-- (the object is kept, never lost); parent is the tree row's whole address,
-- so each row belongs to one tree. Trees stored before this migration get
-- theirs from a backfill in bounded steps (tree_refs_backfill holds its
-- position); until it is done, the first reclaim fills them in.
CREATE TABLE tree_refs (
    child  INTEGER NOT NULL,
    parent BLOB NOT NULL,
    PRIMARY KEY (child, parent)
) WITHOUT ROWID;

CREATE TABLE tree_refs_backfill (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    after BLOB NOT NULL
);
INSERT INTO tree_refs_backfill (id, after) SELECT 1, x'' WHERE EXISTS (SELECT 1 FROM trees);

-- gc_candidates holds the objects a deletion may have left unreferenced
-- (kind 1 tree, 2 blob, 3 chunk), filled in the deleting transaction and
-- emptied by reclaim's steps; due is when the object may be checked (a
-- young row waits out the grace).
CREATE TABLE gc_candidates (
    hash BLOB NOT NULL,
    kind INTEGER NOT NULL CHECK (kind IN (1, 2, 3)),
    due  INTEGER NOT NULL,
    PRIMARY KEY (hash, kind)
) WITHOUT ROWID;
CREATE INDEX gc_candidates_due ON gc_candidates (due);

-- The referrers of an object, each found through an index.
CREATE INDEX blobs_base ON blobs (base) WHERE base IS NOT NULL;
CREATE INDEX checkpoints_root ON checkpoints (root);
CREATE INDEX runs_root ON runs (root);
CREATE INDEX runs_persist_base ON runs (persist_base);
CREATE INDEX runs_records ON runs (records) WHERE records IS NOT NULL;
CREATE INDEX chats_persist_root ON chats (persist_root);
CREATE INDEX actor_spaces_root ON actor_spaces (root);
CREATE INDEX actor_changes_root ON actor_changes (root) WHERE root IS NOT NULL;

-- +goose Down
DROP INDEX actor_changes_root;
DROP INDEX actor_spaces_root;
DROP INDEX chats_persist_root;
DROP INDEX runs_records;
DROP INDEX runs_persist_base;
DROP INDEX runs_root;
DROP INDEX checkpoints_root;
DROP INDEX blobs_base;
DROP TABLE gc_candidates;
DROP TABLE tree_refs_backfill;
DROP TABLE tree_refs;
