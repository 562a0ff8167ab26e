-- +goose Up
-- A delta row (codec 3) may now hold an edit: the few bytes a version
-- keeps of its own between the prefix and the suffix it shares with its
-- base (cas/edit.go), told from a zstd frame by its first four bytes.
-- Builds of format 2 would read such a row as damaged, so the format
-- version moves to 3.
UPDATE meta SET value = '3' WHERE key = 'format_version';

-- +goose Down
-- Going back would leave edits that format 2 reads as damaged: refuse
-- while any is stored.
CREATE TEMP TABLE format_3_rows (n INTEGER CHECK (n = 0));
INSERT INTO format_3_rows SELECT count(*) FROM blobs WHERE codec = 3 AND substr(data, 1, 4) = CAST(X'77734501' AS BLOB);
DROP TABLE format_3_rows;
UPDATE meta SET value = '2' WHERE key = 'format_version';
