package protocol_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/protocol"
	"github.com/wsstore/wsstore/wserr"
)

// FuzzSession answers each line of the input, as wsctl batch does, in a
// session over a new store with a run, r, whose workspace holds a file:
// every answer is one line of valid JSON, a refusal carries a code other
// than store.internal (which a panic would be), and the store is sound
// after the lines.
func FuzzSession(f *testing.F) {
	seeds := []string{
		`{"op":"write","path":"output/main.md","content":"# A\n"}`,
		"{\"op\":\"write\",\"path\":\"output/x.md\",\"content\":\"a\\nb\"}\n{\"op\":\"patch\",\"path\":\"output/x.md\",\"old\":\"a\",\"new\":\"c\"}\n{\"op\":\"read\",\"path\":\"output/x.md\",\"startLine\":2}",
		`{"op":"append","path":"output/main.md","content":"more"}`,
		`{"op":"delete","path":"output/main.md"}`,
		`{"op":"list","path":"output","depth":2,"limit":1}`,
		"{\"op\":\"checkpoint\",\"reason\":\"x\"}\n{\"op\":\"rollback\",\"checkpointSeq\":1}\n{\"op\":\"diff\",\"from\":1,\"to\":2}",
		`{"op":"read","path":"output/main.md","at":1,"startLine":1,"endLine":2}`,
		`{"op":"events","afterSeq":1,"beforeSeq":9,"limit":5}`,
		`{"op":"manifest.set","manifest":{"workspaceVersion":1,"artifacts":[{"id":"main","path":"output/main.md","required":true}]}}`,
		`{"op":"commit"}`,
		`{"op":"finish"}`,
		`{"op":"run.status","status":"failed","reason":"x"}`,
		`{"op":"run.create","runId":"r2","chat":{"kind":"k","stableChatId":"s2"},"inputs":{"a.md":"x"},"profile":{"visibleRoots":["output"]}}`,
		`{"op":"search","path":"output","query":"A","limit":3}`,
		`{"op":"apply","edits":[{"path":"output/main.md","content":"B"},{"path":"output/b.md","remove":true}]}`,
		`{"op":"stat","path":"output/main.md"}`,
		`{"op":"host.read","path":"output/main.md"}`,
		`{"op":"host.list","path":""}`,
		`{"op":"commits.list","runId":"r"}`,
		`{"op":"commit.resolve","commitId":"x","status":"delivered","receipt":{}}`,
		`{"op":"commit.rollback","checkpointId":"cp_000001","delete":true}`,
		`{"op":"runs.list","limit":2}`,
		`{"op":"run.show","runId":"r"}`,
		`{"op":"run.delete","runId":"r","cancel":true}`,
		`{"op":"chats.list"}`,
		`{"op":"chat.show","workspaceId":"chat_77dd05a8edd38ddb"}`,
		`{"op":"manifest.get"}`,
		`{"op":"checkpoints.list","runId":"r"}`,
		`{"op":"checkpoint.view","runId":"r","checkpointId":"cp_000001","limit":1}`,
		`{"op":"runs.diff","fromRunId":"r","toRunId":"r"}`,
		`{"op":"materialize","paths":["input/x"]}`,
		`{"op":"deletions","afterId":0,"limit":3}`,
		`{"op":"policy.get","effective":true}`,
		`{"op":"policy.set","policy":{"keepRuns":1}}`,
		`{"op":"prune","dryRun":true}`,
		`{"op":"chat.delete","chats":[{"kind":"k","stableChatId":"s"}],"force":true}`,
		`{"op":"stats"}`,
		`{"op":"gc"}`,
		`{"op":"fsck"}`,
		`{"op":"du"}`,
		`{"op":"reclaim"}`,
		`{"op":"actor.upload","actor":"alice","path":"a/b.md","content":"x"}`,
		"{\"op\":\"actor.upload\",\"actor\":\"alice\",\"path\":\"a/b.md\",\"content\":\"x\"}\n{\"op\":\"actor.download\",\"actor\":\"alice\",\"path\":\"a/b.md\"}\n{\"op\":\"actor.changes\",\"actor\":\"alice\"}\n{\"op\":\"actor.diff\",\"actor\":\"alice\",\"from\":0,\"to\":1}",
		`{"op":"actor.ls","actor":"alice","path":"a","depth":1}`,
		`{"op":"actor.rm","actor":"alice","path":"a/b.md"}`,
		`{"op":"actor.rm-prefix","actor":"alice","path":"a","depth":1}`,
		`{"op":"actor.stats","actor":"alice"}`,
		`{"op":"actor.gc","actor":"alice"}`,
		`{"op":"actors.list"}`,
		`{"op":"context.assembled","sources":[{"name":"s","bytes":3}],"messages":[{"role":"user"}]}`,
		`{"op":"model.request","round":1,"model":"m","messages":[]}`,
		`{"op":"model.response","round":1,"response":{"text":"t"},"toolCallIds":["c"]}`,
		`{"op":"tool.call","toolCallId":"c","name":"t","args":{}}`,
		`{"op":"tool.result","toolCallId":"c","result":{},"error":{"code":"x"}}`,
		`{"op":"run.hostpath","hostPath":"/tmp"}`,
		`{"op":"help"}`,
		`{"op":"write","path":"output/a","content":"x","id":[1,{"a":null}]}`,
		`{"op":"read","path":"output/main.md","startLine":-1,"endLine":9223372036854775807}`,
	}
	// A few inputs of many lines each: the ordinary test opens a store
	// per input.
	for i := 0; i < len(seeds); i += 16 {
		f.Add(strings.Join(seeds[i:min(i+16, len(seeds))], "\n"))
	}
	// Each input gets a copy of one new store: opening a copy costs no
	// migration.
	ctx := context.Background()
	tmpl := f.TempDir()
	st, err := wsstore.Open(ctx, tmpl, wsstore.Options{ReclaimIdle: -1})
	require.NoError(f, err)
	require.NoError(f, st.Close())
	f.Fuzz(func(t *testing.T, lines string) {
		dir := t.TempDir()
		require.NoError(t, os.CopyFS(dir, os.DirFS(tmpl)))
		st, err := wsstore.Open(ctx, dir, wsstore.Options{ReclaimIdle: -1})
		require.NoError(t, err)
		defer func() { require.NoError(t, st.Close()) }()
		s := protocol.NewSession(protocol.Backend{Runs: st.Runs, Journal: st.Journal, Actors: st.Actors, Retention: st.Runs,
			Records: st.Runs, Host: st.Runs, Checkpoints: st.Checkpoints, Store: st, NoHostPaths: true})
		for _, l := range []string{
			`{"op":"run.create","runId":"r","chat":{"kind":"k","stableChatId":"s"}}`,
			`{"op":"write","path":"output/main.md","content":"# A\nline\n"}`,
		} {
			r := s.Handle(ctx, []byte(l))
			require.True(t, r.OK, "%+v", r.Error)
		}
		for i, l := range bytes.Split([]byte(lines), []byte("\n")) {
			if i == 24 {
				break
			}
			r := s.Handle(ctx, l)
			var b bytes.Buffer
			require.NoError(t, protocol.WriteResponse(&b, r))
			out := b.Bytes()
			require.Equal(t, 1, bytes.Count(out, []byte("\n")), "%s", out)
			require.True(t, json.Valid(out), "%s", out)
			if !r.OK {
				require.NotNil(t, r.Error, "%s", out)
				assert.NotEmpty(t, r.Error.Code, "%s", out)
				assert.NotEqual(t, wserr.Internal, r.Error.Code, "line %q: %s", l, out)
			}
		}
		rep, err := st.Fsck(ctx, nil)
		require.NoError(t, err)
		require.Empty(t, rep.Problems)
	})
}
