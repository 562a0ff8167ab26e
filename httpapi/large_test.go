package httpapi_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/httpapi"
	"github.com/wsstore/wsstore/internal/storetest"
)

var huge = flag.Bool("httpapi.huge", false, "upload and download 1 GiB instead of 256 MiB")

// TestLargeUploadDownload streams a generated file up and down through the
// loopback listener; neither side ever holds it, and the live heap grows
// by a bounded amount whatever its size.
func TestLargeUploadDownload(t *testing.T) {
	if testing.Short() {
		t.Skip("streams 256 MiB")
	}
	size := int64(256 << 20)
	if *huge {
		size = 1 << 30
	}
	s := newServer(t, httpapi.Options{})
	u := s.url("/workspace/upload", "actor", "alice", "path", "data/big.log")

	var resp *http.Response
	var body []byte
	growth := storetest.HeapGrowth(func() {
		req, err := http.NewRequest(http.MethodPost, u, storetest.Text(size))
		require.NoError(t, err)
		req.ContentLength = -1 // chunked: the size is not announced
		req.Header.Set("Authorization", "Bearer "+s.full)
		resp, err = s.srv.Client().Do(req)
		require.NoError(t, err)
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
	})
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	assert.Less(t, growth, uint64(64<<20), "the upload streams")
	t.Logf("upload: heap grew by at most %d MiB", growth>>20)

	var cw *compareWriter
	growth = storetest.HeapGrowth(func() {
		req, err := http.NewRequest(http.MethodGet, s.url("/workspace/file", "actor", "alice", "path", "data/big.log"), nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+s.full)
		resp, err = s.srv.Client().Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		cw = &compareWriter{want: storetest.Text(size)}
		_, err = io.Copy(cw, resp.Body)
		require.NoError(t, err)
	})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, strconv.FormatInt(size, 10), resp.Header.Get("Content-Length"))
	assert.Equal(t, size, cw.n)
	assert.False(t, cw.differ, "the downloaded bytes are the uploaded ones")
	assert.Less(t, growth, uint64(64<<20), "the download streams")
	t.Logf("download: heap grew by at most %d MiB", growth>>20)
}

// slowReader yields n pieces of a KiB, one every pause.
type slowReader struct {
	n     int
	pause time.Duration
}

func (s *slowReader) Read(b []byte) (int, error) {
	if s.n == 0 {
		return 0, io.EOF
	}
	time.Sleep(s.pause)
	s.n--
	return copy(b, bytes.Repeat([]byte("x"), min(len(b), 1024))), nil
}

// TestSlowUploadOutlastsTimeouts: an upload that keeps flowing is taken,
// and answered, however far it outlasts the server's read and write
// timeouts, which the server set when the request arrived.
func TestSlowUploadOutlastsTimeouts(t *testing.T) {
	if testing.Short() {
		t.Skip("takes a second and a half")
	}
	s := newServer(t, httpapi.Options{IOTimeout: 2 * time.Second})
	s.srv.Close()
	srv := httptest.NewUnstartedServer(s.h)
	srv.Config.ReadTimeout, srv.Config.WriteTimeout = 300*time.Millisecond, 300*time.Millisecond
	srv.Start()
	defer srv.Close()
	s.srv = srv
	req, err := http.NewRequest(http.MethodPost, s.url("/workspace/upload", "actor", "alice", "path", "slow.txt"), &slowReader{n: 15, pause: 100 * time.Millisecond})
	require.NoError(t, err)
	req.ContentLength = -1
	req.Header.Set("Authorization", "Bearer "+s.full)
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	assert.Contains(t, string(b), `"bytes":15360`)
}

// TestStalledUploadIsAnswered: an upload whose body stops flowing is cut
// after the read window (ReadIOTimeout, `wsctl serve --read-timeout`), not
// IOTimeout's longer one, and answered with a coded error: the answer has
// its own write window after the read gives up. Nothing is stored.
func TestStalledUploadIsAnswered(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a read window")
	}
	s := newServer(t, httpapi.Options{IOTimeout: time.Minute, ReadIOTimeout: 300 * time.Millisecond, WriteIOTimeout: 5 * time.Second})
	s.srv.Close()
	srv := httptest.NewUnstartedServer(s.h)
	srv.Config.ReadTimeout, srv.Config.WriteTimeout = 300*time.Millisecond, 300*time.Millisecond
	srv.Start()
	defer srv.Close()
	s.srv = srv
	pr, pw := io.Pipe()
	go func() { _, _ = pw.Write([]byte("abc")) }() // then nothing more
	// Far past the read window, far short of IOTimeout: the client gives
	// up on its body then (a request cancelled while its body blocks is
	// not answered).
	giveUp := time.AfterFunc(15*time.Second, func() { pw.CloseWithError(errors.New("the upload was not answered")) })
	defer giveUp.Stop()
	defer pw.Close()
	req, err := http.NewRequest(http.MethodPost, s.url("/workspace/upload", "actor", "alice", "path", "stalled.txt"), pr)
	require.NoError(t, err)
	req.ContentLength = 100
	req.Header.Set("Authorization", "Bearer "+s.full)
	resp, err := srv.Client().Do(req)
	require.NoError(t, err, "the stalled upload is answered")
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.GreaterOrEqual(t, resp.StatusCode, 400, "%s", b)
	assert.Contains(t, string(b), `"code"`)
	_, _, err = s.st.Actors.Download(context.Background(), "alice", "stalled.txt")
	assert.Error(t, err, "nothing stored")
}

