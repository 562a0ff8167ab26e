-- +goose Up
-- A sync's claim on sync_changes rows names the sync (claimed holds its
-- token, remote/changes.go), so one sync settles only what it claimed
-- itself: a second sync of the same store that claimed a change while
-- the first published, and died, leaves that change to examine. The
-- triggers mark a change by setting any claim back to 0.
DROP TRIGGER sync_change_run_insert;
-- +goose StatementBegin
CREATE TRIGGER sync_change_run_insert AFTER INSERT ON runs BEGIN
    INSERT INTO sync_changes (remote, name) SELECT remote, 'run ' || NEW.id FROM sync_remotes WHERE true
    ON CONFLICT (remote, name) DO UPDATE SET claimed = 0 WHERE claimed != 0;
END;
-- +goose StatementEnd
DROP TRIGGER sync_change_run_update;
-- +goose StatementBegin
CREATE TRIGGER sync_change_run_update AFTER UPDATE ON runs BEGIN
    INSERT INTO sync_changes (remote, name) SELECT remote, 'run ' || NEW.id FROM sync_remotes WHERE true
    ON CONFLICT (remote, name) DO UPDATE SET claimed = 0 WHERE claimed != 0;
END;
-- +goose StatementEnd
DROP TRIGGER sync_change_event_insert;
-- +goose StatementBegin
CREATE TRIGGER sync_change_event_insert AFTER INSERT ON events BEGIN
    INSERT INTO sync_changes (remote, name) SELECT remote, 'run ' || NEW.run_id FROM sync_remotes WHERE true
    ON CONFLICT (remote, name) DO UPDATE SET claimed = 0 WHERE claimed != 0;
END;
-- +goose StatementEnd
DROP TRIGGER sync_change_chat_insert;
-- +goose StatementBegin
CREATE TRIGGER sync_change_chat_insert AFTER INSERT ON chats BEGIN
    INSERT INTO sync_changes (remote, name) SELECT remote, 'chat ' || NEW.id FROM sync_remotes WHERE true
    ON CONFLICT (remote, name) DO UPDATE SET claimed = 0 WHERE claimed != 0;
END;
-- +goose StatementEnd
DROP TRIGGER sync_change_chat_update;
-- +goose StatementBegin
CREATE TRIGGER sync_change_chat_update AFTER UPDATE ON chats BEGIN
    INSERT INTO sync_changes (remote, name) SELECT remote, 'chat ' || NEW.id FROM sync_remotes WHERE true
    ON CONFLICT (remote, name) DO UPDATE SET claimed = 0 WHERE claimed != 0;
END;
-- +goose StatementEnd
DROP TRIGGER sync_change_actor_insert;
-- +goose StatementBegin
CREATE TRIGGER sync_change_actor_insert AFTER INSERT ON actor_spaces BEGIN
    INSERT INTO sync_changes (remote, name) SELECT remote, 'actor ' || NEW.actor FROM sync_remotes WHERE true
    ON CONFLICT (remote, name) DO UPDATE SET claimed = 0 WHERE claimed != 0;
END;
-- +goose StatementEnd
DROP TRIGGER sync_change_actor_update;
-- +goose StatementBegin
CREATE TRIGGER sync_change_actor_update AFTER UPDATE ON actor_spaces BEGIN
    INSERT INTO sync_changes (remote, name) SELECT remote, 'actor ' || NEW.actor FROM sync_remotes WHERE true
    ON CONFLICT (remote, name) DO UPDATE SET claimed = 0 WHERE claimed != 0;
END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER sync_change_run_insert;
-- +goose StatementBegin
CREATE TRIGGER sync_change_run_insert AFTER INSERT ON runs BEGIN
    INSERT INTO sync_changes (remote, name) SELECT remote, 'run ' || NEW.id FROM sync_remotes WHERE true
    ON CONFLICT (remote, name) DO UPDATE SET claimed = 0 WHERE claimed = 1;
END;
-- +goose StatementEnd
DROP TRIGGER sync_change_run_update;
-- +goose StatementBegin
CREATE TRIGGER sync_change_run_update AFTER UPDATE ON runs BEGIN
    INSERT INTO sync_changes (remote, name) SELECT remote, 'run ' || NEW.id FROM sync_remotes WHERE true
    ON CONFLICT (remote, name) DO UPDATE SET claimed = 0 WHERE claimed = 1;
END;
-- +goose StatementEnd
DROP TRIGGER sync_change_event_insert;
-- +goose StatementBegin
CREATE TRIGGER sync_change_event_insert AFTER INSERT ON events BEGIN
    INSERT INTO sync_changes (remote, name) SELECT remote, 'run ' || NEW.run_id FROM sync_remotes WHERE true
    ON CONFLICT (remote, name) DO UPDATE SET claimed = 0 WHERE claimed = 1;
END;
-- +goose StatementEnd
DROP TRIGGER sync_change_chat_insert;
-- +goose StatementBegin
CREATE TRIGGER sync_change_chat_insert AFTER INSERT ON chats BEGIN
    INSERT INTO sync_changes (remote, name) SELECT remote, 'chat ' || NEW.id FROM sync_remotes WHERE true
    ON CONFLICT (remote, name) DO UPDATE SET claimed = 0 WHERE claimed = 1;
END;
-- +goose StatementEnd
DROP TRIGGER sync_change_chat_update;
-- +goose StatementBegin
CREATE TRIGGER sync_change_chat_update AFTER UPDATE ON chats BEGIN
    INSERT INTO sync_changes (remote, name) SELECT remote, 'chat ' || NEW.id FROM sync_remotes WHERE true
    ON CONFLICT (remote, name) DO UPDATE SET claimed = 0 WHERE claimed = 1;
END;
-- +goose StatementEnd
DROP TRIGGER sync_change_actor_insert;
-- +goose StatementBegin
CREATE TRIGGER sync_change_actor_insert AFTER INSERT ON actor_spaces BEGIN
    INSERT INTO sync_changes (remote, name) SELECT remote, 'actor ' || NEW.actor FROM sync_remotes WHERE true
    ON CONFLICT (remote, name) DO UPDATE SET claimed = 0 WHERE claimed = 1;
END;
-- +goose StatementEnd
DROP TRIGGER sync_change_actor_update;
-- +goose StatementBegin
CREATE TRIGGER sync_change_actor_update AFTER UPDATE ON actor_spaces BEGIN
    INSERT INTO sync_changes (remote, name) SELECT remote, 'actor ' || NEW.actor FROM sync_remotes WHERE true
    ON CONFLICT (remote, name) DO UPDATE SET claimed = 0 WHERE claimed = 1;
END;
-- +goose StatementEnd
