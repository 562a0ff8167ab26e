package remote_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/remote"
)

// TestDictionariesTravel: blobs compressed with a trained dictionary name
// its blob as their base, so the tier pushes the dictionary like any blob
// (before the blobs that need it) and another device that pulls reads
// every file without having trained one.
func TestDictionariesTravel(t *testing.T) {
	srv := fakeBucket(t)
	ctx := context.Background()
	a := newDevice(t, srv.URL, "bkt", remote.Options{PackSize: 16 << 10})
	words := strings.Fields("river castle lantern forest merchant harbor winter signal archive garden tower buffer config handler request response context index record stream the of and to in is")
	r := rand.New(rand.NewPCG(3, 4))
	var files [][]byte
	for i := range 120 {
		var b strings.Builder
		fmt.Fprintf(&b, "# Note %d\n\n", i)
		for n := 300 + r.IntN(3000); b.Len() < n; {
			b.WriteString(words[r.IntN(len(words))] + " ")
		}
		files = append(files, []byte(b.String()))
	}
	hs := a.put(t, files)
	ds, err := a.blobs.Dicts(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, ds, "a dictionary was trained over the remote tier")
	info, err := a.blobs.Stat(ctx, hs[len(hs)-1])
	require.NoError(t, err)
	assert.Equal(t, ds[len(ds)-1].Hash, info.Base)

	_, err = a.st.Push(ctx, a.db)
	require.NoError(t, err)
	_, err = a.st.Evict(ctx, a.db)
	require.NoError(t, err)
	// A Store that has loaded no dictionary reads it back from its pack.
	fresh, err := cas.New(a.db, cas.Options{Storage: a.st, InlineMax: 4 << 10})
	require.NoError(t, err)
	(&device{db: a.db, st: a.st, blobs: fresh}).requireAll(t, hs, files)

	b := newDevice(t, srv.URL, "bkt", remote.Options{})
	_, err = b.st.Pull(ctx, b.db)
	require.NoError(t, err)
	b.requireAll(t, hs, files)
	rep, err := b.blobs.Verify(ctx, nil)
	require.NoError(t, err)
	assert.Empty(t, rep.Problems)
}
