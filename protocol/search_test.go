package protocol_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/protocol"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

// TestSearchNamesSkippedMounts: search answers the virtual mounts below
// its path whose provider failed in skipped, with the hits found
// elsewhere; a search of the mount itself is the provider's error, and a
// search with nothing skipped has no skipped field.
func TestSearchNamesSkippedMounts(t *testing.T) {
	v := vfs.NewVirtual()
	require.NoError(t, v.Mount(vfs.MustPath("chat/history.md"), vfs.FileProvider(func(context.Context) ([]byte, error) {
		return nil, errors.New("history service down")
	})))
	st, err := wsstore.Open(context.Background(), t.TempDir(), wsstore.Options{Runs: runs.Options{Virtual: v}})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	s := protocol.NewSession(protocol.Backend{Runs: st.Runs, Journal: st.Journal})
	ctx := context.Background()
	r := s.Handle(ctx, []byte(`{"op":"run.create","runId":"r","chat":{"kind":"k","stableChatId":"s"},"profile":{"autoCheckpoint":false,"visibleRoots":["output","chat"]}}`))
	require.True(t, r.OK, "%+v", r.Error)
	r = s.Handle(ctx, []byte(`{"op":"write","path":"output/a.md","content":"dragons here"}`))
	require.True(t, r.OK, "%+v", r.Error)

	type answer struct {
		Hits []struct {
			Path string `json:"path"`
		} `json:"hits"`
		Skipped []map[string]string `json:"skipped"`
	}
	a := result[answer](t, s, `{"op":"search","query":"dragons"}`)
	require.Len(t, a.Hits, 1)
	assert.Equal(t, "output/a.md", a.Hits[0].Path)
	assert.Equal(t, []map[string]string{{"path": "chat/history.md", "code": "store.internal", "message": "chat/history.md: history service down"}}, a.Skipped)

	r = s.Handle(ctx, []byte(`{"op":"search","query":"dragons","path":"output"}`))
	require.True(t, r.OK, "%+v", r.Error)
	assert.NotContains(t, line(t, r), "skipped")

	r = s.Handle(ctx, []byte(`{"op":"search","query":"dragons","path":"chat/history.md"}`))
	require.False(t, r.OK)
	assert.Equal(t, "store.internal", string(r.Error.Code))
}
