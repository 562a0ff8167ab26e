package remote

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/wserr"
)

// Meta keys of the sync state besides its tables.
const (
	deviceKey    = "remote.device"          // the store's device id
	baseKey      = "remote.sync.base"       // {"size","since"}: the last base's bytes and the deltas' since
	deletionsKey = "remote.sync.deletions"  // the last deletion-log id published
	oldSeenKey   = "remote.seen"            // the archives of the first sync format
	registeredAt = "remote.sync.registered" // the device id registered under devices/
	firstKey     = "remote.sync.first"      // the items from before migration 00029 were given their first events
	atKey        = "remote.sync.at"         // the time of the device's last published segment, Unix nanoseconds
	lastKey      = "remote.sync.last"       // the key of the device's last published segment
	rebaseKey    = "remote.sync.rebase"     // set: the device's next segment is a base (CheckPublished found its last gone)
)

// SegmentTime returns the time of the device's next segment: now, or a
// nanosecond after its last published segment's when the clock reads no
// later (it stepped back, or a host fixed it). A segment's key begins
// with its time, and other devices read a device's segments after the
// last key they read, so a key that sorted before it would never be read.
func SegmentTime(ctx context.Context, db *index.DB, now time.Time) (time.Time, error) {
	v, ok, err := setting(ctx, db, atKey)
	if err != nil || !ok {
		return now, err
	}
	last, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return now, wserr.New(wserr.Corrupt, "sync", atKey, "unreadable time of the last segment %q", v)
	}
	if now.UnixNano() <= last {
		return time.Unix(0, last+1).UTC(), nil
	}
	return now, nil
}

// FillFirst gives the run items recorded before migration 00029 the hash
// of their run's first event, which find returns (zero where it cannot
// tell: the run is not here, no longer holds the state the item records,
// or does not read), a page of items at a time, once per store: later
// calls read one setting.
// wsstore.Open calls it, before anything can be deleted.
func FillFirst(ctx context.Context, db *index.DB, find func(context.Context, Item) (cas.Hash, error)) error {
	if _, done, err := setting(ctx, db, firstKey); err != nil || done {
		return err
	}
	var remotes []string
	if err := db.View(ctx, func(tx *index.Tx) error {
		return tx.SelectContext(ctx, &remotes, `SELECT DISTINCT remote FROM sync_items ORDER BY remote`)
	}); err != nil {
		return index.Translate(err)
	}
	for _, remote := range remotes {
		// Pages in the key's order, so filling costs one pass over the
		// items however many there are.
		for after := ""; ; {
			var page []Item
			if err := db.View(ctx, func(tx *index.Tx) error {
				return tx.SelectContext(ctx, &page, `SELECT kind, id, parent, fp, seq, last, first, sent FROM sync_items
					WHERE remote = ? AND kind = 'run' AND id > ? AND first IS NULL ORDER BY id LIMIT 256`, remote, after)
			}); err != nil {
				return index.Translate(err)
			}
			firsts := make([]cas.Hash, len(page))
			for i, it := range page {
				f, err := find(ctx, it)
				if err != nil {
					return err
				}
				firsts[i] = f
			}
			if err := db.Update(ctx, func(tx *index.Tx) error {
				for i, it := range page {
					if firsts[i].IsZero() {
						continue
					}
					if _, err := tx.ExecContext(ctx, `UPDATE sync_items SET first = ? WHERE remote = ? AND kind = 'run' AND id = ? AND first IS NULL`,
						firsts[i], remote, it.ID); err != nil {
						return index.Translate(err)
					}
				}
				return nil
			}); err != nil {
				return err
			}
			if len(page) < 256 {
				break
			}
			after = page[len(page)-1].ID
		}
	}
	return db.Update(ctx, func(tx *index.Tx) error { return index.SetSetting(ctx, tx, firstKey, "1") })
}

// Device returns the id under which the store publishes its sync
// segments, made (16 hex digits, random) and recorded on first use.
func Device(ctx context.Context, db *index.DB) (string, error) {
	var id string
	var ok bool
	err := db.View(ctx, func(tx *index.Tx) error {
		var err error
		id, ok, err = index.Setting(ctx, tx, deviceKey)
		return err
	})
	if err != nil || ok {
		return id, err
	}
	err = db.Update(ctx, func(tx *index.Tx) error {
		var err error
		id, err = deviceIn(ctx, tx)
		return err
	})
	return id, err
}

