-- +goose Up
-- tokens: the bearer tokens wsctl serve accepts. Only the SHA-256 of a
-- token's secret is kept (secret_hash), never the secret. actors is a JSON
-- array of the actors the token is limited to ([] = no limit); read_only 1
-- refuses every change. revoked is when the token was revoked, NULL while
-- it is valid: a revoked row stays, so ls shows what was revoked and when.
CREATE TABLE tokens (
    id          TEXT PRIMARY KEY,
    secret_hash BLOB NOT NULL CHECK (length(secret_hash) = 32),
    name        TEXT NOT NULL DEFAULT '',
    actors      TEXT NOT NULL DEFAULT '[]',
    read_only   INTEGER NOT NULL DEFAULT 0,
    created     INTEGER NOT NULL,
    revoked     INTEGER
) WITHOUT ROWID;

-- +goose Down
DROP TABLE tokens;