// TestOneDirectionWithoutDeadline: `wsctl serve` with --read-timeout 0 or
// --write-timeout 0 sets that direction no deadline (its window
// negative) and keeps the other's. With no read deadline, an upload that
// keeps flowing past the write timeout is still answered (its answer's
// write deadline moves with the bytes); with no write deadline, a
// stalled upload's error is answered (no write deadline is set for it).
// The upload flows for 1.5 s, past a write timeout of 1 s, which leaves
// the store a second after the last bytes to commit them and answer.
func TestOneDirectionWithoutDeadline(t *testing.T) {
	if testing.Short() {
		t.Skip("takes a few seconds")
	}
	for _, tc := range []struct {
		name          string
		read, write   time.Duration // the server's timeouts
		body          io.Reader
		status, bytes int
	}{
		{"NoReadDeadline", 0, time.Second, &slowReader{n: 15, pause: 100 * time.Millisecond}, http.StatusOK, 15360},
		{"NoWriteDeadline", 300 * time.Millisecond, 0, nil, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			window := func(d time.Duration) time.Duration { // serve's stallWindow
				if d <= 0 {
					return -1
				}
				return d
			}
			s := newServer(t, httpapi.Options{ReadIOTimeout: window(tc.read), WriteIOTimeout: window(tc.write)})
			s.srv.Close()
			srv := httptest.NewUnstartedServer(s.h)
			srv.Config.ReadTimeout, srv.Config.WriteTimeout = tc.read, tc.write
			srv.Start()
			defer srv.Close()
			s.srv = srv
			body, length := tc.body, int64(-1)
			if body == nil { // a stalled upload
				pr, pw := io.Pipe()
				go func() { _, _ = pw.Write([]byte("abc")) }()
				giveUp := time.AfterFunc(10*time.Second, func() { pw.CloseWithError(errors.New("the upload was not answered")) })
				defer giveUp.Stop()
				defer pw.Close()
				body, length = pr, 100
			}
			req, err := http.NewRequest(http.MethodPost, s.url("/workspace/upload", "actor", "alice", "path", "f.txt"), body)
			require.NoError(t, err)
			req.ContentLength = length
			req.Header.Set("Authorization", "Bearer "+s.full)
			resp, err := srv.Client().Do(req)
			require.NoError(t, err, "the upload is answered")
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if tc.status != 0 {
				require.Equal(t, tc.status, resp.StatusCode, "%s", b)
				assert.Contains(t, string(b), `"bytes":`+strconv.Itoa(tc.bytes))
				return
			}
			assert.GreaterOrEqual(t, resp.StatusCode, 400, "%s", b)
			assert.Contains(t, string(b), `"code"`)
		})
	}
}

// TestLongPollOutlastsTheWriteTimeout: a long poll that waits its whole
// wait, longer than the server's write timeout (`wsctl serve
// --write-timeout`), is still answered: its answer has the write window
// after the wait, as a download's has after its last bytes.
func TestLongPollOutlastsTheWriteTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("waits a second")
	}
	s := newServer(t, httpapi.Options{ReadIOTimeout: 300 * time.Millisecond, WriteIOTimeout: 300 * time.Millisecond})
	s.srv.Close()
	srv := httptest.NewUnstartedServer(s.h)
	srv.Config.ReadTimeout, srv.Config.WriteTimeout = 300*time.Millisecond, 300*time.Millisecond
	srv.Start()
	defer srv.Close()
	s.srv = srv
	s.mustOp(map[string]any{"op": "run.create", "runId": "r1", "chat": map[string]any{"kind": "chat", "stableChatId": "c-r1"}})
	req, err := http.NewRequest(http.MethodGet, s.url("/v1/runs/r1/events/follow", "afterSeq", "1000", "wait", "1s"), nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+s.full)
	resp, err := srv.Client().Do(req)
	require.NoError(t, err, "the long poll is answered")
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	assert.JSONEq(t, `{"events":[]}`, string(b))
}
