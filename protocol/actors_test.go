package protocol_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/protocol"
	"github.com/wsstore/wsstore/wserr"
)

// TestActorJournalOps: a host lists an actor space's changes a page at a
// time, diffs two of its versions and lists the spaces, as the Go API
// does (Changes, Diff, Actors).
func TestActorJournalOps(t *testing.T) {
	ctx := context.Background()
	st, err := wsstore.Open(ctx, t.TempDir(), wsstore.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	s := protocol.NewSession(protocol.Backend{Runs: st.Runs, Journal: st.Journal, Actors: st.Actors})
	ok := func(l string) json.RawMessage {
		t.Helper()
		r := s.Handle(ctx, []byte(l))
		require.True(t, r.OK, "%s: %+v", l, r.Error)
		var a struct {
			Result json.RawMessage `json:"result"`
		}
		require.NoError(t, json.Unmarshal([]byte(line(t, r)), &a))
		return a.Result
	}
	ok(`{"op":"actor.upload","actor":"alice","path":"notes/a.md","content":"one\n"}`)
	ok(`{"op":"actor.upload","actor":"alice","path":"notes/b.md","content":"two\n"}`)
	ok(`{"op":"actor.rm","actor":"alice","path":"notes/a.md"}`)
	ok(`{"op":"actor.upload","actor":"bob","path":"x.md","content":"x"}`)

	type changes struct {
		Changes []struct {
			Seq  int64  `json:"seq"`
			Op   string `json:"op"`
			Path string `json:"path"`
		} `json:"changes"`
		More *bool `json:"more"`
	}
	var page changes
	require.NoError(t, json.Unmarshal(ok(`{"op":"actor.changes","actor":"alice","limit":2}`), &page))
	require.Len(t, page.Changes, 2)
	require.NotNil(t, page.More)
	assert.True(t, *page.More)
	assert.Equal(t, "notes/a.md", page.Changes[0].Path)
	require.NoError(t, json.Unmarshal(ok(`{"op":"actor.changes","actor":"alice","afterSeq":2}`), &page))
	require.Len(t, page.Changes, 1)
	assert.Equal(t, "delete", page.Changes[0].Op)
	assert.False(t, *page.More)

	var diff struct {
		Changes []struct {
			Path string `json:"path"`
			Op   string `json:"op"`
		} `json:"changes"`
	}
	require.NoError(t, json.Unmarshal(ok(`{"op":"actor.diff","actor":"alice","from":2,"to":3}`), &diff))
	require.Len(t, diff.Changes, 1)
	assert.Equal(t, "notes/a.md", diff.Changes[0].Path)
	assert.Equal(t, "deleted", diff.Changes[0].Op)
	require.NoError(t, json.Unmarshal(ok(`{"op":"actor.diff","actor":"alice","from":0,"to":2}`), &diff))
	assert.Len(t, diff.Changes, 2, "from the empty space: the version's files")

	// A version's files, a page at a time: after change 2, both notes.
	var ls struct {
		Entries []struct {
			Path string `json:"path"`
		} `json:"entries"`
		More bool `json:"more"`
	}
	require.NoError(t, json.Unmarshal(ok(`{"op":"actor.ls","actor":"alice","path":"notes","at":2}`), &ls))
	require.Len(t, ls.Entries, 2)
	assert.Equal(t, "notes/a.md", ls.Entries[0].Path)
	require.NoError(t, json.Unmarshal(ok(`{"op":"actor.ls","actor":"alice","path":"notes","at":2,"after":"notes/a.md"}`), &ls))
	require.Len(t, ls.Entries, 1)
	assert.Equal(t, "notes/b.md", ls.Entries[0].Path)
	require.NoError(t, json.Unmarshal(ok(`{"op":"actor.ls","actor":"alice","path":"notes"}`), &ls))
	require.Len(t, ls.Entries, 1, "the live space: a.md removed")
	require.NoError(t, json.Unmarshal(ok(`{"op":"actor.ls","actor":"alice","at":0}`), &ls))
	assert.Empty(t, ls.Entries, "0: the empty space")

	var spaces struct {
		Actors []struct {
			Actor string `json:"actor"`
		} `json:"actors"`
		More bool `json:"more"`
	}
	require.NoError(t, json.Unmarshal(ok(`{"op":"actors.list"}`), &spaces))
	require.Len(t, spaces.Actors, 2)
	assert.Equal(t, "alice", spaces.Actors[0].Actor)
	assert.False(t, spaces.More)
	// A page of one, then the rest after it.
	require.NoError(t, json.Unmarshal(ok(`{"op":"actors.list","limit":1}`), &spaces))
	require.Len(t, spaces.Actors, 1)
	assert.Equal(t, "alice", spaces.Actors[0].Actor)
	assert.True(t, spaces.More)
	require.NoError(t, json.Unmarshal(ok(`{"op":"actors.list","after":"alice"}`), &spaces))
	require.Len(t, spaces.Actors, 1)
	assert.NotEqual(t, "alice", spaces.Actors[0].Actor)
	assert.False(t, spaces.More)

	for l, code := range map[string]wserr.Code{
		`{"op":"actor.changes"}`:                               protocol.CodeInvalidRequest,
		`{"op":"actor.changes","actor":"alice","limit":501}`:   protocol.CodeInvalidRequest,
		`{"op":"actor.diff","actor":"alice","from":1}`:         protocol.CodeInvalidRequest,
		`{"op":"actor.diff","actor":"alice","from":1,"to":9}`:  wserr.NotFound,
		`{"op":"actor.diff","actor":"a/b","from":0,"to":1}`:    wserr.InvalidActor,
		`{"op":"actor.diff","actor":"alice","from":-1,"to":1}`: protocol.CodeInvalidRequest,
		`{"op":"actors.list","limit":-1}`:                      protocol.CodeInvalidRequest,
		`{"op":"actor.ls","actor":"alice","at":-1}`:            protocol.CodeInvalidRequest,
		`{"op":"actor.ls","actor":"alice","at":9}`:             wserr.NotFound,
		`{"op":"actors.list","limit":100001}`:                  protocol.CodeInvalidRequest,
	} {
		r := s.Handle(ctx, []byte(l))
		require.False(t, r.OK, l)
		assert.Equal(t, code, r.Error.Code, "%s: %s", l, r.Error.Message)
	}
}

// TestActorDownloadPastTheLimitNamesTheTransportsWay: an actor.download
// past MaxActorDownload is workspace.size_limit_exceeded naming the way
// the session's transport streams the file: wsctl actor download by
// default (batch), Backend.StreamDownload when it is set.
func TestActorDownloadPastTheLimitNamesTheTransportsWay(t *testing.T) {
	ctx := context.Background()
	st, err := wsstore.Open(ctx, t.TempDir(), wsstore.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	_, err = st.Actors.Upload(ctx, "alice", "big.bin", storetest.Text(protocol.MaxActorDownload+1))
	require.NoError(t, err)
	for _, tc := range []struct{ way, want string }{
		{"", "use wsctl actor download"},
		{"GET /workspace/file?actor=&path=", "use GET /workspace/file?actor=&path="},
	} {
		s := protocol.NewSession(protocol.Backend{Runs: st.Runs, Journal: st.Journal, Actors: st.Actors, StreamDownload: tc.way})
		r := s.Handle(ctx, []byte(`{"op":"actor.download","actor":"alice","path":"big.bin"}`))
		require.NotNil(t, r.Error)
		assert.Equal(t, wserr.SizeLimitExceeded, r.Error.Code)
		assert.Contains(t, r.Error.Message, tc.want)
	}
}

// TestActorOpsWithoutActor: actor.ls without an actor lists the spaces as
// one tree and actor.stats gives a page of every actor's stats, each over
// the actors Backend.ActorScope names when it names any.
func TestActorOpsWithoutActor(t *testing.T) {
	ctx := context.Background()
	st := storetest.OpenStore(t)
	for _, a := range []string{"alice", "bob", "carol"} {
		_, err := st.Actors.Upload(ctx, a, "docs/"+a+".md", storetest.Text(10))
		require.NoError(t, err)
	}
	result := func(s *protocol.Session, l string) map[string]any {
		t.Helper()
		r := s.Handle(ctx, []byte(l))
		require.True(t, r.OK, "%s: %+v", l, r.Error)
		var a struct {
			Result map[string]any `json:"result"`
		}
		require.NoError(t, json.Unmarshal([]byte(line(t, r)), &a))
		return a.Result
	}
	field := func(m map[string]any, key, name string) []string {
		var out []string
		for _, e := range m[key].([]any) {
			out = append(out, e.(map[string]any)[name].(string))
		}
		return out
	}
	all := protocol.NewSession(protocol.Backend{Runs: st.Runs, Journal: st.Journal, Actors: st.Actors})
	assert.Equal(t, []string{"alice", "alice/docs", "bob", "bob/docs", "carol", "carol/docs"},
		field(result(all, `{"op":"actor.ls","depth":2}`), "entries", "path"))
	assert.Equal(t, []string{"bob/docs/bob.md"}, field(result(all, `{"op":"actor.ls","path":"bob/docs"}`), "entries", "path"))
	page := result(all, `{"op":"actor.stats","limit":2}`)
	assert.Equal(t, []string{"alice", "bob"}, field(page, "stats", "actor"))
	assert.Equal(t, true, page["more"])

	scoped := protocol.NewSession(protocol.Backend{Runs: st.Runs, Journal: st.Journal, Actors: st.Actors, ActorScope: []string{"carol", "bob"}})
	assert.Equal(t, []string{"bob", "carol"}, field(result(scoped, `{"op":"actor.ls"}`), "entries", "path"))
	assert.Equal(t, []string{"bob", "carol"}, field(result(scoped, `{"op":"actor.stats"}`), "stats", "actor"))
	assert.Empty(t, result(scoped, `{"op":"actor.ls","path":"alice"}`)["entries"], "alice is absent")

	for l, code := range map[string]wserr.Code{
		`{"op":"actor.ls","at":1}`:                       protocol.CodeInvalidRequest,
		`{"op":"actor.ls","after":"../x"}`:               protocol.CodeInvalidRequest,
		`{"op":"actor.ls","path":"../x"}`:                wserr.InvalidPath,
		`{"op":"actor.stats","limit":1001}`:              protocol.CodeInvalidRequest,
		`{"op":"actor.stats","actor":"alice","limit":1}`: protocol.CodeInvalidRequest,
	} {
		r := all.Handle(ctx, []byte(l))
		require.False(t, r.OK, l)
		assert.Equal(t, code, r.Error.Code, "%s: %s", l, r.Error.Message)
	}
}
