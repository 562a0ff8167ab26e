package remote

import (
	"cmp"
	"context"
	"strings"

	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/wserr"
)

// InUse reports whether the store at db keeps objects on a remote tier:
// such a store must be opened with the tier's URL, or its contents would
// look missing and new ones would land beside them in SQLite.
func InUse(ctx context.Context, db *index.DB) (bool, error) {
	var n int
	var check []string
	err := db.View(ctx, func(tx *index.Tx) error {
		// stored is in no index: the table itself is read, not the
		// smaller remote_objects_pack, which does not show a damaged
		// page of it.
		if err := tx.GetContext(ctx, &n, `SELECT count(*) FROM (SELECT stored FROM remote_objects LIMIT 1)`); err != nil || n == 0 {
			return err
		}
		// A store that records objects but no tier's URL is rare; a
		// damaged page that shows a row where there is none must read as
		// the damage it is, not as a tier to name.
		return tx.SelectContext(ctx, &check, `PRAGMA integrity_check(remote_objects)`)
	})
	if err != nil {
		return false, index.Translate(err)
	}
	if len(check) > 0 && !(len(check) == 1 && check[0] == "ok") {
		return false, wserr.New(wserr.Corrupt, "open store", "", "the remote tier's object records are damaged: %s", strings.Join(check, "; "))
	}
	return n > 0, nil
}

// settingKey is the meta key under which a store records its tier's URL.
const settingKey = "remote.blobs"

// Recorded returns the URL of the remote tier the store at db recorded
// (Record), or "" when it recorded none.
func Recorded(ctx context.Context, db *index.DB) (string, error) {
	var url string
	err := db.View(ctx, func(tx *index.Tx) error {
		var err error
		url, _, err = index.Setting(ctx, tx, settingKey)
		return err
	})
	return url, err
}

// Record records url as the store's remote tier, so that opening it
// without a URL uses this one. A store that recorded a tier of another
// bucket or prefix fails with store.invalid_options: its objects are not
// seen through another tier. A recorded tier the store never pushed
// anything to, nor pulled or synced through (a mistyped or missing
// bucket), is replaced. The same tier at another endpoint, region
// or profile (a second device reaches the same bucket by another name)
// replaces the record.
func Record(ctx context.Context, db *index.DB, url string) error {
	loc, err := ParseURL(url)
	if err != nil {
		return err
	}
	return db.Update(ctx, func(tx *index.Tx) error {
		old, ok, err := index.Setting(ctx, tx, settingKey)
		if err != nil {
			return err
		}
		if ok {
			if err := SameTier(old, loc); err != nil {
				if used, uerr := tierUsed(ctx, tx); uerr != nil || used {
					return cmp.Or(uerr, err)
				}
			}
			if old == url {
				return nil
			}
		}
		return index.SetSetting(ctx, tx, settingKey, url)
	})
}

// SameTier fails with store.invalid_options unless the recorded URL names
// the tier at loc (the same bucket and prefix).
func SameTier(recorded string, loc Location) error {
	old, err := parseURL(recorded, false)
	if err != nil {
		return err
	}
	if old.Bucket != loc.Bucket || old.Prefix != loc.Prefix {
		return wserr.New(wserr.InvalidOptions, "open store", loc.String(),
			"the store keeps its file contents on the remote tier s3://%s/%s, not this one", old.Bucket, old.Prefix)
	}
	return nil
}

// tierUsed reports whether the store put or found objects on its recorded
// tier (an object with a pack: pushed, or pulled from another device) or
// synced through it. Objects written and never pushed are held here, and
// go to whichever tier the store records when it pushes.
func tierUsed(ctx context.Context, tx *index.Tx) (bool, error) {
	var used bool
	err := tx.GetContext(ctx, &used, `SELECT EXISTS (SELECT 1 FROM remote_objects WHERE pack IS NOT NULL)
		OR EXISTS (SELECT 1 FROM sync_items) OR EXISTS (SELECT 1 FROM sync_devices) OR EXISTS (SELECT 1 FROM sync_tombstones)
		OR EXISTS (SELECT 1 FROM sync_indexes)`)
	if err != nil {
		return false, index.Translate(err)
	}
	if used {
		return true, nil
	}
	for _, k := range []string{baseKey, registeredAt} {
		if _, ok, err := index.Setting(ctx, tx, k); err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}
