package actors_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/actors"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
)

// TestActorsPageOfSomeActors: ActorsPage given actors lists theirs alone,
// by name and a page at a time, and reads the spaces it lists, one
// look-up each, never the table of every space: the same statements
// among 8 spaces as among 80. Given many actors, a page looks up those
// after the cursor in order until it is full (one more says whether more
// remain), not all of them.
func TestActorsPageOfSomeActors(t *testing.T) {
	ctx := context.Background()
	type cost struct{ few, many []string }
	measure := func(n int) cost {
		var rec storetest.Statements
		st := storetest.OpenStoreWith(t, wsstore.Options{Index: index.Options{Trace: rec.Trace}})
		for i := range n {
			_, err := st.Actors.Upload(ctx, fmt.Sprintf("actor%03d", i), "a.md", strings.NewReader("a"))
			require.NoError(t, err)
		}
		names := func(sps []actors.Space) []string {
			out := []string{}
			for _, sp := range sps {
				out = append(out, sp.Actor)
			}
			return out
		}
		var c cost
		c.few = rec.Record(func() {
			sps, more, err := st.Actors.ActorsPage(ctx, []string{"actor005", "actor001", "zed"}, "", 0)
			require.NoError(t, err)
			assert.Equal(t, []string{"actor001", "actor005"}, names(sps), "its actors with a space, by name")
			assert.False(t, more)
		})
		var many []string
		for i := 7; i >= 0; i-- {
			many = append(many, fmt.Sprintf("actor%03d", i))
		}
		c.many = rec.Record(func() {
			sps, more, err := st.Actors.ActorsPage(ctx, many, "actor001", 2)
			require.NoError(t, err)
			assert.Equal(t, []string{"actor002", "actor003"}, names(sps))
			assert.True(t, more)
		})
		sps, more, err := st.Actors.ActorsPage(ctx, many, "actor006", 2)
		require.NoError(t, err)
		assert.Equal(t, []string{"actor007"}, names(sps), "the last page")
		assert.False(t, more)
		return c
	}
	small, large := measure(8), measure(80)
	t.Logf("statements of a page of 3 named actors: %d among 8 spaces, %d among 80; of a page of 2 of 8 named: %d, %d",
		len(small.few), len(large.few), len(small.many), len(large.many))
	assert.Equal(t, len(small.few), len(large.few))
	assert.Equal(t, len(small.many), len(large.many))
	for _, stmts := range [][]string{large.few, large.many} {
		for _, q := range stmts {
			assert.NotContains(t, q, "actor > ?", "no scan of the spaces' table")
		}
	}
	lookups := 0
	for _, q := range large.many {
		if strings.Contains(q, "FROM actor_spaces WHERE actor = ?") {
			lookups++
		}
	}
	assert.Equal(t, 3, lookups, "a page of two looks up three of the eight actors")
}
