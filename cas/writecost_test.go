package cas_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/cas/storagetest"
)

// work is what a store did: contents hashed, compressed and decompressed,
// and the storage calls that insert an object.
type work struct{ hashes, compressions, decodes, inserts int64 }

func measure(s *cas.Store, f *storagetest.Faults) work {
	return work{cas.Hashes(s), cas.Compressions(s), cas.Decodes(s), int64(f.Calls(storagetest.Put) + f.Calls(storagetest.PutAt))}
}

func (w work) minus(o work) work {
	return work{w.hashes - o.hashes, w.compressions - o.compressions, w.decodes - o.decodes, w.inserts - o.inserts}
}

// TestWriteCostIsItsOwn holds a write of a new version to one hash and one
// compression of its content and one inserted row, round after round, and
// a write whose caller holds the previous version's bytes (an append) to
// no decompression at all, whether re-encoding is queued or inline.
func TestWriteCostIsItsOwn(t *testing.T) {
	for _, inline := range []bool{false, true} {
		t.Run(map[bool]string{false: "Queued", true: "Inline"}[inline], func(t *testing.T) {
			testWriteCost(t, inline)
		})
	}
}

// testWriteCost is TestWriteCostIsItsOwn with the re-encoding inside the
// write or queued; a queued write decodes nothing, even for a replace.
func testWriteCost(t *testing.T, inline bool) {
	ctx := context.Background()
	_, s, faults := openFaulty(t, cas.Options{InlineDeltas: inline})
	replaceDecodes := int64(0)
	if inline {
		replaceDecodes = 1
	}
	var doc strings.Builder
	for i := range 40 {
		fmt.Fprintf(&doc, "line %d of a 4 KB file, the kind an agent rewrites round after round\n", i)
	}
	prev, err := s.PutVersion(ctx, nil, []byte(doc.String()), cas.Hash{})
	require.NoError(t, err)
	prevBytes := []byte(doc.String())

	for round := range 20 {
		fmt.Fprintf(&doc, "round %d appends a line\n", round)
		next := []byte(doc.String())
		t.Run(fmt.Sprintf("Append%02d", round), func(t *testing.T) {
			before := measure(s, faults)
			h, err := s.PutVersionFrom(ctx, nil, next, prev, prevBytes)
			require.NoError(t, err)
			got := measure(s, faults).minus(before)
			assert.Equal(t, work{hashes: 1, compressions: 1, decodes: 0, inserts: 1}, got)
			prev, prevBytes = h, next
		})
	}
	edited := []byte(strings.Replace(doc.String(), "line 20 of", "LINE 20 OF", 1))
	t.Run("ReplaceDecodesThePreviousVersionOnce", func(t *testing.T) {
		before := measure(s, faults)
		_, err := s.PutVersion(ctx, nil, edited, prev)
		require.NoError(t, err)
		got := measure(s, faults).minus(before)
		assert.Equal(t, work{hashes: 1, compressions: 1, decodes: replaceDecodes, inserts: 1}, got)
	})
	t.Run("SameContentStoresNothing", func(t *testing.T) {
		same := edited
		h := cas.Sum(same)
		before := measure(s, faults)
		got, err := s.PutVersion(ctx, nil, same, h)
		require.NoError(t, err)
		assert.Equal(t, h, got)
		assert.Equal(t, work{hashes: 1}, measure(s, faults).minus(before))
	})
	t.Run("WrongPreviousBytesCostOnlyTheDelta", func(t *testing.T) {
		base := []byte(strings.Repeat("a version whose bytes the caller gets wrong\n", 50))
		b0, err := s.PutVersion(ctx, nil, base, cas.Hash{})
		require.NoError(t, err)
		b1, err := s.PutVersionFrom(ctx, nil, append(base, "more\n"...), b0, []byte(strings.Repeat("not the content\n", 137)+"12345678"))
		require.NoError(t, err)
		for _, h := range []cas.Hash{b0, b1} {
			got, err := s.ReadAll(ctx, h)
			require.NoError(t, err)
			assert.Equal(t, h, cas.Sum(got))
		}
		_, err = s.Reencode(ctx, 0)
		require.NoError(t, err)
		rep, err := s.Verify(ctx, nil)
		require.NoError(t, err)
		assert.Empty(t, rep.Problems)
	})
}
