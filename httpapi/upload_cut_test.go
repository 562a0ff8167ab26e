package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/httpapi"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/wserr"
)

// storedObjects counts the store's blob and chunk rows.
func storedObjects(t *testing.T, s *server) int {
	var n int
	require.NoError(t, s.st.DB.View(context.Background(), func(tx *index.Tx) error {
		return tx.GetContext(context.Background(), &n, `SELECT (SELECT count(*) FROM blobs) + (SELECT count(*) FROM chunks)`)
	}))
	return n
}

// TestMultipartCutShortIsRefused: a multipart upload whose connection
// ends after the file part but before the form's closing boundary (short
// of its Content-Length) is 400, as a raw body cut short is, and stores
// no file.
func TestMultipartCutShortIsRefused(t *testing.T) {
	s := newServer(t, httpapi.Options{})
	const b = "XyZ"
	body := "--" + b + "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.txt\"\r\n\r\nhello\r\n--" + b + "\r\nContent-Disp"
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.srv.URL, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	fmt.Fprintf(conn, "POST /workspace/upload?actor=alice&path=cut.txt HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: multipart/form-data; boundary=%s\r\nContent-Length: %d\r\n\r\n%s", s.full, b, len(body)+500, body)
	require.NoError(t, conn.(*net.TCPConn).CloseWrite())
	require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	_, err = s.st.Actors.Stat(t.Context(), "alice", "cut.txt")
	assert.True(t, wserr.Is(err, wserr.FileNotFound), "nothing stored from a cut body: %v", err)

	// The same form whole is stored.
	whole := strings.TrimSuffix(body, "Content-Disp") + "Content-Disposition: form-data; name=\"note\"\r\n\r\nx\r\n--" + b + "--\r\n"
	r, out := s.do(http.MethodPost, s.url("/workspace/upload", "actor", "alice", "path", "cut.txt"), s.full, strings.NewReader(whole),
		"Content-Type", "multipart/form-data; boundary="+b)
	require.Equal(t, http.StatusOK, r.StatusCode, "%s", out)
}

// TestUploadDeclaredPastTheLimitReadsNothing: a body whose Content-Length
// is past MaxUploadBytes is refused as announced: 422, and nothing of it
// stored, where reading it up to the limit left chunks for gc.
func TestUploadDeclaredPastTheLimitReadsNothing(t *testing.T) {
	s := newServer(t, httpapi.Options{MaxUploadBytes: 5 << 20})
	content, err := io.ReadAll(storetest.Text(6 << 20))
	require.NoError(t, err)
	before := storedObjects(t, s)
	resp, b := s.do(http.MethodPost, s.url("/workspace/upload", "actor", "a", "path", "big.log"), s.full, bytes.NewReader(content))
	assert.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	assert.Equal(t, "workspace.size_limit_exceeded", errCode(t, b))
	assert.Equal(t, before, storedObjects(t, s), "nothing stored")
}

// TestTransfersAreBounded: with MaxTransfers 2, two uploads in progress
// make a third wait its turn; past BusyDeadline it is answered 503
// store.busy with nothing read, and once a transfer ends the next is
// served. Small op requests are not held up.
func TestTransfersAreBounded(t *testing.T) {
	s := newServer(t, httpapi.Options{MaxTransfers: 2, BusyDeadline: 200 * time.Millisecond})
	type result struct {
		status int
		body   []byte
	}
	var writers []*io.PipeWriter
	done := make(chan result, 2)
	for i := range 2 {
		pr, pw := io.Pipe()
		writers = append(writers, pw)
		go func() {
			req, err := http.NewRequest(http.MethodPost, s.url("/workspace/upload", "actor", "a", "path", fmt.Sprintf("slow%d.txt", i)), pr)
			if err != nil {
				done <- result{}
				return
			}
			req.Header.Set("Authorization", "Bearer "+s.full)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				done <- result{}
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			done <- result{resp.StatusCode, b}
		}()
		_, err := pw.Write([]byte("started\n")) // the handler holds its turn once it reads
		require.NoError(t, err)
	}

	resp, b := s.do(http.MethodPost, s.url("/workspace/upload", "actor", "a", "path", "third.txt"), s.full, strings.NewReader("third\n"))
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "%s", b)
	assert.Equal(t, "store.busy", errCode(t, b))
	assert.Equal(t, "1", resp.Header.Get("Retry-After"))
	resp, b = s.do(http.MethodGet, s.url("/workspace/file", "actor", "a", "path", "third.txt"), s.full, nil)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "a download is a transfer too: %s", b)
	op := s.okJSON(http.MethodPost, s.url("/v1/op"), strings.NewReader(`{"op":"actor.stats","actor":"a"}`))
	assert.NotNil(t, op["result"], "a small op is served")

	require.NoError(t, writers[0].Close())
	r := <-done
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	resp, b = s.do(http.MethodPost, s.url("/workspace/upload", "actor", "a", "path", "third.txt"), s.full, strings.NewReader("third\n"))
	assert.Equal(t, http.StatusOK, resp.StatusCode, "a turn came free: %s", b)
	require.NoError(t, writers[1].Close())
	r = <-done
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
}
