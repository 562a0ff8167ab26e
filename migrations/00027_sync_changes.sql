-- +goose Up
-- What changed since a sync (owner: remote), so that a sync examines the
-- chats, runs and actor spaces that changed rather than every one the
-- store holds (remote/changes.go).
--
-- sync_remotes lists the remotes (bucket/prefix) the store syncs with,
-- from its first sync there on; full = 1 until a sync there has examined
-- every item once (the first, one after the store's device was reset, and
-- each remote synced before this migration).
CREATE TABLE sync_remotes (
    remote TEXT NOT NULL PRIMARY KEY,
    full   INTEGER NOT NULL DEFAULT 1
) WITHOUT ROWID;
INSERT INTO sync_remotes (remote) SELECT DISTINCT remote FROM sync_items;

-- sync_changes names, for each remote, the items ("KIND ID", as
-- remote.Item.Name) whose row or journal changed since that remote's
-- last sync examined them. A sync claims the rows it examines
-- (claimed = 1) and deletes them once its segment is recorded; a change
-- meanwhile sets claimed back to 0, so it is examined again next time.
CREATE TABLE sync_changes (
    remote  TEXT NOT NULL,
    name    TEXT NOT NULL,
    claimed INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (remote, name)
) WITHOUT ROWID;

-- The triggers mark every change of what a sync compares (remote.Item's
-- fingerprint: the chat, run or actor space row, a run's last event), by
-- whichever package makes it. A name marked and not claimed is left as
-- it is: a write pays one lookup, not a page. With no remote registered
-- they insert nothing. Deletions travel as tombstones (sync_tombstones).
-- +goose StatementBegin
CREATE TRIGGER sync_change_run_insert AFTER INSERT ON runs BEGIN
    INSERT INTO sync_changes (remote, name) SELECT remote, 'run ' || NEW.id FROM sync_remotes WHERE true
    ON CONFLICT (remote, name) DO UPDATE SET claimed = 0 WHERE claimed = 1;
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER sync_change_run_update AFTER UPDATE ON runs BEGIN
    INSERT INTO sync_changes (remote, name) SELECT remote, 'run ' || NEW.id FROM sync_remotes WHERE true
    ON CONFLICT (remote, name) DO UPDATE SET claimed = 0 WHERE claimed = 1;
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER sync_change_event_insert AFTER INSERT ON events BEGIN
    INSERT INTO sync_changes (remote, name) SELECT remote, 'run ' || NEW.run_id FROM sync_remotes WHERE true
    ON CONFLICT (remote, name) DO UPDATE SET claimed = 0 WHERE claimed = 1;
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER sync_change_chat_insert AFTER INSERT ON chats BEGIN
    INSERT INTO sync_changes (remote, name) SELECT remote, 'chat ' || NEW.id FROM sync_remotes WHERE true
    ON CONFLICT (remote, name) DO UPDATE SET claimed = 0 WHERE claimed = 1;
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER sync_change_chat_update AFTER UPDATE ON chats BEGIN
    INSERT INTO sync_changes (remote, name) SELECT remote, 'chat ' || NEW.id FROM sync_remotes WHERE true
    ON CONFLICT (remote, name) DO UPDATE SET claimed = 0 WHERE claimed = 1;
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER sync_change_actor_insert AFTER INSERT ON actor_spaces BEGIN
    INSERT INTO sync_changes (remote, name) SELECT remote, 'actor ' || NEW.actor FROM sync_remotes WHERE true
    ON CONFLICT (remote, name) DO UPDATE SET claimed = 0 WHERE claimed = 1;
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER sync_change_actor_update AFTER UPDATE ON actor_spaces BEGIN
    INSERT INTO sync_changes (remote, name) SELECT remote, 'actor ' || NEW.actor FROM sync_remotes WHERE true
    ON CONFLICT (remote, name) DO UPDATE SET claimed = 0 WHERE claimed = 1;
END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER sync_change_actor_update;
DROP TRIGGER sync_change_actor_insert;
DROP TRIGGER sync_change_chat_update;
DROP TRIGGER sync_change_chat_insert;
DROP TRIGGER sync_change_event_insert;
DROP TRIGGER sync_change_run_update;
DROP TRIGGER sync_change_run_insert;
DROP TABLE sync_changes;
DROP TABLE sync_remotes;
