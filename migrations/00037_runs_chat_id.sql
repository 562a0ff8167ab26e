-- +goose Up
-- A walk of one chat's runs in id order (an export or a sync of the chat)
-- reads a page of their ids after the last one: from this index it reads
-- that page, where runs_chat (chat_id, created_at) made it read and sort
-- every run of the chat for each page.
CREATE INDEX runs_chat_id ON runs (chat_id, id);

-- +goose Down
DROP INDEX runs_chat_id;
