-- +goose Up
-- A chunked put that streams commits each chunk in a transaction of its
-- own and lists them in its blob only at its end. chunk_holds names, for
-- each such put in progress in any process, the chunks it stored or found,
-- written in the transaction that stored or found each: a put that is
-- abandoned (cancelled, its reader failed) frees the chunks it holds that
-- no other put in progress holds and no blob lists, so it never frees one
-- another put relies on (cas/holds.go).
CREATE TABLE chunk_holds (
    chunk BLOB    NOT NULL,
    put   BLOB    NOT NULL,
    since INTEGER NOT NULL,
    PRIMARY KEY (chunk, put)
) WITHOUT ROWID;
CREATE INDEX chunk_holds_put ON chunk_holds (put);
