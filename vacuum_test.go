package wsstore_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/wserr"
)

func TestVacuum(t *testing.T) {
	t.Run("OK/ShrinksAfterGC", func(t *testing.T) {
		e := newEnv(t)
		e.create("chat-1", "run_a")
		e.write("run_a", "output/a.md", []byte("kept"))
		e.create("chat-1", "run_b")
		big := random(40, 5<<20)
		e.write("run_b", "output/big.bin", big)
		e.drop("run_b")
		rep := e.gc(wsstore.GCOptions{Grace: -1, Now: e.later})
		require.Greater(t, rep.FreedBytes, int64(5<<20))

		vr, err := e.s.Vacuum(e.ctx)

		require.NoError(t, err)
		assert.Less(t, vr.AfterBytes, vr.BeforeBytes-4<<20, "%+v", vr)
		st, err := e.s.Stats(e.ctx)
		require.NoError(t, err)
		assert.Equal(t, vr.AfterBytes, st.FileBytes)
		e.requireReadable("run_a", map[string][]byte{"output/a.md": []byte("kept")})
		e.write("run_a", "output/after.md", []byte("the store still takes writes"))
	})
	t.Run("ReadOnly", func(t *testing.T) {
		e := newEnv(t)
		e.create("chat-1", "run_a")
		ro, err := wsstore.Open(e.ctx, e.s.Dir, wsstore.Options{Index: index.Options{ReadOnly: true}})
		require.NoError(t, err)
		defer ro.Close()

		_, err = ro.Vacuum(e.ctx)

		assert.True(t, wserr.Is(err, wserr.ReadOnly), "%v", err)
	})
}
