package remote

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/wsstore/wsstore/cas"
)

// TestSeenBasesIsBounded: the bases a push found on the object store are
// a cache that holds at most maxSeenBases of them, however many distinct
// bases the push meets, and always the one found last.
func TestSeenBasesIsBounded(t *testing.T) {
	seen := seenBases{}
	var h cas.Hash
	most := 0
	for i := range 3*maxSeenBases + 5 {
		binary.BigEndian.PutUint64(h[:], uint64(i))
		seen.add(h)
		most = max(most, len(seen))
	}
	assert.Equal(t, maxSeenBases, most)
	assert.True(t, seen[h], "the base found last is remembered")
	assert.Equal(t, 5, len(seen), "forgotten whole at the bound, three times")
}
