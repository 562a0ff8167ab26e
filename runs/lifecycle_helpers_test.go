package runs_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/checkpoint"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

// openStore opens the whole store every runs test works on (checked by
// storetest when the test ends) on a fake clock; opts configure its run
// service.
func openStore(tb testing.TB, opts runs.Options) (*wsstore.Store, *storetest.Clock) {
	tb.Helper()
	clock := storetest.NewClock()
	return storetest.OpenStoreWith(tb, wsstore.Options{Now: clock.Now, Runs: opts}), clock
}

// deps are st's parts, for another Service on the same store (as from
// another process, with other options, or over parts that fail on
// purpose).
func deps(st *wsstore.Store) runs.Deps {
	return runs.Deps{DB: st.DB, Blobs: st.Blobs, Trees: st.Trees, Journal: st.Journal, Checkpoints: st.Checkpoints}
}

// lifecycleEnv is a store with a run service on a fake clock; the run
// service names runs run_a, run_b, … when a request names none.
type lifecycleEnv struct {
	t     testing.TB
	ctx   context.Context
	st    *wsstore.Store
	clock *storetest.Clock
	svc   *runs.Service
}

func newLifecycleEnv(t *testing.T) *lifecycleEnv { return newLifecycleEnvB(t) }

func newLifecycleEnvB(t testing.TB) *lifecycleEnv { return newLifecycleEnvWith(t, wsstore.Options{}) }

// newLifecycleEnvWith is newLifecycleEnv on a store opened with opts
// (its clock and run ids are the env's).
func newLifecycleEnvWith(t testing.TB, opts wsstore.Options) *lifecycleEnv {
	t.Helper()
	n := 0
	clock := storetest.NewClock()
	opts.Now = clock.Now
	opts.Runs.NewRunID = func() string {
		n++
		return "run_" + string(rune('a'+n-1))
	}
	st := storetest.OpenStoreWith(t, opts)
	return &lifecycleEnv{t: t, ctx: context.Background(), st: st, clock: clock, svc: st.Runs}
}

// service returns another Service on e's store and clock, with opts.
func (e *lifecycleEnv) service(opts runs.Options) *runs.Service {
	opts.Now = e.clock.Now
	return runs.New(deps(e.st), opts)
}

func (e *lifecycleEnv) create(chat string, req runs.CreateRequest) runs.Run {
	e.t.Helper()
	req.Chat = runs.ChatKey{Kind: "character", StableChatID: chat}
	r, err := e.svc.CreateRun(e.ctx, req)
	require.NoError(e.t, err)
	return r
}

func (e *lifecycleEnv) write(runID, path, content string) vfs.FileInfo {
	e.t.Helper()
	fi, err := e.svc.Workspace(runID, runs.ModelScope).Write(e.ctx, vfs.MustPath(path), []byte(content), vfs.WriteOptions{})
	require.NoError(e.t, err)
	return fi
}

func (e *lifecycleEnv) read(ws *runs.Workspace, path string) string {
	e.t.Helper()
	res, err := ws.Read(e.ctx, vfs.MustPath(path), vfs.ReadOptions{})
	require.NoError(e.t, err)
	return string(res.Content)
}

func (e *lifecycleEnv) count(table string) int {
	e.t.Helper()
	return storetest.CountRows(e.t, e.st.DB, table)
}

func checkpointSeq(id string) (int64, error) { return checkpoint.ParseRef(id) }
