package protocol_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/protocol"
)

// TestNoOpIgnoresRunID: a runId names the run an op acts on, so no op
// answers ok for a run that does not exist. An op that acts on no run
// (stats, prune, policy.set, the actor.* ops, …) refuses a runId as
// batch.invalid_request, changing nothing, rather than acting on the
// whole store while the host meant one run.
func TestNoOpIgnoresRunID(t *testing.T) {
	ctx := context.Background()
	st, err := wsstore.Open(ctx, t.TempDir(), wsstore.Options{ReclaimIdle: -1})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	s := protocol.NewSession(protocol.Backend{Runs: st.Runs, Journal: st.Journal, Actors: st.Actors, Retention: st.Runs,
		Records: st.Runs, Host: st.Runs, Checkpoints: st.Checkpoints, Store: st, Archives: st})
	r := s.Handle(ctx, []byte(`{"op":"run.create","runId":"r","chat":{"kind":"k","stableChatId":"s"}}`))
	require.True(t, r.OK, "%+v", r.Error)

	for _, o := range protocol.Ops() {
		r := s.Handle(ctx, []byte(`{"op":"`+o.Name+`","runId":"nosuch"}`))
		assert.False(t, r.OK, "%s with a runId that names no run answered ok", o.Name)
	}

	for _, l := range []string{
		`{"op":"policy.set","runId":"r","policy":{"keepCompletedRuns":1}}`,
		`{"op":"prune","runId":"r"}`,
		`{"op":"actor.upload","runId":"r","actor":"a","path":"x.md","content":"x"}`,
		`{"op":"stats","runId":"r"}`,
		`{"op":"runs.list","runId":"r"}`,
	} {
		r := s.Handle(ctx, []byte(l))
		require.False(t, r.OK, l)
		assert.Equal(t, protocol.CodeInvalidRequest, r.Error.Code, l)
		assert.Contains(t, r.Error.Message, `takes no "runId"`, l)
	}
	r = s.Handle(ctx, []byte(`{"op":"policy.get"}`))
	require.True(t, r.OK, "%+v", r.Error)
	assert.Equal(t, `{"op":"policy.get","ok":true,"result":{"policy":{}}}`, line(t, r), "the refused policy.set set nothing")
	r = s.Handle(ctx, []byte(`{"op":"actors.list"}`))
	require.True(t, r.OK, "%+v", r.Error)
	assert.Equal(t, `{"op":"actors.list","ok":true,"result":{"actors":[],"more":false}}`, line(t, r), "the refused actor.upload made no space")

	// null is absent, as for every field.
	r = s.Handle(ctx, []byte(`{"op":"stats","runId":null}`))
	assert.True(t, r.OK, "%+v", r.Error)
}
