-- +goose Up
-- expires is when a token stops being valid (Unix nanoseconds), NULL for a
-- token valid until it is revoked.
ALTER TABLE tokens ADD COLUMN expires INTEGER;

-- +goose Down
ALTER TABLE tokens DROP COLUMN expires;
