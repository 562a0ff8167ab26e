package httpapi_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/actors"
	"github.com/wsstore/wsstore/archive"
	"github.com/wsstore/wsstore/httpapi"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/protocol"
	"github.com/wsstore/wsstore/tokens"
)

// slowWork is how long the slow backends below take, past writeTimeout.
const (
	writeTimeout = 300 * time.Millisecond
	slowWork     = 800 * time.Millisecond
)

// slowCollector is a Collector whose collection takes slowWork.
type slowCollector struct{ httpapi.Collector }

func (c slowCollector) ActorGC(ctx context.Context, opt actors.GCOptions, gc wsstore.GCOptions) (actors.GCReport, wsstore.GCReport, error) {
	time.Sleep(slowWork)
	return c.Collector.ActorGC(ctx, opt, gc)
}

// slowMaintenance is the ops' maintenance whose gc and fsck take slowWork.
type slowMaintenance struct{ protocol.Maintenance }

func (m slowMaintenance) CollectSteps(ctx context.Context, opt wsstore.GCStepOptions) (wsstore.GCReport, error) {
	time.Sleep(slowWork)
	return m.Maintenance.CollectSteps(ctx, opt)
}

func (m slowMaintenance) Fsck(ctx context.Context, progress func(phase string, done, total int)) (wsstore.FsckReport, error) {
	time.Sleep(slowWork)
	return m.Maintenance.Fsck(ctx, progress)
}

// slowArchiver is an Archiver whose import takes slowWork after it read
// the archive, and whose export takes it before its first byte.
type slowArchiver struct{ httpapi.Archiver }

func (a slowArchiver) Import(ctx context.Context, r io.Reader, opt archive.Options) (archive.Summary, error) {
	sum, err := a.Archiver.Import(ctx, r, opt)
	time.Sleep(slowWork)
	return sum, err
}

func (a slowArchiver) Export(ctx context.Context, w io.Writer, scope archive.Scope, opt archive.Options) (archive.Summary, error) {
	time.Sleep(slowWork)
	return a.Archiver.Export(ctx, w, scope, opt)
}

// timedServer serves b on a listener whose server has writeTimeout as
// its read and write timeouts, as `wsctl serve --read-timeout
// --write-timeout` sets them, with the handler's windows the same.
func timedServer(t *testing.T, b httpapi.Backend, opts httpapi.Options) *httptest.Server {
	t.Helper()
	opts.ReadIOTimeout, opts.WriteIOTimeout = writeTimeout, writeTimeout
	h := mustNew(t, b, opts)
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ReadTimeout, srv.Config.WriteTimeout = writeTimeout, writeTimeout
	srv.Start()
	t.Cleanup(func() { h.Close(); srv.Close() })
	return srv
}

// send sends a request with token and returns the status and the body,
// failing the test when no answer came.
func send(t *testing.T, srv *httptest.Server, token, method, u string, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+u, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := srv.Client().Do(req)
	require.NoError(t, err, "%s %s is answered", method, u)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err, "%s %s is answered whole", method, u)
	return resp.StatusCode, string(b)
}

// TestSlowAnswersOutlastTheWriteTimeout: work that takes longer than the
// server's write timeout (`wsctl serve --write-timeout`) is answered, its
// answer given the write window from when it starts to go out: a store
// collection, gc and fsck ops, an import that takes its time once the
// archive is read, an export slow to start, and a busy store's answer
// after a busy deadline longer than the write timeout.
func TestSlowAnswersOutlastTheWriteTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("waits past write timeouts")
	}
	ctx := context.Background()
	st := storetest.OpenStoreWith(t, wsstore.Options{Index: index.Options{BusyTimeout: 5 * time.Millisecond}})
	_, tok, err := st.Tokens.Create(ctx, tokens.Spec{})
	require.NoError(t, err)
	_, err = st.Actors.Upload(ctx, "alice", "a.md", strings.NewReader("hello"))
	require.NoError(t, err)
	var arc bytes.Buffer
	_, err = st.Archive.Export(ctx, &arc, archive.Scope{Actors: []string{"alice"}}, archive.Options{})
	require.NoError(t, err)

	b := httpapi.FromStore(st)
	b.GC = slowCollector{b.GC}
	b.Protocol.Store = slowMaintenance{b.Protocol.Store}
	b.Archive = slowArchiver{b.Archive}
	srv := timedServer(t, b, httpapi.Options{})
	for _, tc := range []struct {
		name, method, u, body string
		want                  string
	}{
		{"WorkspaceGC", http.MethodPost, "/workspace/gc", "", `"gc":`},
		{"OpGC", http.MethodPost, "/v1/op", `{"op":"gc"}`, `"ok":true`},
		{"OpFsck", http.MethodPost, "/v1/op", `{"op":"fsck"}`, `"ok":true`},
		{"Import", http.MethodPost, "/v1/import", arc.String(), `"unchanged":["actor alice"]`},
		{"Export", http.MethodGet, "/v1/export?actor=alice", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := send(t, srv, tok, tc.method, tc.u, []byte(tc.body))
			require.Equal(t, http.StatusOK, status, "%.300s", body)
			assert.Contains(t, body, tc.want)
		})
	}

	t.Run("Busy", func(t *testing.T) {
		srv := timedServer(t, httpapi.FromStore(st), httpapi.Options{BusyDeadline: slowWork})
		defer storetest.HoldWriteLock(t, filepath.Join(st.Dir, wsstore.DBName))()
		status, body := send(t, srv, tok, http.MethodPost, "/v1/op", []byte(`{"op":"actor.upload","actor":"alice","path":"b.md","content":"b"}`))
		assert.Equal(t, http.StatusServiceUnavailable, status, "%s", body)
		assert.Contains(t, body, `"store.busy"`)
	})
}

// TestStalledDownloadIsCut: a download whose client stops reading is cut
// once it could write nothing for the write window, though the server's
// write deadline is lifted while a request is worked on: the handler
// ends (the access log has its line) and the client's body ends short.
func TestStalledDownloadIsCut(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a write window")
	}
	ctx := context.Background()
	st := storetest.OpenStore(t)
	_, tok, err := st.Tokens.Create(ctx, tokens.Spec{})
	require.NoError(t, err)
	const size = 64 << 20 // past what the sockets' buffers hold
	_, err = st.Actors.Upload(ctx, "alice", "big.bin", storetest.Text(size))
	require.NoError(t, err)
	var log storetest.Buffer
	srv := timedServer(t, httpapi.FromStore(st), httpapi.Options{AccessLog: &log})
	req, err := http.NewRequest(http.MethodGet, srv.URL+"/workspace/file?actor=alice&path=big.bin", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	_, err = io.ReadFull(resp.Body, make([]byte, 64<<10))
	require.NoError(t, err)
	// The client reads nothing more: the server's writes stall.
	require.Eventually(t, func() bool { return strings.Contains(log.String(), "/workspace/file") }, 20*time.Second, 20*time.Millisecond,
		"the stalled download is cut")
	assert.Contains(t, log.String(), "aborted=")
	n, err := io.Copy(io.Discard, resp.Body)
	assert.Error(t, err, "the body ends short of its length")
	assert.Less(t, n, int64(size-64<<10))
}
