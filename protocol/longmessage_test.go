package protocol_test

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/protocol"
)

// TestErrorMessageIsBounded: an error's message quotes what the host sent
// cut to protocol.MaxMessageBytes, so a line of 64 MiB naming no run or
// no op is not answered with its value again (or twice, for an op, which
// the response echoes): the response and what builds it stay small.
func TestErrorMessageIsBounded(t *testing.T) {
	s := openSession(t)
	ctx := context.Background()
	long := strings.Repeat("é", 1<<19) // 1 MiB
	for _, tt := range []struct{ line, code, prefix string }{
		{`{"op":"read","runId":"` + long + `","path":"output/a.md"}`, "run.not_found", `no run "éé`},
		{`{"op":"` + long + `"}`, "batch.unknown_op", `unknown op "éé`},
	} {
		r := s.Handle(ctx, []byte(tt.line))
		require.False(t, r.OK)
		assert.Equal(t, tt.code, string(r.Error.Code))
		msg := r.Error.Message
		assert.LessOrEqual(t, len(msg), protocol.MaxMessageBytes, "%s: the message holds %d bytes", tt.code, len(msg))
		assert.True(t, strings.HasPrefix(msg, tt.prefix), "%s: %.40q", tt.code, msg)
		assert.True(t, strings.HasSuffix(msg, "…"), "%s: a cut message ends in …", tt.code)
		assert.True(t, utf8.ValidString(msg), "%s: cut between characters", tt.code)
		assert.Less(t, len(line(t, r)), len(tt.line)+protocol.MaxMessageBytes+100, "%s: the response", tt.code)
	}
	r := s.Handle(ctx, []byte(`{"op":"read","runId":"nosuch","path":"output/a.md"}`))
	assert.Equal(t, `no run "nosuch"`, r.Error.Message, "a short message is whole")
}
