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
