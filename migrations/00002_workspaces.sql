-- +goose Up
-- trees: Merkle directories. hash is keyed BLAKE3 of data, the canonical
-- encoding of the sorted entries; created as in blobs, for gc. Like blobs
-- and chunks it is a rowid table: rows run to kilobytes, which SQLite keeps
-- better out of the primary-key b-tree.
CREATE TABLE trees (
    hash    BLOB PRIMARY KEY CHECK (length(hash) = 32),
    data    BLOB NOT NULL,
    created INTEGER NOT NULL
);

-- chats: one row per chat workspace. id is derived from {kind,
-- stableChatId}; chat_ref is the latest host reference seen (it may change
-- on rename without changing id). persist_root is the tree of the chat's
-- persist/ layer (the empty tree's address when it has none) and persist_version counts promotions,
-- for compare-and-swap.
CREATE TABLE chats (
    id              TEXT PRIMARY KEY,
    kind            TEXT NOT NULL,
    stable_chat_id  TEXT NOT NULL,
    chat_ref        TEXT NOT NULL DEFAULT '{}',
    persist_root    BLOB NOT NULL CHECK (length(persist_root) = 32),
    persist_version INTEGER NOT NULL DEFAULT 0,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    UNIQUE (kind, stable_chat_id)
);

-- runs: one row per agent run. root is the live workspace tree; a
-- checkpoint copies it and a rollback swaps it back.
CREATE TABLE runs (
    id              TEXT PRIMARY KEY,
    chat_id         TEXT NOT NULL REFERENCES chats (id),
    chat_ref        TEXT NOT NULL DEFAULT '{}',
    profile         TEXT NOT NULL,
    status          TEXT NOT NULL,
    root            BLOB NOT NULL CHECK (length(root) = 32),
    persist_base    BLOB NOT NULL CHECK (length(persist_base) = 32),
    persist_version INTEGER NOT NULL,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    finished_at     INTEGER
);
CREATE INDEX runs_chat ON runs (chat_id, created_at);
CREATE INDEX runs_status ON runs (status);

-- events: the append-only journal, per run, seq from 1 without gaps.
-- Appending reads max(seq) through the primary key, so it costs the same at
-- any length.
CREATE TABLE events (
    run_id  TEXT NOT NULL,
    seq     INTEGER NOT NULL CHECK (seq >= 1),
    type    TEXT NOT NULL,
    level   TEXT NOT NULL,
    at      INTEGER NOT NULL,
    payload TEXT NOT NULL DEFAULT '{}',
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;

-- +goose Down
DROP TABLE events;
DROP TABLE runs;
DROP TABLE chats;
DROP TABLE trees;