// deviceIn is Device in the write transaction tx.
func deviceIn(ctx context.Context, tx *index.Tx) (string, error) {
	v, ok, err := index.Setting(ctx, tx, deviceKey)
	if err != nil || ok {
		return v, err
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	id := hex.EncodeToString(b[:])
	return id, index.SetSetting(ctx, tx, deviceKey, id)
}

// RecordedDevice returns the store's device id, if it has one yet.
func RecordedDevice(ctx context.Context, db *index.DB) (id string, ok bool, err error) {
	return setting(ctx, db, deviceKey)
}

// setting reads the setting under key in a read transaction of its own.
func setting(ctx context.Context, db *index.DB, key string) (v string, ok bool, err error) {
	err = db.View(ctx, func(tx *index.Tx) error {
		v, ok, err = index.Setting(ctx, tx, key)
		return err
	})
	return v, ok, err
}

// Resend is the fingerprint of an item whose state the store must send
// whole in its next segment: no state of a chat, run or actor space has it.
var Resend = cas.Sum([]byte("resend"))

// ResetDevice gives the store a new device id and forgets what it
// published under the old one, so a store restored from another device's
// replica publishes as a device of its own, starting with a base segment
// of every item. Its items stay, marked unsent with the fingerprint
// Resend, so that a chat or run it deletes before that sync is still
// known to the other devices and its deletion is published. What it
// took in from other devices and the deletions it knows stay: the
// restored database holds their effect; its tombstones no segment
// carries yet become the new device's. The old device id is recorded as
// the one the store was restored from (ReplicaOwnerOf).
func ResetDevice(ctx context.Context, db *index.DB) error {
	return db.Update(ctx, func(tx *index.Tx) error {
		old, had, err := index.Setting(ctx, tx, deviceKey)
		if err != nil {
			return err
		}
		for _, k := range []string{deviceKey, baseKey, oldSeenKey, registeredAt, lastKey, rebaseKey} {
			if err := index.DeleteSetting(ctx, tx, k); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, `UPDATE sync_items SET fp = ?, sent = 0`, Resend); err != nil {
			return index.Translate(err)
		}
		for _, q := range []string{`DELETE FROM remote_dropped`, `UPDATE remote_objects SET listed = 0 WHERE listed != 0`,
			`DELETE FROM sync_changes`, `UPDATE sync_remotes SET full = 1`} {
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return index.Translate(err)
			}
		}
		if !had {
			return index.DeleteSetting(ctx, tx, sourceKey)
		}
		// The replica of the old device is this store's to continue
		// (ClaimReplica).
		if err := index.SetSetting(ctx, tx, sourceKey, old); err != nil {
			return err
		}
		dev, err := deviceIn(ctx, tx)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE sync_tombstones SET device = ? WHERE device = ? AND pending != 0`, dev, old)
		return index.Translate(err)
	})
}

// remoteKey names the tier in the sync tables: bucket and prefix.
func (s *Storage) remoteKey() string { return s.loc.Bucket + "/" + s.loc.Prefix }

// Item is the state of one chat, run or actor space as the store last
// published it to the tier or took it in from there.
type Item struct {
	Kind   string   `db:"kind"` // "chat", "run" or "actor"
	ID     string   `db:"id"`
	Parent string   `db:"parent"` // a run's chat
	FP     cas.Hash `db:"fp"`     // fingerprint of the row and its journal length
	Seq    int64    `db:"seq"`    // a run's last journal seq, an actor's version
	Last   cas.Hash `db:"last"`   // the hash of a run's last event
	First  cas.Hash `db:"first"`  // the hash of a run's first event
	// Sent says the state is one the store published, not one it took
	// in: a base segment carries what the store sent.
	Sent bool `db:"sent"`
}

// Name is "KIND ID", as archive summaries name objects.
func (it Item) Name() string { return it.Kind + " " + it.ID }

// ItemsFrom returns, in tx, at most limit of the tier's synced items of
// kind, in id order, from the id from on: a caller reads them a page at
// a time, however many there are.
func (s *Storage) ItemsFrom(ctx context.Context, tx *index.Tx, kind, from string, limit int) ([]Item, error) {
	var rows []Item
	if err := tx.SelectContext(ctx, &rows, `SELECT kind, id, parent, fp, seq, last, first, sent FROM sync_items
		WHERE remote = ? AND kind = ? AND id >= ? ORDER BY id LIMIT ?`, s.remoteKey(), kind, from, limit); err != nil {
		return nil, index.Translate(err)
	}
	return rows, nil
}

// ItemsNamed returns the items of the tier's sync state that names
// ("KIND ID") name, by Name.
func (s *Storage) ItemsNamed(ctx context.Context, db *index.DB, names []string) (map[string]Item, error) {
	out := map[string]Item{}
	err := db.View(ctx, func(tx *index.Tx) error {
		for _, name := range names {
			kind, id, _ := strings.Cut(name, " ")
			var it Item
			err := tx.GetContext(ctx, &it, `SELECT kind, id, parent, fp, seq, last, first, sent FROM sync_items WHERE remote = ? AND kind = ? AND id = ?`,
				s.remoteKey(), kind, id)
			if errors.Is(err, sql.ErrNoRows) {
				continue
			}
			if err != nil {
				return index.Translate(err)
			}
			out[name] = it
		}
		return nil
	})
	return out, err
}

// LastBase returns the bytes of the last base segment the store published
// and of the deltas since; ok is false before its first.
func LastBase(ctx context.Context, db *index.DB) (size, since int64, ok bool, err error) {
	err = db.View(ctx, func(tx *index.Tx) error {
		v, found, err := index.Setting(ctx, tx, baseKey)
		if err != nil || !found {
			return err
		}
		var b struct{ Size, Since int64 }
		if err := json.Unmarshal([]byte(v), &b); err != nil {
			return wserr.New(wserr.Corrupt, "sync", baseKey, "unreadable setting: %v", err)
		}
		size, since, ok = b.Size, b.Since, true
		return nil
	})
	return size, since, ok, err
}

// LastSegment returns the key of the last segment the store published
// ("" before its first, or when an earlier build published it): its next
// segment's Prev.
func LastSegment(ctx context.Context, db *index.DB) (string, error) {
	v, _, err := setting(ctx, db, lastKey)
	return v, err
}

// Rebase reports whether the store's next segment must be a base, as
// CheckPublished decided when it found the store's last segment gone.
func Rebase(ctx context.Context, db *index.DB) (bool, error) {
	_, ok, err := setting(ctx, db, rebaseKey)
	return ok, err
}

// DeletionCursor returns the id of the last deletion-log entry the store
// published (0: none).
func DeletionCursor(ctx context.Context, db *index.DB) (int64, error) {
	var n int64
	err := db.View(ctx, func(tx *index.Tx) error {
		v, ok, err := index.Setting(ctx, tx, deletionsKey)
		if err != nil || !ok {
			return err
		}
		n, err = strconv.ParseInt(v, 10, 64)
		return err
	})
	return n, err
}

// Registered reports whether the store registered device under devices/.
func Registered(ctx context.Context, db *index.DB, device string) (bool, error) {
	var ok bool
	err := db.View(ctx, func(tx *index.Tx) error {
		v, found, err := index.Setting(ctx, tx, registeredAt)
		ok = found && v == device
		return err
	})
	return ok, err
}

// SetRegistered records that device is registered under devices/.
func SetRegistered(ctx context.Context, db *index.DB, device string) error {
	return db.Update(ctx, func(tx *index.Tx) error { return index.SetSetting(ctx, tx, registeredAt, device) })
}

// Applied returns, for each other device, the key of its last segment the
// store took in from the tier.
func (s *Storage) Applied(ctx context.Context, db *index.DB) (map[string]string, error) {
	var rows []struct {
		Device string `db:"device"`
		Key    string `db:"last_key"`
	}
	err := db.View(ctx, func(tx *index.Tx) error {
		return tx.SelectContext(ctx, &rows, `SELECT device, last_key FROM sync_devices WHERE remote = ?`, s.remoteKey())
	})
	if err != nil {
		return nil, index.Translate(err)
	}
	out := map[string]string{}
	for _, r := range rows {
		out[r.Device] = r.Key
	}
	return out, nil
}

// TakenIn is what the store records after it took in one segment: the
// segment, the items it brought (their state now), and its tombstones.
type TakenIn struct {
	Segment Segment
	// Items are states the segment brought, and EachItem, if set, calls
	// its function with more of them, one at a time (a base's, listed
	// on disk); its error fails the record, which then records nothing.
	Items      []Item
	EachItem   func(fn func(Item) error) error
	Drop       []Item // items deleted here by the segment's tombstones
	Tombstones []Tombstone
}

// RecordTakenIn records t in one transaction.
func (s *Storage) RecordTakenIn(ctx context.Context, db *index.DB, t TakenIn) error {
	return db.Update(ctx, func(tx *index.Tx) error {
		if err := s.putItems(ctx, tx, t.Items, t.Drop); err != nil {
			return err
		}
		if err := s.markChanged(ctx, tx, t.Items); err != nil {
			return err
		}
		if t.EachItem != nil {
			if err := t.EachItem(func(it Item) error {
				if err := s.putItem(ctx, tx, it); err != nil {
					return err
				}
				return s.markChanged(ctx, tx, []Item{it})
			}); err != nil {
				return err
			}
		}
		if err := s.putTombstones(ctx, tx, t.Tombstones, false); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO sync_devices (remote, device, last_key, indexed_key) VALUES (?, ?, ?, ?)
			ON CONFLICT (remote, device) DO UPDATE SET last_key = excluded.last_key,
			indexed_key = max(indexed_key, excluded.indexed_key)`, s.remoteKey(), t.Segment.Device, t.Segment.Key, t.Segment.Key)
		return index.Translate(err)
	})
}

