package remote_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/remote"
)

// TestIndexOfImpossibleEntriesIsDamaged: an index object that hashes to
// its key and reads as JSON, but lists an object no build writes (a kind
// that is none, a size below zero), which anyone who can write to the
// bucket could put there, is damaged: Pull names it and takes in nothing
// of it, rather than fail. So is one whose address does not parse, or
// with a value longer than any an index holds (1 KiB).
func TestIndexOfImpossibleEntriesIsDamaged(t *testing.T) {
	h := cas.Sum([]byte("x"))
	for _, tc := range []struct{ name, entry string }{
		{"UnknownKind", `{"kind":7,"hash":"` + h.String() + `","size":1,"codec":0,"off":0,"len":1}`},
		{"NegativeSize", `{"kind":0,"hash":"` + h.String() + `","size":-1,"codec":0,"off":0,"len":1}`},
		{"NegativeLength", `{"kind":0,"hash":"` + h.String() + `","size":1,"codec":0,"off":0,"len":-1}`},
		{"NoAddress", `{"kind":0,"size":1,"codec":0,"off":0,"len":1}`},
		{"ChunkWithoutAddress", `{"kind":0,"hash":"` + h.String() + `","size":1,"codec":2,"off":0,"len":0,"chunks":[{"off":0}]}`},
		{"MalformedAddress", `{"kind":0,"hash":"` + h.String()[:60] + `","size":1,"codec":0,"off":0,"len":1}`},
		{"TokenPastItsBound", `{"kind":0,"hash":"` + h.String() + `","size":1,"codec":0,"off":0,"len":1,"note":"` + strings.Repeat("n", 2<<10) + `"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := fakeBucket(t)
			b := []byte(`{"version":1,"pack":"data/00/` + h.String() + `","objects":[` + tc.entry + `]}`)
			key := "index/" + cas.Sum(b).String()
			srv.SetObject("bkt", "store/"+key, b)
			d := newDevice(t, srv.URL, "bkt", remote.Options{})
			st, err := d.st.Pull(context.Background(), d.db)
			require.NoError(t, err)
			assert.Equal(t, []string{key}, st.Damaged)
			assert.Zero(t, st.Objects)
		})
	}
}
