package protocol_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/protocol"
)

// TestFileChangeToADirectoryPath: a write, append, patch, delete or apply
// edit (a removal too: delete and apply remove files only) whose path
// ends in "/" names a directory, and is refused as
// workspace.invalid_path with nothing changed; it made a file named as
// the directory (output/dir), or deleted the file, as actor uploads and
// deletes did.
func TestFileChangeToADirectoryPath(t *testing.T) {
	st := storetest.OpenStore(t)
	s := protocol.NewSession(protocol.Backend{Runs: st.Runs, Journal: st.Journal, Actors: st.Actors})
	ctx := context.Background()
	for _, l := range []string{
		`{"op":"run.create","runId":"r","chat":{"kind":"k","stableChatId":"s"}}`,
		`{"op":"write","path":"output/a.md","content":"one"}`,
	} {
		r := s.Handle(ctx, []byte(l))
		require.True(t, r.OK, "%s: %+v", l, r.Error)
	}
	ls := `{"op":"list","path":"output","depth":3}`
	before := line(t, s.Handle(ctx, []byte(ls)))
	for _, l := range []string{
		`{"op":"write","path":"output/dir/","content":"x"}`,
		`{"op":"append","path":"output/dir/","content":"x"}`,
		`{"op":"write","path":"output/a.md/","content":"x"}`,
		`{"op":"patch","path":"output/a.md/","old":"one","new":"two"}`,
		`{"op":"apply","edits":[{"path":"output/b.md","content":"b"},{"path":"output/dir/","content":"x"}]}`,
		`{"op":"apply","edits":[{"path":"output/a.md/","remove":true}]}`,
		`{"op":"delete","path":"output/a.md/"}`,
		// A last "." segment names a directory as a trailing "/" does.
		`{"op":"write","path":"output/dir/.","content":"x"}`,
		`{"op":"write","path":"output/a.md/.","content":"x"}`,
		`{"op":"append","path":"output/a.md/.","content":"x"}`,
		`{"op":"patch","path":"output/a.md/.","old":"one","new":"two"}`,
		`{"op":"apply","edits":[{"path":"output/dir/.","content":"x"}]}`,
		`{"op":"apply","edits":[{"path":"output/a.md/.","remove":true}]}`,
		`{"op":"delete","path":"output/a.md/."}`,
	} {
		r := s.Handle(ctx, []byte(l))
		if assert.False(t, r.OK, l) {
			assert.Equal(t, "workspace.invalid_path", string(r.Error.Code), l)
		}
	}
	assert.Equal(t, before, line(t, s.Handle(ctx, []byte(ls))), "nothing changed")
}

// TestActorFileChangeToADirectoryPath: an actor upload or delete whose
// path ends in "/" or in a "." segment names a directory: the upload is
// workspace.invalid_path, the delete of a file workspace.not_a_directory,
// and nothing changes.
func TestActorFileChangeToADirectoryPath(t *testing.T) {
	st := storetest.OpenStore(t)
	s := protocol.NewSession(protocol.Backend{Runs: st.Runs, Journal: st.Journal, Actors: st.Actors})
	ctx := context.Background()
	r := s.Handle(ctx, []byte(`{"op":"actor.upload","actor":"alice","path":"a.md","content":"one"}`))
	require.True(t, r.OK, "%+v", r.Error)
	ls := `{"op":"actor.ls","actor":"alice","depth":3}`
	before := line(t, s.Handle(ctx, []byte(ls)))
	for l, code := range map[string]string{
		`{"op":"actor.upload","actor":"alice","path":"a.md/","content":"x"}`:  "workspace.invalid_path",
		`{"op":"actor.upload","actor":"alice","path":"a.md/.","content":"x"}`: "workspace.invalid_path",
		`{"op":"actor.upload","actor":"alice","path":"dir/.","content":"x"}`:  "workspace.invalid_path",
		`{"op":"actor.rm","actor":"alice","path":"a.md/"}`:                    "workspace.not_a_directory",
		`{"op":"actor.rm","actor":"alice","path":"a.md/."}`:                   "workspace.not_a_directory",
	} {
		r := s.Handle(ctx, []byte(l))
		if assert.False(t, r.OK, l) {
			assert.Equal(t, code, string(r.Error.Code), l)
		}
	}
	assert.Equal(t, before, line(t, s.Handle(ctx, []byte(ls))), "nothing changed")
}