// Indexed returns, for each other device, the key of its last segment
// whose index objects the store took in (a sync's or a pull's): a pull
// reads the headers of the segments after it.
func (s *Storage) Indexed(ctx context.Context, db *index.DB) (map[string]string, error) {
	var rows []struct {
		Device  string `db:"device"`
		Last    string `db:"last_key"`
		Indexed string `db:"indexed_key"`
	}
	err := db.View(ctx, func(tx *index.Tx) error {
		return tx.SelectContext(ctx, &rows, `SELECT device, last_key, indexed_key FROM sync_devices WHERE remote = ?`, s.remoteKey())
	})
	if err != nil {
		return nil, index.Translate(err)
	}
	out := map[string]string{}
	for _, r := range rows {
		out[r.Device] = max(r.Last, r.Indexed)
	}
	return out, nil
}

// RecordIndexed records that the store took in the index objects of
// device's segments up to key, its metadata left to a sync.
func (s *Storage) RecordIndexed(ctx context.Context, db *index.DB, device, key string) error {
	return db.Update(ctx, func(tx *index.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO sync_devices (remote, device, last_key, indexed_key) VALUES (?, ?, '', ?)
			ON CONFLICT (remote, device) DO UPDATE SET indexed_key = max(indexed_key, excluded.indexed_key)`,
			s.remoteKey(), device, key)
		return index.Translate(err)
	})
}

// PendingIndexes returns the index objects ("index/HASH") the store
// pushed or took in that none of its segments named yet, sorted.
func (s *Storage) PendingIndexes(ctx context.Context, db *index.DB) ([]string, error) {
	var rows []cas.Hash
	err := db.View(ctx, func(tx *index.Tx) error {
		return tx.SelectContext(ctx, &rows, `SELECT hash FROM sync_indexes ORDER BY hash`)
	})
	if err != nil {
		return nil, index.Translate(err)
	}
	out := make([]string, len(rows))
	for i, h := range rows {
		out[i] = indexKey(h)
	}
	return out, nil
}

// ReadHeader returns the header of seg, reading only as much of the
// object as it takes: a version 3 header is fetched exactly (one ranged
// GET, two when it is longer than the first read) and checked against
// the hash the segment's first line names before it is decoded, and its
// tombstones are left to ReadTombstones. The hash of the whole is not
// checked; a header that does not decode or hash is store.corrupt.
func (s *Storage) ReadHeader(ctx context.Context, seg Segment) (SegmentHeader, error) {
	h, _, err := s.readHeader(ctx, seg)
	if err != nil {
		return SegmentHeader{}, fmt.Errorf("read segment header: %w", err)
	}
	return h, nil
}

func (s *Storage) putItems(ctx context.Context, tx *index.Tx, items, drop []Item) error {
	for _, it := range drop {
		if _, err := tx.ExecContext(ctx, `DELETE FROM sync_items WHERE remote = ? AND kind = ? AND id = ?`, s.remoteKey(), it.Kind, it.ID); err != nil {
			return index.Translate(err)
		}
	}
	for _, it := range items {
		if err := s.putItem(ctx, tx, it); err != nil {
			return err
		}
	}
	return nil
}

// putItem records it as synced.
func (s *Storage) putItem(ctx context.Context, tx *index.Tx, it Item) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO sync_items (remote, kind, id, parent, fp, seq, last, first, sent) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (remote, kind, id) DO UPDATE SET parent = excluded.parent, fp = excluded.fp, seq = excluded.seq,
		last = excluded.last, first = excluded.first, sent = excluded.sent`,
		s.remoteKey(), it.Kind, it.ID, it.Parent, it.FP, it.Seq, baseArg(it.Last), baseArg(it.First), it.Sent); err != nil {
		return index.Translate(err)
	}
	return nil
}

// putTombstones records ts, pending (this device's, not yet published)
// or taken in. A tombstone taken in replaces a recorded one only if it
// deleted a later state, a state of the same length whose journal parted
// from it, or the same state of one taken in too: never this device's
// own tombstone at the same state, which the next segment (pending) or
// base (published) must still carry, nor one not yet published at a
// later state, nor a deletion of a later state, which a device holding
// that state must still apply. One that replaces this device's own
// naming a successor keeps the successor (keepSuccessor).
func (s *Storage) putTombstones(ctx context.Context, tx *index.Tx, ts []Tombstone, pending bool) error {
	own, _, err := index.Setting(ctx, tx, deviceKey)
	if err != nil {
		return err
	}
	for _, t := range ts {
		pending := pending
		if !pending {
			var err error
			if t, pending, err = s.keepSuccessor(ctx, tx, t, own); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO sync_tombstones (remote, kind, id, first, parent, seq, last, device, at, detail, pending)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (remote, kind, id, first) DO UPDATE SET parent = excluded.parent,
			seq = excluded.seq, last = excluded.last, device = excluded.device, at = excluded.at, detail = excluded.detail,
			pending = excluded.pending
			WHERE excluded.pending != 0 OR excluded.seq > sync_tombstones.seq
				OR (excluded.seq = sync_tombstones.seq AND sync_tombstones.pending = 0
					AND (sync_tombstones.device != ? OR excluded.last IS NOT sync_tombstones.last))`,
			s.remoteKey(), t.Kind, t.ID, life(t), t.Parent, t.Seq, baseArg(t.Last), t.Device, t.At.UnixNano(), detailText(t), pending, own); err != nil {
			return index.Translate(err)
		}
	}
	return nil
}

// keepSuccessor returns t, a run's tombstone taken in, as this device's own
// when it replaces (below) this device's own deletion of that run naming a
// successor (the device deleted the run and created another under its id
// before it synced, or published the new run under the id of a deletion it
// knew: replacements), and whether it stays pending: the later state wins,
// and the deletion still names the successor, in this device's next
// segment if its own was not published yet and in its later bases, so
// that a device holding the deleted run puts the new run in its place
// rather than refusing it and then deleting the old run at t, ending with
// nothing under the id while every other device holds the new run.
func (s *Storage) keepSuccessor(ctx context.Context, tx *index.Tx, t Tombstone, own string) (Tombstone, bool, error) {
	d := t.Run()
	if t.Kind != "run" || d.First.IsZero() || !d.Successor.IsZero() || t.Device == own {
		return t, false, nil
	}
	var rows []struct {
		tombRow
		Pending bool `db:"pending"`
	}
	if err := tx.SelectContext(ctx, &rows, `SELECT kind, id, parent, seq, last, device, at, detail, pending FROM sync_tombstones
		WHERE remote = ? AND kind = ? AND id = ? AND first = ? AND device = ?`,
		s.remoteKey(), t.Kind, t.ID, life(t), own); err != nil {
		return t, false, index.Translate(err)
	}
	if len(rows) == 0 {
		return t, false, nil
	}
	mine := rows[0].tombstone()
	succ := mine.Run().Successor
	// putTombstones' rule for a tombstone taken in over this device's own.
	replaces := t.Seq > mine.Seq || !rows[0].Pending && t.Seq == mine.Seq && t.Last != mine.Last
	if succ.IsZero() || !replaces {
		return t, false, nil
	}
	t.Device, t.At = own, mine.At
	t.Detail, _ = json.Marshal(RunDetail{First: d.First, Successor: succ})
	return t, rows[0].Pending, nil
}

// detailText is t's detail as the detail column holds it ("{}" for none).
func detailText(t Tombstone) string {
	if len(t.Detail) == 0 {
		return "{}"
	}
	return string(t.Detail)
}

// life is the key of t's run among the runs its id named over time: the
// hash of its first event, or empty when the tombstone does not name it.
func life(t Tombstone) []byte {
	if f := t.Run().First; !f.IsZero() {
		return f[:]
	}
	return []byte{}
}

// RecordDeletions records ts, the store's own tombstones of deletions up
// to the deletion-log entry cursor, as pending (the next published
// segment carries them), and forgets the items they name, in one
// transaction. Taken in before the other devices' segments, they delete
// again what a segment written before them brings back.
func (s *Storage) RecordDeletions(ctx context.Context, db *index.DB, ts []Tombstone, drop []Item, cursor int64) error {
	return db.Update(ctx, func(tx *index.Tx) error {
		if err := s.putItems(ctx, tx, nil, drop); err != nil {
			return err
		}
		if err := s.putTombstones(ctx, tx, ts, true); err != nil {
			return err
		}
		return index.SetSetting(ctx, tx, deletionsKey, strconv.FormatInt(cursor, 10))
	})
}

// PendingTombstones returns the store's own tombstones no published
// segment carries yet.
func (s *Storage) PendingTombstones(ctx context.Context, db *index.DB) ([]Tombstone, error) {
	return s.tombstones(ctx, db, `SELECT kind, id, parent, seq, last, device, at, detail
		FROM sync_tombstones WHERE remote = ? AND pending != 0 ORDER BY at, kind, id`, s.remoteKey())
}

type tombRow struct {
	Kind   string   `db:"kind"`
	ID     string   `db:"id"`
	Parent string   `db:"parent"`
	Seq    int64    `db:"seq"`
	Last   cas.Hash `db:"last"`
	Device string   `db:"device"`
	At     int64    `db:"at"`
	Detail string   `db:"detail"`
}

func (r tombRow) tombstone() Tombstone {
	return Tombstone{Kind: r.Kind, ID: r.ID, Parent: r.Parent, Seq: r.Seq, Last: r.Last, Device: r.Device,
		At: time.Unix(0, r.At).UTC(), Detail: json.RawMessage(r.Detail)}
}

// FindTombstones returns the tombstones of the chat or run kind/id the
// store knows: one per run the id named over time (RunDetail.First).
func (s *Storage) FindTombstones(ctx context.Context, db *index.DB, kind, id string) ([]Tombstone, error) {
	return s.tombstones(ctx, db, `SELECT kind, id, parent, seq, last, device, at, detail
		FROM sync_tombstones WHERE remote = ? AND kind = ? AND id = ? ORDER BY at, first`, s.remoteKey(), kind, id)
}

// OwnTombstones returns every tombstone device published, for a base
// segment (SegmentHeader.Own), in a temporary file: they are read one row
// at a time, so a base carries any number without holding them. Close it.
func (s *Storage) OwnTombstones(ctx context.Context, db *index.DB, device string) (l *TombstoneList, err error) {
	if l, err = NewTombstoneList(); err != nil {
		return nil, err
	}
	err = db.View(ctx, func(tx *index.Tx) error {
		rows, err := tx.QueryxContext(ctx, `SELECT kind, id, parent, seq, last, device, at, detail
			FROM sync_tombstones WHERE remote = ? AND device = ? ORDER BY at, kind, id`, s.remoteKey(), device)
		if err != nil {
			return index.Translate(err)
		}
		defer rows.Close()
		for rows.Next() {
			var r tombRow
			if err := rows.StructScan(&r); err != nil {
				return index.Translate(err)
			}
			if err := l.Add(r.tombstone()); err != nil {
				return err
			}
		}
		return index.Translate(rows.Err())
	})
	if err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

func (s *Storage) tombstones(ctx context.Context, db *index.DB, q string, args ...any) ([]Tombstone, error) {
	var rows []tombRow
	err := db.View(ctx, func(tx *index.Tx) error { return tx.SelectContext(ctx, &rows, q, args...) })
	if err != nil {
		return nil, index.Translate(err)
	}
	out := make([]Tombstone, len(rows))
	for i, r := range rows {
		out[i] = r.tombstone()
	}
	return out, nil
}

// ObjectDelta returns the change of the store's object set since its last
// published segment: the records dropped after they were listed, then
// those not listed yet. With all it returns every record as added and
// nothing dropped, for a base. The list is on disk; Close it.
func (s *Storage) ObjectDelta(ctx context.Context, db *index.DB, all bool) (*ObjectList, error) {
	l, err := NewObjectList()
	if err != nil {
		return nil, err
	}
	err = db.View(ctx, func(tx *index.Tx) error {
		// The drops recorded later, while the segment is published, are
		// for the next one (RecordPublished).
		if err := tx.GetContext(ctx, &l.mark, `SELECT coalesce(max(id), 0) FROM remote_dropped`); err != nil {
			return index.Translate(err)
		}
		if !all {
			if err := eachObjectRow(ctx, tx, `SELECT kind, hash FROM remote_dropped WHERE 1`, func(kind cas.Kind, h cas.Hash) error {
				return l.Drop(kind, h)
			}); err != nil {
				return err
			}
		}
		q := `SELECT kind, hash FROM remote_objects INDEXED BY remote_objects_unlisted WHERE listed = 0`
		if all {
			q = `SELECT kind, hash FROM remote_objects WHERE 1`
		}
		return eachObjectRow(ctx, tx, q, l.Add)
	})
	if err != nil {
		_ = l.Close()
		return nil, err
	}
	return l, nil
}

// objectPage is how many rows eachObjectRow reads at a time.
const objectPage = 1024

// eachObjectRow calls fn with every row of q (SELECT kind, hash FROM …
// WHERE …), in (kind, hash) order, a page at a time.
func eachObjectRow(ctx context.Context, tx *index.Tx, q string, fn func(kind cas.Kind, h cas.Hash) error) error {
	type row struct {
		Kind cas.Kind `db:"kind"`
		Hash cas.Hash `db:"hash"`
	}
	var rows []row
	kind, hash := 0, []byte{} // before every row: an empty blob sorts first
	for {
		rows = rows[:0]
		if err := tx.SelectContext(ctx, &rows, q+` AND (kind, hash) > (?, ?) ORDER BY kind, hash LIMIT ?`,
			kind, hash, objectPage); err != nil {
			return index.Translate(err)
		}
		for _, r := range rows {
			if err := fn(r.Kind, r.Hash); err != nil {
				return err
			}
		}
		if len(rows) < objectPage {
			return nil
		}
		last := rows[len(rows)-1]
		kind, hash = int(last.Kind), last.Hash[:]
	}
}

// Published is what the store records after it published a segment.
type Published struct {
	Segment Segment
	// Bytes is the segment's size; a base restarts the count of delta
	// bytes, a delta adds to it.
	Bytes int64
	// Items are the states the segment carried, now synced, and EachItem,
	// if set, calls its function with more of them, one at a time (a base
	// lists them from disk).
	Items      []Item
	EachItem   func(fn func(Item) error) error
	Drop       []Item
	Tombstones []Tombstone
	// Objects are the segment's object changes, now listed (nil: none).
	Objects *ObjectList
	// Indexes are the index objects the header named, now announced
	// (a base announces all).
	Indexes []string
	// Claimed are the changes the sync examined (ClaimChanges), now
	// forgotten; the zero Changes, as a pull's, forgets none.
	Claimed Changes
}

// RecordPublished records p in one transaction.
func (s *Storage) RecordPublished(ctx context.Context, db *index.DB, p Published) error {
	return db.Update(ctx, func(tx *index.Tx) error {
		if err := index.SetSetting(ctx, tx, atKey, strconv.FormatInt(p.Segment.At.UnixNano(), 10)); err != nil {
			return err
		}
		if err := index.SetSetting(ctx, tx, lastKey, p.Segment.Key); err != nil {
			return err
		}
		if p.Segment.Base {
			if err := index.DeleteSetting(ctx, tx, rebaseKey); err != nil {
				return err
			}
		}
		if err := s.putItems(ctx, tx, p.Items, p.Drop); err != nil {
			return err
		}
		if p.EachItem != nil {
			if err := p.EachItem(func(it Item) error { return s.putItem(ctx, tx, it) }); err != nil {
				return err
			}
		}
		if err := s.settleChanges(ctx, tx, p.Claimed); err != nil {
			return err
		}
		// The segment's tombstones are the device's own, published: its
		// pending ones, and deletions it took in that it published again
		// naming a run created under the same id (their successor), which
		// its later bases carry in their place.
		for _, t := range p.Tombstones {
			if _, err := tx.ExecContext(ctx, `INSERT INTO sync_tombstones (remote, kind, id, first, parent, seq, last, device, at, detail, pending)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0) ON CONFLICT (remote, kind, id, first) DO UPDATE SET pending = 0,
				parent = excluded.parent, seq = excluded.seq, last = excluded.last, device = excluded.device,
				at = excluded.at, detail = excluded.detail
				WHERE sync_tombstones.device = excluded.device OR excluded.seq >= sync_tombstones.seq`,
				s.remoteKey(), t.Kind, t.ID, life(t), t.Parent, t.Seq, baseArg(t.Last), t.Device, t.At.UnixNano(), detailText(t)); err != nil {
				return index.Translate(err)
			}
		}
		if p.Segment.Base {
			// The base lists the whole set as it was when its list was
			// taken: what was dropped before is not in it; a drop
			// recorded since waits for the next segment.
			q, args := `DELETE FROM remote_dropped`, []any{}
			if p.Objects != nil {
				q, args = q+` WHERE id <= ?`, append(args, p.Objects.mark)
			}
			if _, err := tx.ExecContext(ctx, q, args...); err != nil {
				return index.Translate(err)
			}
		}
		if err := p.Objects.Each(func(dropped bool, kind cas.Kind, h cas.Hash) error {
			if dropped {
				_, err := tx.ExecContext(ctx, `DELETE FROM remote_dropped WHERE kind = ? AND hash = ?`, int(kind), h)
				return index.Translate(err)
			}
			res, err := tx.ExecContext(ctx, `UPDATE remote_objects SET listed = 1 WHERE kind = ? AND hash = ?`, int(kind), h)
			if err != nil {
				return index.Translate(err)
			}
			if n, _ := res.RowsAffected(); n == 0 {
				// gc dropped it after the list was taken, before it
				// was listed: the set now names it, the next segment
				// drops it.
				_, err = tx.ExecContext(ctx, `INSERT OR IGNORE INTO remote_dropped (kind, hash) VALUES (?, ?)`, int(kind), h)
			}
			return index.Translate(err)
		}); err != nil {
			return err
		}
		if p.Objects != nil {
			// A drop recorded since the list was taken of an object
			// recorded again since and listed now: the set names it and
			// the store records it.
			if _, err := tx.ExecContext(ctx, `DELETE FROM remote_dropped WHERE id > ? AND EXISTS (SELECT 1 FROM remote_objects o
				WHERE o.kind = remote_dropped.kind AND o.hash = remote_dropped.hash AND o.listed != 0)`, p.Objects.mark); err != nil {
				return index.Translate(err)
			}
		}
		if p.Segment.Base {
			// Readers of a base list index/.
			if _, err := tx.ExecContext(ctx, `DELETE FROM sync_indexes`); err != nil {
				return index.Translate(err)
			}
		}
		for _, k := range p.Indexes {
			if _, err := tx.ExecContext(ctx, `DELETE FROM sync_indexes WHERE hash = ?`, idxHash(k)); err != nil {
				return index.Translate(err)
			}
		}
		size, since := p.Bytes, int64(0)
		if !p.Segment.Base {
			v, ok, err := index.Setting(ctx, tx, baseKey)
			if err != nil {
				return err
			}
			var b struct{ Size, Since int64 }
			if ok {
				_ = json.Unmarshal([]byte(v), &b)
			}
			size, since = b.Size, b.Since+p.Bytes
		}
		bb, _ := json.Marshal(struct{ Size, Since int64 }{size, since})
		return index.SetSetting(ctx, tx, baseKey, string(bb))
	})
}
