package index

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSyncFirstMigrationKeepsTombstones: migration 00029 keys tombstones
// by their run's first event and keeps every tombstone recorded before,
// as one whose run is not named (x”); going back keeps one per id, the
// latest state, and frees no page of the file either way.
func TestSyncFirstMigrationKeepsTombstones(t *testing.T) {
	ctx := context.Background()
	raw, p, _ := migratedStore(t)
	_, err := p.DownTo(ctx, 28)
	require.NoError(t, err)
	_, err = raw.ExecContext(ctx, `INSERT INTO sync_tombstones (remote, kind, id, parent, seq, last, device, at, detail, pending)
		VALUES ('b/p', 'run', 'r1', 'c', 7, x'01', 'd1', 1, '{}', 0), ('b/p', 'chat', 'c', '', 0, NULL, 'd1', 2, '{"kind":"k"}', 1)`)
	require.NoError(t, err)
	free := func() (n int) {
		require.NoError(t, raw.GetContext(ctx, &n, `PRAGMA freelist_count`))
		return n
	}
	before := free()

	_, err = p.UpTo(ctx, 29)
	require.NoError(t, err)
	var rows []struct {
		Kind    string `db:"kind"`
		ID      string `db:"id"`
		First   []byte `db:"first"`
		Seq     int64  `db:"seq"`
		Detail  string `db:"detail"`
		Pending int    `db:"pending"`
	}
	require.NoError(t, raw.SelectContext(ctx, &rows, `SELECT kind, id, first, seq, detail, pending FROM sync_tombstones ORDER BY kind`))
	require.Len(t, rows, 2)
	assert.Equal(t, "chat", rows[0].Kind)
	assert.Equal(t, 1, rows[0].Pending)
	assert.Equal(t, `{"kind":"k"}`, rows[0].Detail)
	assert.Equal(t, "r1", rows[1].ID)
	assert.EqualValues(t, 7, rows[1].Seq)
	assert.Empty(t, rows[1].First, "a tombstone from before names no run")
	assert.Equal(t, before, free(), "the rebuild leaves no page free")

	// Two runs under one id, then back: the later state stays.
	_, err = raw.ExecContext(ctx, `INSERT INTO sync_tombstones (remote, kind, id, first, parent, seq, last, device, at, pending)
		VALUES ('b/p', 'run', 'r1', x'02', 'c', 9, x'03', 'd2', 3, 0)`)
	require.NoError(t, err)
	_, err = p.DownTo(ctx, 28)
	require.NoError(t, err)
	var seqs []int64
	require.NoError(t, raw.SelectContext(ctx, &seqs, `SELECT seq FROM sync_tombstones WHERE id = 'r1'`))
	assert.Equal(t, []int64{9}, seqs)
}

// TestSyncFirstMigrationDown: going back below 00029 keeps the device's
// own pending tombstone over a later one of another run under the same
// id (the next segment must carry it), and forgets that the items were
// given their first events, so going up again gives them anew.
func TestSyncFirstMigrationDown(t *testing.T) {
	ctx := context.Background()
	raw, p, _ := migratedStore(t)
	_, err := raw.ExecContext(ctx, `INSERT INTO sync_tombstones (remote, kind, id, first, parent, seq, last, device, at, pending)
		VALUES ('b/p', 'run', 'r1', x'01', 'c', 9, x'03', 'other', 1, 0), ('b/p', 'run', 'r1', x'02', 'c', 3, x'04', 'me', 2, 1)`)
	require.NoError(t, err)
	_, err = raw.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES ('remote.sync.first', '1')`)
	require.NoError(t, err)
	_, err = p.DownTo(ctx, 28)
	require.NoError(t, err)
	var pend []int
	require.NoError(t, raw.SelectContext(ctx, &pend, `SELECT pending FROM sync_tombstones WHERE id = 'r1'`))
	assert.Equal(t, []int{1}, pend, "the own pending deletion survives going back")
	var n int
	require.NoError(t, raw.GetContext(ctx, &n, `SELECT count(*) FROM meta WHERE key = 'remote.sync.first'`))
	assert.Zero(t, n, "going back forgets that the items were given their first events")
}
