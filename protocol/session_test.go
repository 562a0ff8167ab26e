package protocol_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/protocol"
)

// line encodes r as WriteResponse writes it, without the newline.
func line(t testing.TB, r protocol.Response) string {
	var b bytes.Buffer
	require.NoError(t, protocol.WriteResponse(&b, r))
	return strings.TrimSuffix(b.String(), "\n")
}

// TestHandleRefuses: lines refused before they reach the store get the
// exact answers hosts have always had.
func TestHandleRefuses(t *testing.T) {
	s := protocol.NewSession(protocol.Backend{})
	ctx := context.Background()
	tests := []struct{ name, line, want string }{
		{"ErrEmpty", " ", `{"op":"","ok":false,"error":{"code":"batch.invalid_json","message":"empty line: every line must hold one JSON request object"}}`},
		{"ErrUTF8", "{\"op\":\"x\xff\"}", `{"op":"","ok":false,"error":{"code":"batch.invalid_json","message":"the line is not valid UTF-8 (at byte 8)"}}`},
		{"ErrByteOrderMark", "\ufeff{\"op\":\"help\"}", `{"op":"","ok":false,"error":{"code":"batch.invalid_json","message":"the line starts with a byte order mark (U+FEFF): send JSON text without one"}}`},
		{"ErrSyntax", `{"op":"write",`, `{"op":"","ok":false,"error":{"code":"batch.invalid_json","message":"unexpected end of JSON input"}}`},
		{"ErrTrailing", `{"op":"write"} x`, `{"op":"","ok":false,"error":{"code":"batch.invalid_json","message":"invalid character 'x' after top-level value"}}`},
		{"ErrSyntaxBeatsRepeatedKey", `{"a":1,"a":2,`, `{"op":"","ok":false,"error":{"code":"batch.invalid_json","message":"unexpected end of JSON input"}}`},
		{"ErrNotObject", `["\ud800"]`, `{"op":"","ok":false,"error":{"code":"batch.invalid_request","message":"a request must be a JSON object with an \"op\""}}`},
		{"ErrNull", `null`, `{"op":"","ok":false,"error":{"code":"batch.invalid_request","message":"missing \"op\""}}`},
		{"ErrNoOp", `{"id":3}`, `{"op":"","id":3,"ok":false,"error":{"code":"batch.invalid_request","message":"missing \"op\""}}`},
		{"ErrOpNotString", `{"op":null,"id":"a"}`, `{"op":"","id":"a","ok":false,"error":{"code":"batch.invalid_request","message":"\"op\" must be a string"}}`},
		{"ErrUnknownOp", `{"op":"explode","id":{ "n" : 1 }}`, `{"op":"explode","id":{"n":1},"ok":false,"error":{"code":"batch.unknown_op","message":"unknown op \"explode\" (batch --help lists them)"}}`},
		{"ErrRepeatedKeyNamesLaterOp", `{"path":"a","path":"b","op":"delete","id":1}`, `{"op":"delete","id":1,"ok":false,"error":{"code":"batch.invalid_request","message":"field \"path\" appears more than once"}}`},
		{"ErrRepeatedOp", `{"op":"write","op":"delete"}`, `{"op":"","ok":false,"error":{"code":"batch.invalid_request","message":"field \"op\" appears more than once"}}`},
		{"ErrSurrogateInID", `{"op":"finish","id":[1,{"x":"\udc00"}]}`, `{"op":"finish","ok":false,"error":{"code":"batch.invalid_request","message":"field \"id[1].x\" holds \\udc00, a lone UTF-16 surrogate: a JSON string must escape a character outside the BMP as a surrogate pair"}}`},
		{"ErrTypeBeforeUnmarshaler", `{"op":"read","at":"yesterday","path":1}`, `{"op":"read","ok":false,"error":{"code":"batch.invalid_request","message":"field \"path\" must be a string, not a number"}}`},
		{"ErrUnmarshaler", `{"op":"read","at":0,"path":"output/a.md"}`, `{"op":"read","ok":false,"error":{"code":"batch.invalid_request","message":"checkpoint 0: checkpoints count from 1"}}`},
		{"ErrCaseFolded", `{"op":"delete","id":2,"Path":"output/a.md"}`, `{"op":"delete","id":2,"ok":false,"error":{"code":"batch.invalid_request","message":"unknown field \"Path\": field names are case-sensitive, this one is \"path\""}}`},
		{"ErrNoRun", `{"op":"write","path":"output/a.md","content":"x"}`, `{"op":"write","ok":false,"error":{"code":"batch.invalid_request","message":"no run: send run.create first, or name \"runId\""}}`},
		{"ErrManifestField", `{"op":"manifest.set","runId":"r","manifest":{"workspaceVersion":1,"artifacts":[{"id":"main","Path":"x"}]}}`, `{"op":"manifest.set","ok":false,"error":{"code":"manifest.invalid","message":"unknown field \"manifest.artifacts[0].Path\": field names are case-sensitive, this one is \"path\""}}`},
		{"ErrHostPathNumber", `{"op":"run.create","chat":{"kind":"k","stableChatId":"x"},"profile":{"allowPaths":[5]}}`, `{"op":"run.create","ok":false,"error":{"code":"batch.invalid_request","message":"field \"profile.allowPaths[0]\": an allowed host path is an object or a path string, not a number"}}`},
		{"ErrHostPathWritable", `{"op":"run.create","chat":{"kind":"k","stableChatId":"x"},"profile":{"allowPaths":[{"path":"/tmp","writable":"yes"}]}}`, `{"op":"run.create","ok":false,"error":{"code":"batch.invalid_request","message":"field \"profile.allowPaths[0]\": writable of an allowed host path must be a boolean, not a string"}}`},
		{"ErrHostPathNull", `{"op":"run.create","chat":{"kind":"k","stableChatId":"x"},"profile":{"allowPaths":["/tmp",{"path":null,"name":"n"}]}}`, `{"op":"run.create","ok":false,"error":{"code":"batch.invalid_request","message":"field \"profile.allowPaths[1]\": path of an allowed host path must be a string, not null"}}`},
		{"ErrHostPathMissing", `{"op":"run.create","chat":{"kind":"k","stableChatId":"x"},"profile":{"allowPaths":[{"name":"n"}]}}`, `{"op":"run.create","ok":false,"error":{"code":"batch.invalid_request","message":"field \"profile.allowPaths[0]\": an allowed host path needs its path"}}`},
		{"ErrHostPathEmptyName", `{"op":"run.create","chat":{"kind":"k","stableChatId":"x"},"profile":{"allowPaths":[{"path":"/tmp","name":""}]}}`, `{"op":"run.create","ok":false,"error":{"code":"batch.invalid_request","message":"field \"profile.allowPaths[0]\": name of an allowed host path is empty: leave \"name\" out to name it after the last element of its path"}}`},
		{"ErrManifestTarget", `{"op":"manifest.set","runId":"r","manifest":{"workspaceVersion":1,"artifacts":[{"id":"main","path":"output/a.md","target":5}]}}`, `{"op":"manifest.set","ok":false,"error":{"code":"manifest.invalid","message":"field \"manifest.artifacts[0].target\": target must be a string or {\"message_extra\": key}"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, line(t, s.Handle(ctx, []byte(tt.line))))
		})
	}
}

// panicking is a backend whose every call panics.
type panicking struct{ protocol.RunService }

// TestHandleNeverPanics: a panic in an operation is a store.internal
// answer naming the op, with the id echoed.
func TestHandleNeverPanics(t *testing.T) {
	s := protocol.NewSession(protocol.Backend{Runs: panicking{}})
	r := s.Handle(context.Background(), []byte(`{"op":"run.create","id":5,"chat":{"kind":"k","stableChatId":"s"}}`))
	assert.Equal(t, "run.create", r.Op)
	assert.JSONEq(t, `5`, string(r.ID))
	require.NotNil(t, r.Error)
	assert.Equal(t, "store.internal", string(r.Error.Code))
	assert.Contains(t, r.Error.Message, "panic:")
}

// openSession opens a store in a temporary directory and a session over
// it with a run, r, created.
func openSession(tb testing.TB) *protocol.Session {
	st, err := wsstore.Open(context.Background(), tb.TempDir(), wsstore.Options{})
	require.NoError(tb, err)
	tb.Cleanup(func() { st.Close() })
	s := protocol.NewSession(protocol.Backend{Runs: st.Runs, Journal: st.Journal})
	r := s.Handle(context.Background(), []byte(`{"op":"run.create","runId":"r","chat":{"kind":"k","stableChatId":"s"},"profile":{"autoCheckpoint":false}}`))
	require.True(tb, r.OK, "%+v", r.Error)
	return s
}

// writeLine is a write request as a host sends it: an id, a path and a
// kilobyte of Markdown with escapes.
var writeLine = []byte(`{"op":"write","id":17,"path":"output/main.md","content":"` +
	strings.Repeat(`# Title\n\nSome text, \"quoted\", and a tab\there.\n`, 20) + `"}`)

func TestHandleWrite(t *testing.T) {
	s := openSession(t)
	r := s.Handle(context.Background(), writeLine)
	require.True(t, r.OK, "%+v", r.Error)
	r = s.Handle(context.Background(), []byte(`{"op":"read","path":"output/main.md"}`))
	require.True(t, r.OK, "%+v", r.Error)
	assert.Contains(t, line(t, r), `"content":"# Title\n\nSome text, \"quoted\", and a tab\there.\n# Title`)
}

// BenchmarkHandleWrite answers a write line end to end: one scan of the
// line, one walk of its tree, the store's write.
func BenchmarkHandleWrite(b *testing.B) {
	s := openSession(b)
	ctx := context.Background()
	b.ReportAllocs()
	b.SetBytes(int64(len(writeLine)))
	for b.Loop() {
		if r := s.Handle(ctx, writeLine); !r.OK {
			b.Fatal(r.Error)
		}
	}
}

// TestNullIsAbsent: a raw JSON field given as null is a missing one, as
// for every other field.
func TestNullIsAbsent(t *testing.T) {
	s := openSession(t)
	ctx := context.Background()
	for _, tt := range []struct{ line, want string }{
		{`{"op":"tool.call","toolCallId":"t1","name":"ls","args":null}`, `missing "args"`},
		{`{"op":"model.response","round":1,"response":null}`, `missing "response"`},
		{`{"op":"tool.result","toolCallId":"t1","result":null}`, `missing "result"`},
	} {
		r := s.Handle(ctx, []byte(tt.line))
		require.False(t, r.OK, tt.line)
		assert.Equal(t, "batch.invalid_request", string(r.Error.Code), tt.line)
		assert.Contains(t, r.Error.Message, tt.want, tt.line)
	}
	r := s.Handle(ctx, []byte(`{"op":"run.create","runId":"r2","chat":{"kind":"k","stableChatId":"s2"},"chatRef":null}`))
	require.True(t, r.OK, "%+v", r.Error)
	r = s.Handle(ctx, []byte(`{"op":"run.show","runId":"r2"}`))
	require.True(t, r.OK, "%+v", r.Error)
	assert.Contains(t, line(t, r), `"chatRef":{}`, "the chatRef of a run created without one")
}

// TestHostValuesAreHostMistakes: a bad value in a field only the host
// gives (a run's status, a page of events, commits, runs or deletions) is the
// host's mistake, batch.invalid_request, never a workspace.* code meant
// for the model.
func TestHostValuesAreHostMistakes(t *testing.T) {
	s := openSession(t)
	ctx := context.Background()
	require.True(t, s.Handle(ctx, writeLine).OK)
	for _, l := range []string{
		`{"op":"run.status","status":"bogus"}`,
		`{"op":"events","limit":-5}`,
		`{"op":"events","limit":100000}`,
		`{"op":"events","afterSeq":-1}`,
		`{"op":"runs.list","status":"bogus"}`,
		`{"op":"runs.list","limit":-1}`,
		`{"op":"commits.list","limit":-1}`,
		`{"op":"commits.list","afterSeq":-1}`,
		`{"op":"deletions","limit":-1}`,
		`{"op":"deletions","afterId":-5}`,
		`{"op":"run.create","runId":"h1","chat":{"kind":"k","stableChatId":"h"},"profile":{"allowPaths":[{"path":"/tmp","bogus":1}]}}`,
		`{"op":"run.create","runId":"h1","chat":{"kind":"k","stableChatId":"h"},"profile":{"allowPaths":[{"path":"/tmp","Writable":true}]}}`,
		`{"op":"run.create","runId":"h1","chat":{"kind":"k","stableChatId":"h"},"profile":{"allowPaths":[null]}}`,
	} {
		r := s.Handle(ctx, []byte(l))
		require.False(t, r.OK, l)
		assert.Equal(t, protocol.CodeInvalidRequest, r.Error.Code, "%s: %s", l, r.Error.Message)
	}
	for _, l := range []string{`{"op":"events","limit":0}`, `{"op":"events","limit":500}`} {
		r := s.Handle(ctx, []byte(l))
		assert.True(t, r.OK, "%s: %+v", l, r.Error)
	}
}

// TestStatOfTheRoot: stat names the root as list does, "" or ".", and in
// the model's scope it counts only the roots the model sees, with no hash.
func TestStatOfTheRoot(t *testing.T) {
	s := openSession(t)
	ctx := context.Background()
	r := s.Handle(ctx, []byte(`{"op":"write","path":"output/main.md","content":"Hello"}`))
	require.True(t, r.OK, "%+v", r.Error)
	for _, path := range []string{`""`, `"."`} {
		r = s.Handle(ctx, []byte(`{"op":"stat","path":`+path+`}`))
		require.True(t, r.OK, "%s: %+v", path, r.Error)
		assert.Contains(t, line(t, r), `"result":{"path":".","kind":"dir","size":5,"resource":"generated","writable":false}`, path)
	}
	r = s.Handle(ctx, []byte(`{"op":"stat"}`))
	require.False(t, r.OK)
	assert.Equal(t, "batch.invalid_request", string(r.Error.Code))
}
