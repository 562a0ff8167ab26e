package remote_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/remote"
	"github.com/wsstore/wsstore/wserr"
)

// FuzzIndex takes in an index object of the fuzzer's bytes, put under the
// key its hash gives as anyone who can write to the bucket could, into a
// new store: the pull never panics and either takes it in, names it
// damaged, or fails with a coded error other than store.internal.
func FuzzIndex(f *testing.F) {
	ctx := context.Background()
	srv := fakeBucket(f)
	st := openStorage(f, srv.URL, "bkt", "store", remote.Options{})
	// Each input's store is a copy of one new database: opening a copy
	// costs no migration.
	tmpl := filepath.Join(f.TempDir(), "wsstore.db")
	db, err := index.Open(ctx, tmpl, index.Options{})
	require.NoError(f, err)
	require.NoError(f, db.Close())

	// Seeds: an index of a pack, of a chunked blob's list, of a delta.
	h := cas.Sum([]byte("x"))
	for _, s := range []string{
		`{"version":1,"pack":"data/00/` + h.String() + `","objects":[{"kind":0,"hash":"` + h.String() + `","size":1,"codec":0,"off":0,"len":1,"sum":"` + h.String() + `"}]}`,
		`{"version":1,"objects":[{"kind":0,"hash":"` + h.String() + `","size":9,"codec":2,"off":0,"len":0,"chunks":[{"hash":"` + h.String() + `","off":0}]}]}`,
		`{"version":1,"pack":"data/00/x","objects":[{"kind":0,"hash":"` + h.String() + `","size":1,"codec":3,"base":"` + h.String() + `","off":5,"len":1}]}`,
		`{"version":1,"pack":"data/00/x","objects":[{"kind":7,"hash":"` + h.String() + `","size":-1,"codec":0,"off":0,"len":1}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		require.NoError(t, os.CopyFS(dir, os.DirFS(filepath.Dir(tmpl))))
		path := filepath.Join(dir, "wsstore.db")
		db, err := index.Open(ctx, path, index.Options{})
		require.NoError(t, err)
		defer db.Close()
		key := "index/" + cas.Sum(data).String()
		srv.SetObject("bkt", "store/"+key, data)
		_, err = st.PullIndexes(ctx, db, []string{key})
		if err != nil {
			assert.NotEqual(t, wserr.Internal, wserr.CodeOf(err), "%v", err)
		}
	})
}
