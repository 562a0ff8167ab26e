package protocol_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/protocol"
)

// TestBadBase64NamesFieldAndOffset: a contentBase64 that is not standard
// base64 is batch.invalid_request whose message names the field and the
// byte offset where the text stops being base64, in write, append, apply
// and actor.upload alike, and nothing is written.
func TestBadBase64NamesFieldAndOffset(t *testing.T) {
	st := storetest.OpenStore(t)
	s := protocol.NewSession(protocol.Backend{Runs: st.Runs, Journal: st.Journal, Actors: st.Actors})
	ctx := context.Background()
	for _, l := range []string{
		`{"op":"run.create","runId":"r","chat":{"kind":"k","stableChatId":"s"}}`,
		`{"op":"write","path":"output/a.md","content":"one"}`,
		`{"op":"actor.upload","actor":"al","path":"a.md","content":"one"}`,
	} {
		r := s.Handle(ctx, []byte(l))
		require.True(t, r.OK, "%s: %+v", l, r.Error)
	}
	ls := `{"op":"list","path":"output","depth":3}`
	als := `{"op":"actor.list","actor":"al"}`
	before, actorBefore := line(t, s.Handle(ctx, []byte(ls))), line(t, s.Handle(ctx, []byte(als)))
	for _, tc := range []struct{ line, message string }{
		{`{"op":"write","path":"output/a.md","contentBase64":"YWJj\n%A=="}`,
			`field "contentBase64" is not standard base64: at byte offset 5, '%' is not a base64 character`},
		{`{"op":"append","path":"output/a.md","contentBase64":"YWJjZA="}`,
			`field "contentBase64" is not standard base64: at byte offset 7, it ends inside a group of four characters`},
		{`{"op":"write","path":"output/b.md","contentBase64":"YQ==YQ=="}`,
			`field "contentBase64" is not standard base64: at byte offset 4, text follows the = that ended the content`},
		{`{"op":"write","path":"output/b.md","contentBase64":"Y===" }`,
			`field "contentBase64" is not standard base64: at byte offset 1, = pads only the last one or two characters`},
		{`{"op":"apply","edits":[{"path":"output/b.md","content":"b"},{"path":"output/c.md","contentBase64":"YWJj ZA=="}]}`,
			`field "edits[1].contentBase64" is not standard base64: at byte offset 4, ' ' is not a base64 character`},
		{`{"op":"actor.upload","actor":"al","path":"b.md","contentBase64":"YWJj\n%A=="}`,
			`field "contentBase64" is not standard base64: at byte offset 5, '%' is not a base64 character`},
		{`{"op":"actor.upload","actor":"al","path":"a.md","contentBase64":"YQ=a"}`,
			`field "contentBase64" is not standard base64: at byte offset 3, a character follows the = that pads its group`},
	} {
		r := s.Handle(ctx, []byte(tc.line))
		if assert.False(t, r.OK, tc.line) {
			assert.Equal(t, "batch.invalid_request", string(r.Error.Code), tc.line)
			assert.Contains(t, r.Error.Message, tc.message, tc.line)
			assert.NotContains(t, r.Error.Message, "illegal base64", tc.line)
		}
	}
	assert.Equal(t, before, line(t, s.Handle(ctx, []byte(ls))), "nothing written")
	assert.Equal(t, actorBefore, line(t, s.Handle(ctx, []byte(als))), "nothing uploaded")
}

// TestBase64FaultAgreesWithTheDecoder: contentBase64 is refused exactly
// when the decoder refuses it, and the refusal always finds the offset
// and its reason.
func TestBase64FaultAgreesWithTheDecoder(t *testing.T) {
	st := storetest.OpenStore(t)
	s := protocol.NewSession(protocol.Backend{Runs: st.Runs, Journal: st.Journal, Actors: st.Actors})
	ctx := context.Background()
	r := s.Handle(ctx, []byte(`{"op":"run.create","runId":"r","chat":{"kind":"k","stableChatId":"s"}}`))
	require.True(t, r.OK, "%+v", r.Error)
	rnd := rand.New(rand.NewPCG(1, 2))
	const chars = "ABCab09+/=\n\r %"
	for range 2000 {
		var b strings.Builder
		for range rnd.IntN(13) {
			b.WriteByte(chars[rnd.IntN(len(chars))])
		}
		text := b.String()
		_, decErr := base64.StdEncoding.DecodeString(text)
		q, err := json.Marshal(text)
		require.NoError(t, err)
		r := s.Handle(ctx, []byte(`{"op":"write","path":"output/x.bin","contentBase64":`+string(q)+`}`))
		if decErr == nil {
			assert.True(t, r.OK, "%q: %+v", text, r.Error)
			continue
		}
		if assert.False(t, r.OK, "%q", text) {
			assert.Equal(t, "batch.invalid_request", string(r.Error.Code), text)
			assert.NotContains(t, r.Error.Message, "the decoder refused it", "%q: the offset is found", text)
		}
	}
}
