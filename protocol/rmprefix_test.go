package protocol_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/protocol"
)

// TestRmPrefixOfNothing: an actor.rm-prefix that matches nothing answers
// as its help says: seq 0 and no created, no change recorded, and the
// space's journal as it was.
func TestRmPrefixOfNothing(t *testing.T) {
	ctx := context.Background()
	st := storetest.OpenStore(t)
	s := protocol.NewSession(protocol.Backend{Runs: st.Runs, Journal: st.Journal, Actors: st.Actors})
	r := s.Handle(ctx, []byte(`{"op":"actor.upload","actor":"alice","path":"docs/a.md","content":"a"}`))
	require.True(t, r.OK, "%+v", r.Error)
	r = s.Handle(ctx, []byte(`{"op":"actor.rm-prefix","actor":"alice","prefix":"temp/"}`))
	require.True(t, r.OK, "%+v", r.Error)
	assert.Regexp(t, `"seq":0,`, line(t, r))
	assert.NotContains(t, line(t, r), `"created"`)
	r = s.Handle(ctx, []byte(`{"op":"actor.changes","actor":"alice"}`))
	require.True(t, r.OK, "%+v", r.Error)
	assert.Regexp(t, `"changes":\[\{[^\]]*"seq":1,[^\]]*\}\]`, line(t, r), "one change: the upload")

	assert.True(t, strings.Contains(protocol.Help(), "matches nothing: seq 0"), "the help says so")
}