// TestFileReadOfADirectoryPath: a read, host.read, stat, search or
// actor.download whose path ends in "/" or in a "." segment but names a file is refused
// as workspace.invalid_path, as a change of it is; it answered the file.
// A directory named so answers as before: stat and list describe it, a
// read is workspace.path_is_directory.
func TestFileReadOfADirectoryPath(t *testing.T) {
	st := storetest.OpenStore(t)
	s := protocol.NewSession(protocol.Backend{Runs: st.Runs, Journal: st.Journal, Actors: st.Actors, Host: st.Runs})
	ctx := context.Background()
	for _, l := range []string{
		`{"op":"run.create","runId":"r","chat":{"kind":"k","stableChatId":"s"}}`,
		`{"op":"write","path":"output/a.md","content":"one"}`,
		`{"op":"write","path":"output/sub/b.md","content":"two"}`,
		`{"op":"actor.upload","actor":"alice","path":"a.md","content":"one"}`,
		`{"op":"actor.upload","actor":"alice","path":"dir/b.md","content":"two"}`,
	} {
		r := s.Handle(ctx, []byte(l))
		require.True(t, r.OK, "%s: %+v", l, r.Error)
	}
	for l, code := range map[string]string{
		`{"op":"read","path":"output/a.md/"}`:                           "workspace.invalid_path",
		`{"op":"read","path":"output/a.md/."}`:                          "workspace.invalid_path",
		`{"op":"read","path":"output/a.md/","startLine":1,"endLine":1}`: "workspace.invalid_path",
		`{"op":"host.read","runId":"r","path":"output/a.md/"}`:          "workspace.invalid_path",
		`{"op":"stat","path":"output/a.md/"}`:                           "workspace.invalid_path",
		`{"op":"stat","path":"output/a.md/."}`:                          "workspace.invalid_path",
		`{"op":"actor.download","actor":"alice","path":"a.md/"}`:        "workspace.invalid_path",
		`{"op":"actor.download","actor":"alice","path":"a.md/."}`:       "workspace.invalid_path",
		`{"op":"search","query":"one","path":"output/a.md/"}`:           "workspace.invalid_path",
		`{"op":"read","path":"output/sub/"}`:                            "workspace.path_is_directory",
		`{"op":"read","path":"output/missing.md/"}`:                     "workspace.file_not_found",
		`{"op":"actor.download","actor":"alice","path":"dir/"}`:         "workspace.path_is_directory",
	} {
		r := s.Handle(ctx, []byte(l))
		if assert.False(t, r.OK, l) {
			assert.Equal(t, code, string(r.Error.Code), l)
		}
	}
	for _, l := range []string{
		`{"op":"read","path":"output/a.md"}`,
		`{"op":"stat","path":"output/sub/"}`,
		`{"op":"stat","path":"output/sub/."}`,
		`{"op":"stat","path":"./"}`,
		`{"op":"list","path":"output/sub/"}`,
		`{"op":"search","query":"two","path":"output/sub/"}`,
		`{"op":"search","query":"two","path":"./"}`,
		`{"op":"host.list","runId":"r","path":"output/sub/"}`,
		`{"op":"actor.ls","actor":"alice","path":"dir/"}`,
		`{"op":"actor.download","actor":"alice","path":"a.md"}`,
	} {
		r := s.Handle(ctx, []byte(l))
		assert.True(t, r.OK, "%s: %+v", l, r.Error)
	}
}
