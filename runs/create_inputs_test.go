package runs_test

import (
	"context"
	"crypto/rand"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// TestCreateRunMaterializeRules: a virtual resource fixed into input/
// obeys the rules of an input given directly: its path under input/ must
// be valid (a path near the limit becomes too long there, and must not
// land anywhere else), and input/persist_snapshot.json is the store's.
// A refused run leaves nothing.
func TestCreateRunMaterializeRules(t *testing.T) {
	segs := make([]string, 0, 17)
	for range 15 {
		segs = append(segs, strings.Repeat("x", 255))
	}
	long := strings.Join(append(segs, strings.Repeat("y", 251), "ab"), "/") // 4,094 bytes: valid, but not under input/
	require.Len(t, long, 4094)
	sp, err := vfs.NewStaticProvider(map[string][]byte{long: []byte("virtual content")})
	require.NoError(t, err)
	v := vfs.NewVirtual()
	require.NoError(t, v.Mount(vfs.MustPath("q"), sp))
	require.NoError(t, v.Mount(vfs.MustPath("persist_snapshot.json"), vfs.FileProvider(func(context.Context) ([]byte, error) {
		return []byte(`{"from":"provider"}`), nil
	})))
	st, _ := openStore(t, runs.Options{Virtual: v})
	svc, db := st.Runs, st.DB
	ctx := context.Background()

	for name, materialize := range map[string]string{"ErrTooLongUnderInput": "q/" + long, "ErrSnapshotName": "persist_snapshot.json"} {
		t.Run(name, func(t *testing.T) {
			before := storetest.CountRows(t, db, "runs")
			_, err := svc.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "c"}, Materialize: []string{materialize}})
			assert.True(t, wserr.Is(err, wserr.InvalidPath), "%v", err)
			assert.Equal(t, before, storetest.CountRows(t, db, "runs"))
		})
	}
}

// TestCreateRunInputsRespectTheStoreCap: a run's inputs are content like
// any other, and a capped store refuses the run whose inputs do not fit,
// storing nothing.
func TestCreateRunInputsRespectTheStoreCap(t *testing.T) {
	e := newLifecycleEnv(t)
	capped := e.service(runs.Options{MaxStoreBytes: 1 << 20})
	big := make([]byte, 4<<20)
	rand.Read(big)
	before := rowCounts(e)
	_, err := capped.CreateRun(e.ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "c"},
		Inputs: map[string][]byte{"big.bin": big}})
	assert.True(t, wserr.Is(err, wserr.SizeLimitExceeded), "%v", err)
	assert.Equal(t, before, rowCounts(e), "a refused run stores nothing")
	_, err = capped.CreateRun(e.ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: "c"},
		Inputs: map[string][]byte{"small.md": []byte("fits")}})
	require.NoError(t, err)
}
