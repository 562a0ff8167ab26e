package wsstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
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

// dropBig leaves a store with a few megabytes of free pages: a run that
// held a large file, deleted and collected.
func dropBig(e *env) {
	e.t.Helper()
	e.create("chat-1", "run_a")
	e.write("run_a", "output/a.md", []byte("kept"))
	e.create("chat-1", "run_b")
	e.write("run_b", "output/big.bin", random(41, 4<<20))
	e.drop("run_b")
	rep := e.gc(wsstore.GCOptions{Grace: -1, Now: e.later})
	require.Greater(e.t, rep.FreedBytes, int64(4<<20))
}

func TestVacuumInSteps(t *testing.T) {
	t.Run("OK/WritersBetweenSteps", func(t *testing.T) {
		e := newEnv(t)
		dropBig(e)
		free, err := e.s.DB.FreePages(e.ctx)
		require.NoError(t, err)
		require.Greater(t, free, int64(64))

		// Each step commits and lets go of the write lock: a write made
		// between two steps goes through at once.
		writes := 0
		rep, err := e.s.VacuumWith(e.ctx, wsstore.VacuumOptions{Pages: 64, Progress: func(steps int, left int64) {
			if left > 0 {
				e.write("run_a", fmt.Sprintf("output/step%d.md", steps), []byte("written between steps"))
				writes++
			}
		}})

		require.NoError(t, err)
		assert.Equal(t, wsstore.VacuumIncremental, rep.Mode)
		assert.GreaterOrEqual(t, rep.Steps, int(free/64), "%+v", rep)
		assert.Equal(t, free, rep.FreePagesBefore)
		assert.Zero(t, rep.FreePagesAfter)
		assert.Less(t, rep.AfterBytes, rep.BeforeBytes-3<<20, "%+v", rep)
		assert.Positive(t, writes)
		e.requireReadable("run_a", map[string][]byte{"output/a.md": []byte("kept"), "output/step1.md": []byte("written between steps")})
	})
	t.Run("OK/Full", func(t *testing.T) {
		e := newEnv(t)
		dropBig(e)

		rep, err := e.s.VacuumWith(e.ctx, wsstore.VacuumOptions{Full: true})

		require.NoError(t, err)
		assert.Equal(t, wsstore.VacuumFull, rep.Mode)
		assert.Zero(t, rep.Steps)
		assert.Zero(t, rep.FreePagesAfter)
		assert.Less(t, rep.AfterBytes, rep.BeforeBytes-3<<20, "%+v", rep)
	})
	t.Run("OK/OlderStoreIsRebuiltAndSwitched", func(t *testing.T) {
		dir := t.TempDir()
		s, err := wsstore.Open(context.Background(), dir, wsstore.Options{})
		require.NoError(t, err)
		path := s.DB.Path()
		require.NoError(t, s.Close())
		// A store as builds before incremental vacuum made them.
		raw, err := sql.Open("sqlite", path)
		require.NoError(t, err)
		_, err = raw.Exec(`PRAGMA auto_vacuum = NONE`)
		require.NoError(t, err)
		_, err = raw.Exec(`VACUUM`)
		require.NoError(t, err)
		require.NoError(t, raw.Close())
		s, err = wsstore.Open(context.Background(), dir, wsstore.Options{})
		require.NoError(t, err)
		t.Cleanup(func() {
			storetest.RequireSound(t, s)
			require.NoError(t, s.Close())
		})
		ok, err := s.DB.AutoVacuum(context.Background())
		require.NoError(t, err)
		require.False(t, ok)

		rep, err := s.Vacuum(context.Background())

		require.NoError(t, err)
		assert.Equal(t, wsstore.VacuumFull, rep.Mode)
		ok, err = s.DB.AutoVacuum(context.Background())
		require.NoError(t, err)
		assert.True(t, ok, "the rebuild switches incremental vacuum on")
	})
	t.Run("ErrCanceledBetweenSteps", func(t *testing.T) {
		// A context that ends between two steps stops the vacuum with
		// store.canceled, a *wserr.Error as everywhere else; the steps
		// done stay done.
		e := newEnv(t)
		dropBig(e)
		ctx, cancel := context.WithCancel(e.ctx)
		defer cancel()
		rep, err := e.s.VacuumWith(ctx, wsstore.VacuumOptions{Pages: 16, Progress: func(steps int, left int64) {
			if steps == 2 {
				cancel()
			}
		}})

		_, coded := errors.AsType[*wserr.Error](err)
		assert.True(t, coded, "%v", err)
		assert.Equal(t, wserr.Canceled, wserr.CodeOf(err), "%v", err)
		assert.True(t, errors.Is(err, context.Canceled), "the cause stays in the chain: %v", err)
		assert.Equal(t, 2, rep.Steps)
	})
}
