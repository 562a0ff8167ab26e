-- +goose Up
-- remote_objects_pack finds the objects of one pack, and the packs the
-- store recorded one after another, without reading every object: what a
-- sync does when it finds packs gone from the object store.
CREATE INDEX remote_objects_pack ON remote_objects (pack);

-- +goose Down
DROP INDEX remote_objects_pack;
