package index

import (
	"context"
	"database/sql"
	"errors"
)

// Setting returns the store-wide setting under key from the meta table and
// whether it is set. Keys other packages keep there are named
// "<package>.<name>" (format_version is the index's own).
func Setting(ctx context.Context, tx *Tx, key string) (string, bool, error) {
	var v string
	err := tx.GetContext(ctx, &v, `SELECT value FROM meta WHERE key = ?`, key)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, Translate(err)
	}
	return v, true, nil
}

// SetSetting sets the store-wide setting under key in the meta table, in
// tx. It fails with store.read_only in a read transaction.
func SetSetting(ctx context.Context, tx *Tx, key, value string) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES (?, ?)
		ON CONFLICT (key) DO UPDATE SET value = excluded.value`, key, value)
	return Translate(err)
}

// DeleteSetting removes the setting under key, if there is one.
func DeleteSetting(ctx context.Context, tx *Tx, key string) error {
	_, err := tx.ExecContext(ctx, `DELETE FROM meta WHERE key = ?`, key)
	return Translate(err)
}
