package runs_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/checkpoint"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

// stepClock is a fake clock that advances one millisecond per reading, so
// timestamps are deterministic and strictly increasing.
type stepClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Millisecond)
	return c.t
}

// lifecycleEnv is a store with a run service on a fake clock.
type lifecycleEnv struct {
	t   testing.TB
	ctx context.Context
	svc *runs.Service
}

func newLifecycleEnv(t *testing.T) *lifecycleEnv { return newLifecycleEnvB(t) }

func newLifecycleEnvB(t testing.TB) *lifecycleEnv {
	t.Helper()
	clock := &stepClock{t: time.Date(2026, 4, 26, 0, 0, 0, 0, time.UTC)}
	db, blobs := storetest.OpenCAS(t, cas.Options{Now: clock.Now})
	n := 0
	svc := runs.New(db, blobs, runs.Options{Now: clock.Now, NewRunID: func() string {
		n++
		return "run_" + string(rune('a'+n-1))
	}})
	return &lifecycleEnv{t: t, ctx: context.Background(), svc: svc}
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
	var n int
	require.NoError(e.t, e.svc.DB().View(e.ctx, func(tx *index.Tx) error {
		return tx.GetContext(e.ctx, &n, `SELECT count(*) FROM `+table)
	}))
	return n
}

func checkpointSeq(id string) (int64, error) { return checkpoint.ParseRef(id) }
