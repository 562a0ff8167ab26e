package httpapi_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/actors"
	"github.com/wsstore/wsstore/httpapi"
	"github.com/wsstore/wsstore/internal/storetest"
)

// cutShort uploads a 24 MiB file to actor alice, starts a GET of url
// (which streams it), and once 64 KiB came removes and collects the file;
// it returns what the rest of the body gave: the bytes and the error of a
// body ended short.
func cutShort(t *testing.T, s *server, url string) (int64, error) {
	t.Helper()
	ctx := context.Background()
	_, err := s.st.Actors.Upload(ctx, "alice", "big.bin", storetest.Text(cutSize))
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+s.full)
	resp, err := s.srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	_, err = io.ReadFull(resp.Body, make([]byte, 64<<10))
	require.NoError(t, err)

	_, err = s.st.Actors.Delete(ctx, "alice", "big.bin")
	require.NoError(t, err)
	_, _, err = s.st.ActorGC(ctx, actors.GCOptions{}, wsstore.GCOptions{Grace: -1})
	require.NoError(t, err)
	return io.Copy(io.Discard, resp.Body)
}

const cutSize = 24 << 20

// TestDownloadCutShortIsLogged: a download whose file is removed and
// collected while it streams is cut short of its Content-Length (the
// status is already out), and the access log says why.
func TestDownloadCutShortIsLogged(t *testing.T) {
	var log storetest.Buffer
	s := newServer(t, httpapi.Options{AccessLog: &log})
	n, err := cutShort(t, s, s.url("/workspace/file", "actor", "alice", "path", "big.bin"))
	assert.Error(t, err, "the body ends short of its length")
	assert.Less(t, n+64<<10, int64(cutSize))

	require.Eventually(t, func() bool { return strings.Contains(log.String(), "aborted=") }, 5*time.Second, 10*time.Millisecond)
	assert.Contains(t, log.String(), "store.conflict", "the log line names the cause")
}

// TestExportCutShortIsLogged: an export whose actor's file is removed and
// collected while it streams is cut short (the status is already out),
// and the access log says why, as for a download.
func TestExportCutShortIsLogged(t *testing.T) {
	var log storetest.Buffer
	s := newServer(t, httpapi.Options{AccessLog: &log})
	_, err := cutShort(t, s, s.url("/v1/export", "actor", "alice"))
	assert.Error(t, err, "the archive ends short")

	require.Eventually(t, func() bool { return strings.Contains(log.String(), "/v1/export") }, 5*time.Second, 10*time.Millisecond)
	assert.Contains(t, log.String(), "aborted=", "the log line says the export was cut short")
	assert.Contains(t, log.String(), "store.conflict", "the log line names the cause")
}
