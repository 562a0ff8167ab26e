-- +goose Up
-- A page of chats (ORDER BY created_at DESC, id LIMIT n: chats.list,
-- wsctl chats) reads its rows from an index in that order, from where the
-- page before ended, without sorting every chat first; the chats of one
-- stableChatId (wsctl runs --chat) are found without reading every chat.
CREATE INDEX chats_newest ON chats (created_at DESC, id);
CREATE INDEX chats_stable ON chats (stable_chat_id, created_at DESC, id);

-- +goose Down
DROP INDEX chats_stable;
DROP INDEX chats_newest;
