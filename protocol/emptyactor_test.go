package protocol_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/protocol"
)

// TestEmptyActorIsNotEverySpace: an empty "actor" is a host's mistake
// (an unset variable), refused as actor.gc refuses it, never read as
// absent, which lists every actor's space; null is absent.
func TestEmptyActorIsNotEverySpace(t *testing.T) {
	ctx := context.Background()
	st, err := wsstore.Open(ctx, t.TempDir(), wsstore.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	s := protocol.NewSession(protocol.Backend{Runs: st.Runs, Journal: st.Journal, Actors: st.Actors})
	r := s.Handle(ctx, []byte(`{"op":"actor.upload","actor":"alice","path":"a.md","content":"a"}`))
	require.True(t, r.OK, "%+v", r.Error)

	for _, l := range []string{
		`{"op":"actor.ls","actor":""}`,
		`{"op":"actor.ls","actor":"","path":"alice"}`,
		`{"op":"actor.stats","actor":""}`,
		`{"op":"actor.stats","actor":"","limit":10}`,
		`{"op":"actor.gc","actor":""}`,
	} {
		r := s.Handle(ctx, []byte(l))
		require.False(t, r.OK, "%s answered %s", l, line(t, r))
		assert.Equal(t, protocol.CodeInvalidRequest, r.Error.Code, l)
		assert.Contains(t, r.Error.Message, `"actor" is empty`, l)
	}
	for _, l := range []string{`{"op":"actor.ls","actor":null}`, `{"op":"actor.stats","actor":null}`} {
		r := s.Handle(ctx, []byte(l))
		require.True(t, r.OK, "%s: %+v", l, r.Error)
		assert.Contains(t, line(t, r), `"alice"`, l)
	}
}
