package wsstore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/actors"
	"github.com/wsstore/wsstore/internal/storetest"
)

// TestActorGCFailingLaterPageAnswersWhatItPruned: a prune of every space
// that fails on a later page of spaces keeps the pages before it pruned,
// and ActorGC answers them with its error, so a caller that tries again
// (POST /workspace/gc after a busy store) counts them.
func TestActorGCFailingLaterPageAnswersWhatItPruned(t *testing.T) {
	ctx := context.Background()
	st := storetest.OpenStore(t)
	storetest.ActorSpacesFailingLast(t, st, 300) // past a page of 256 spaces
	pruned, _, err := st.ActorGC(ctx, actors.GCOptions{}, wsstore.GCOptions{})
	require.Error(t, err)
	assert.Positive(t, pruned.Actors, "the pages before the failure are pruned")
	assert.Equal(t, int64(pruned.Actors), pruned.Pruned)
	stats, err := st.Actors.Stats(ctx, "a000")
	require.NoError(t, err)
	assert.Equal(t, int64(1), stats.Versions, "a000 was pruned")
}
