package index

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestActorVersionsMigrationCounts: migration 00038 gives each actor
// space of a store made before it the number of versions its journal
// still holds (rows whose root gc has not pruned), and going back drops
// the count.
func TestActorVersionsMigrationCounts(t *testing.T) {
	ctx := context.Background()
	raw, p, _ := migratedStore(t)
	_, err := p.DownTo(ctx, 37)
	require.NoError(t, err)
	h := func(b byte) []byte { x := make([]byte, 32); x[0] = b; return x }
	_, err = raw.ExecContext(ctx, `INSERT INTO actor_spaces (actor, root, seq, created, updated) VALUES
		('alice', ?1, 6, 1, 1), ('bob', ?1, 1, 1, 1), ('carol', ?1, 0, 1, 1)`, h(1))
	require.NoError(t, err)
	for seq := 1; seq <= 6; seq++ {
		var root any = h(byte(seq))
		if seq <= 2 || seq == 6 { // pruned by a gc, and the gc change
			root = nil
		}
		_, err = raw.ExecContext(ctx, `INSERT INTO actor_changes (actor, seq, op, path, files, bytes, root, created)
			VALUES ('alice', ?, 'upload', 'f.md', 1, 1, ?, 1)`, seq, root)
		require.NoError(t, err)
	}
	_, err = raw.ExecContext(ctx, `INSERT INTO actor_changes (actor, seq, op, path, files, bytes, root, created)
		VALUES ('bob', 1, 'upload', 'f.md', 1, 1, ?, 1)`, h(9))
	require.NoError(t, err)

	_, err = p.UpTo(ctx, 38)
	require.NoError(t, err)
	var rows []struct {
		Actor    string `db:"actor"`
		Versions *int64 `db:"versions"`
	}
	require.NoError(t, raw.SelectContext(ctx, &rows, `SELECT actor, versions FROM actor_spaces ORDER BY actor`))
	got := map[string]int64{}
	for _, r := range rows {
		require.NotNil(t, r.Versions, "actor %s is counted", r.Actor)
		got[r.Actor] = *r.Versions
	}
	assert.Equal(t, map[string]int64{"alice": 3, "bob": 1, "carol": 0}, got)

	_, err = p.DownTo(ctx, 37)
	require.NoError(t, err)
	var n int
	require.NoError(t, raw.GetContext(ctx, &n, `SELECT count(*) FROM pragma_table_info('actor_spaces') WHERE name = 'versions'`))
	assert.Zero(t, n, "going back drops the count")
}
