package wsstore_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
)

// TestGCKeepsDeltaBases: a version another run still reaches is stored as
// a delta against a newer version that only a deleted run reached. GC must
// keep that base, and frees what nothing needs.
func TestGCKeepsDeltaBases(t *testing.T) {
	e := newEnv(t)
	v := func(n int) []byte {
		return []byte(strings.Repeat(fmt.Sprintf("draft line %d of the keeper's log\n", n), 60) + strings.Repeat("shared paragraph\n", 40))
	}
	e.create("chat-1", "run_a")
	e.create("chat-1", "run_b")
	e.write("run_a", "output/main.md", v(1))
	e.write("run_b", "output/main.md", v(1))
	e.write("run_b", "output/main.md", v(2))
	e.write("run_b", "output/other.md", []byte("only in b, nothing depends on it"))

	v1, v2 := cas.Sum(v(1)), cas.Sum(v(2))
	info, err := e.s.Blobs.Stat(e.ctx, v1)
	require.NoError(t, err)
	require.Equal(t, cas.CodecDelta, info.Codec, "v1 became a delta against v2")
	require.Equal(t, v2, info.Base)

	e.drop("run_b")
	e.collect()

	assert.True(t, e.has(v2), "v2 is unreachable but it is the base of v1, which run_a reaches")
	assert.False(t, e.has(cas.Sum([]byte("only in b, nothing depends on it"))), "b's unique blob is freed")
	e.requireReadable("run_a", map[string][]byte{"output/main.md": v(1)})

	rep, err := e.s.Fsck(e.ctx, nil)
	require.NoError(t, err)
	assert.True(t, rep.OK(), "%v", rep.Problems)
}

func TestFsckNamesABrokenDeltaBase(t *testing.T) {
	e := newCorruptibleEnv(t, wsstore.Options{})
	var lines []string
	for i := range 200 {
		lines = append(lines, fmt.Sprintf("%d: the keeper lit lamp %d at dusk", i, i*i%97))
	}
	v1 := []byte(strings.Join(lines, "\n"))
	v2 := append(append([]byte{}, v1...), []byte("and watched the ships\n")...)
	e.create("chat-1", "run_a")
	e.write("run_a", "output/main.md", v1)
	e.write("run_a", "output/main.md", v2)
	base := cas.Sum(v2)
	info, err := e.s.Blobs.Stat(e.ctx, cas.Sum(v1))
	require.NoError(t, err)
	require.Equal(t, base, info.Base, "v1 is a delta against v2")
	require.NoError(t, e.s.DB.Update(e.ctx, func(tx *index.Tx) error {
		_, err := tx.ExecContext(e.ctx, `UPDATE blobs SET data = substr(data, 1, length(data) - 3) || x'000000' WHERE hash = ?`, base)
		return err
	}))
	rep, err := e.s.Fsck(e.ctx, nil)
	require.NoError(t, err)
	require.False(t, rep.OK())
	var named bool
	for _, p := range rep.Problems {
		if p.Ref == cas.Sum(v1).String() && strings.Contains(p.Detail, base.String()) {
			named = true
		}
	}
	assert.True(t, named, "the delta's problem names its broken base: %v", rep.Problems)
}

// TestDeltaHistoryGoesOnAfterGC: gc collects the older versions of a file
// no checkpoint reaches any more, among them versions the history would
// re-encode next; later writes go on with the versions that are left,
// every chain stays within the bound and everything reads back.
func TestDeltaHistoryGoesOnAfterGC(t *testing.T) {
	e := newEnv(t)
	e.create("chat-1", "run_a")
	draft := "# draft\n\n"
	var versions []string
	write := func(n int) {
		for range n {
			draft += fmt.Sprintf("paragraph %d: the keeper lit the lamp and watched the ships pass.\n", len(versions))
			versions = append(versions, draft)
			e.write("run_a", "output/main.md", []byte(draft))
		}
	}
	write(11) // version 11: versions 8 and 10 are open
	// Keep only the live workspace: every checkpoint goes, and with them
	// the older versions, which gc may now collect.
	require.NoError(t, e.s.DB.Update(e.ctx, func(tx *index.Tx) error {
		_, err := tx.ExecContext(e.ctx, `DELETE FROM checkpoints WHERE run_id = 'run_a'`)
		return err
	}))
	e.collect()
	assert.False(t, e.has(cas.Sum([]byte(versions[7]))), "version 8 was collected")

	write(30)
	for i, v := range versions {
		h := cas.Sum([]byte(v))
		if !e.has(h) {
			continue
		}
		b, err := e.s.Blobs.ReadAll(e.ctx, h)
		require.NoError(t, err, "version %d", i+1)
		assert.Equal(t, v, string(b))
		info, err := e.s.Blobs.Stat(e.ctx, h)
		require.NoError(t, err)
		assert.LessOrEqual(t, info.Depth, 16)
	}
	var wholes int
	require.NoError(t, e.s.DB.View(e.ctx, func(tx *index.Tx) error {
		return tx.GetContext(e.ctx, &wholes, `SELECT count(*) FROM blobs WHERE codec != 3 AND gen > 0`)
	}))
	assert.Equal(t, 1, wholes, "one history, whole only at its newest version")
}
