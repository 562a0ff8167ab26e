package archive_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/archive"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/internal/storetest"
)

// TestExportBytesAreStable: exports of populate's store, with 600 actor
// spaces more (more than a page of them), are byte for byte the archives
// this build's predecessors wrote for the same store and scope, whatever
// order the spaces are read in: the hashes below are of those archives.
func TestExportBytesAreStable(t *testing.T) {
	if testing.Short() {
		t.Skip("makes 600 actor spaces")
	}
	for _, tc := range []struct {
		name  string
		scope archive.Scope
		want  string
	}{
		{"All", archive.Scope{All: true}, "670cab00560e79403c07e830405a8d8057a49e36b1ee071e07c02f56d72ac360"},
		{"Actors", archive.Scope{Actors: []string{"bob", "actor-007", "alice", "bob"}}, "1c500953e3bf0a9e3c71ea7690f2dcfe26de60a44d6c815b5d689967860b5859"},
		{"RunsAndActors", archive.Scope{Runs: []string{"r2"}, Actors: []string{"alice"}}, "060373785dedd0155c436c74c668d0dd151da6529aaaf6f81b1eee177b28d765"},
		{"SkipWorkspace", archive.Scope{All: true, SkipWorkspace: true}, "59edb9bb0ab653eadc1d471c01ff20b94e5fa40be7119be21d98dc23f63f5019"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := export(t, populated(t), tc.scope)
			sum := sha256.Sum256(b)
			t.Logf("%s: %d bytes, sha256 %s", tc.name, len(b), hex.EncodeToString(sum[:]))
			assert.Equal(t, tc.want, hex.EncodeToString(sum[:]))
		})
	}
}

// populated returns a store populate filled, with 600 actor spaces more,
// written in the reverse of their names' order, and a clock of its own.
func populated(t *testing.T) *wsstore.Store {
	// No collection and no re-encoding while idle: both read the store's
	// clock, which dates the archives, and a pause in the test (a loaded
	// machine) would let them read it between two of its writes.
	s := storetest.OpenStoreWith(t, wsstore.Options{Now: storetest.NewClock().Now, CAS: cas.Options{InlineMax: 64 << 10, ReencodeIdle: time.Hour}, ReclaimIdle: -1})
	populate(t, s)
	for i := range 600 {
		_, err := s.Actors.Upload(t.Context(), fmt.Sprintf("actor-%03d", 599-i), "notes.md", strings.NewReader(fmt.Sprint("note ", i)))
		require.NoError(t, err)
	}
	return s
}
