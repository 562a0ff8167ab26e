package remote

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/wserr"
)

// syncDir holds every device's metadata archives:
// sync/DEVICE/NANOS-HASH.tar, NANOS the publishing time (20 digits, so
// keys sort by it) and HASH the BLAKE3 of the archive's bytes.
const syncDir = "sync/"

// deviceKey is the meta key of the store's device id.
const deviceKey = "remote.device"

// Device returns the id under which the store publishes its metadata
// archives, made (16 hex digits, random) and recorded on first use.
func Device(ctx context.Context, db *index.DB) (string, error) {
	var id string
	err := db.Update(ctx, func(tx *index.Tx) error {
		v, ok, err := index.Setting(ctx, tx, deviceKey)
		if err != nil || ok {
			id = v
			return err
		}
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return err
		}
		id = hex.EncodeToString(b[:])
		return index.SetSetting(ctx, tx, deviceKey, id)
	})
	return id, err
}

// seenKey is the meta key of the archives taken in: a JSON object from
// device id to the key of its last archive taken in.
const seenKey = "remote.seen"

// ResetDevice forgets the store's device id and what it has taken in
// from other devices, so a store restored from another device's replica
// publishes as a device of its own.
func ResetDevice(ctx context.Context, db *index.DB) error {
	return db.Update(ctx, func(tx *index.Tx) error {
		if err := index.DeleteSetting(ctx, tx, deviceKey); err != nil {
			return err
		}
		return index.DeleteSetting(ctx, tx, seenKey)
	})
}

func seen(ctx context.Context, tx *index.Tx) (map[string]string, error) {
	m := map[string]string{}
	v, ok, err := index.Setting(ctx, tx, seenKey)
	if err != nil || !ok {
		return m, err
	}
	if err := json.Unmarshal([]byte(v), &m); err != nil {
		return nil, wserr.New(wserr.Corrupt, "sync", seenKey, "unreadable setting: %v", err)
	}
	return m, nil
}

// Seen returns, for each device, the key of its last archive the store
// took in.
func Seen(ctx context.Context, db *index.DB) (map[string]string, error) {
	var m map[string]string
	err := db.View(ctx, func(tx *index.Tx) error {
		var err error
		m, err = seen(ctx, tx)
		return err
	})
	return m, err
}

// SetSeen records that the store took in the archive at key of device.
func SetSeen(ctx context.Context, db *index.DB, device, key string) error {
	return db.Update(ctx, func(tx *index.Tx) error {
		m, err := seen(ctx, tx)
		if err != nil {
			return err
		}
		m[device] = key
		b, err := json.Marshal(m)
		if err != nil {
			return err
		}
		return index.SetSetting(ctx, tx, seenKey, string(b))
	})
}

// Archive names one device's metadata archive (.tar), or its list of the
// objects its store records (.objects), on the object store.
type Archive struct {
	Key    string    `json:"key"`
	Device string    `json:"device"`
	At     time.Time `json:"at"`
	Hash   cas.Hash  `json:"hash"`
	// Objects marks an object list rather than an archive.
	Objects bool `json:"objects,omitempty"`
}

func parseArchiveKey(key string) (Archive, bool) {
	rest, ok := strings.CutPrefix(key, syncDir)
	if !ok {
		return Archive{}, false
	}
	dev, name, ok := strings.Cut(rest, "/")
	if !ok || dev == "" {
		return Archive{}, false
	}
	stem, ok := strings.CutSuffix(name, ".tar")
	objects := false
	if !ok {
		if stem, ok = strings.CutSuffix(name, ".objects"); !ok {
			return Archive{}, false
		}
		objects = true
	}
	ns, hs, ok := strings.Cut(stem, "-")
	if !ok {
		return Archive{}, false
	}
	n, err := strconv.ParseInt(ns, 10, 64)
	if err != nil {
		return Archive{}, false
	}
	h, err := cas.ParseHash(hs)
	if err != nil {
		return Archive{}, false
	}
	return Archive{Key: key, Device: dev, At: time.Unix(0, n).UTC(), Hash: h, Objects: objects}, true
}

// Publish writes data, a metadata archive of device's store, to the
// object store under a new write-once key, and returns its name. A
// failure to reach the store is store.busy.
func (s *Storage) Publish(ctx context.Context, device string, at time.Time, data []byte) (Archive, error) {
	return s.publish(ctx, device, at, data, ".tar")
}

func (s *Storage) publish(ctx context.Context, device string, at time.Time, data []byte, ext string) (Archive, error) {
	h := cas.Sum(data)
	a := Archive{Key: fmt.Sprintf("%s%s/%020d-%s%s", syncDir, device, at.UnixNano(), h, ext), Device: device, At: at.UTC(), Hash: h, Objects: ext == ".objects"}
	if _, err := s.b.put(ctx, a.Key, data); err != nil {
		return Archive{}, fmt.Errorf("publish: %w", err)
	}
	return a, nil
}

// Archives returns every metadata archive on the object store, oldest
// first for each device.
func (s *Storage) Archives(ctx context.Context) ([]Archive, error) {
	var out []Archive
	err := s.b.list(ctx, syncDir, func(key string, _ time.Time) error {
		if a, ok := parseArchiveKey(key); ok {
			out = append(out, a)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list archives: %w", err)
	}
	return out, nil
}

// Latest returns the newest archive of each device (object lists left
// out).
func Latest(all []Archive) map[string]Archive { return latest(all, false) }

func latest(all []Archive, objects bool) map[string]Archive {
	out := map[string]Archive{}
	for _, a := range all {
		if a.Objects != objects {
			continue
		}
		if cur, ok := out[a.Device]; !ok || a.Key > cur.Key {
			out[a.Device] = a
		}
	}
	return out
}

// Fetch returns the bytes of the archive a, checked against the hash its
// key names: other bytes fail with store.corrupt, a missing object with
// store.corrupt wrapping ErrMissing.
func (s *Storage) Fetch(ctx context.Context, a Archive) ([]byte, error) {
	b, err := s.b.get(ctx, a.Key, 0, -1)
	if err != nil {
		return nil, fmt.Errorf("fetch archive: %w", err)
	}
	if cas.Sum(b) != a.Hash {
		return nil, fmt.Errorf("%w: %w", corrupt(a.Key, "the archive does not hash to its key"), cas.ErrCorrupt)
	}
	return b, nil
}
