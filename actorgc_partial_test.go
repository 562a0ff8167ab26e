package wsstore_test

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

// TestActorGCFailingLaterPageAnswersWhatItPruned: a prune of every space
// that fails on a later page of spaces keeps the pages before it pruned,
// and ActorGC answers them with its error, so a caller that tries again
// (POST /workspace/gc after a busy store) counts them.
func TestActorGCFailingLaterPageAnswersWhatItPruned(t *testing.T) {
	ctx := context.Background()
	st := storetest.OpenStore(t)
	const n = 300 // past a page of 256 spaces
	for i := range n {
		for _, v := range []string{"1", "2"} {
			_, err := st.Actors.Upload(ctx, fmt.Sprintf("a%03d", i), "a.md", strings.NewReader(v))
			require.NoError(t, err)
		}
	}
	// The last space's prune fails.
	require.NoError(t, st.DB.Update(ctx, func(tx *index.Tx) error {
		_, err := tx.ExecContext(ctx, fmt.Sprintf(`CREATE TRIGGER refuse BEFORE UPDATE ON actor_changes WHEN old.actor = 'a%03d'
			BEGIN SELECT RAISE(ABORT, 'refused'); END`, n-1))
		return err
	}))
	pruned, _, err := st.ActorGC(ctx, actors.GCOptions{}, wsstore.GCOptions{})
	require.Error(t, err)
	assert.Positive(t, pruned.Actors, "the pages before the failure are pruned")
	assert.Equal(t, int64(pruned.Actors), pruned.Pruned)
	stats, err := st.Actors.Stats(ctx, "a000")
	require.NoError(t, err)
	assert.Equal(t, int64(1), stats.Versions, "a000 was pruned")
}
