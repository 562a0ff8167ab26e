package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/httpapi"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/tokens"
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

// heldBody is an upload's body that says when the handler first reads
// it (so holds its turn) and then waits for release before its content.
type heldBody struct {
	reading, release chan struct{}
	once             sync.Once
	r                io.Reader
}

func (b *heldBody) Read(p []byte) (int, error) {
	b.once.Do(func() { close(b.reading); <-b.release })
	return b.r.Read(p)
}

// TestTransfersAreBounded: with MaxTransfers 2, two uploads reading their
// bodies make a third wait its turn; past BusyDeadline it is answered 503
// store.busy with nothing read, a download too, and once a transfer ends
// the next is served. Small op requests are not held up.
func TestTransfersAreBounded(t *testing.T) {
	s := newServer(t, httpapi.Options{MaxTransfers: 2, BusyDeadline: 200 * time.Millisecond})
	serve := func(method, u string, body io.Reader) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, u, body)
		r.Header.Set("Authorization", "Bearer "+s.full)
		rec := httptest.NewRecorder()
		s.h.ServeHTTP(rec, r)
		return rec
	}
	s.okJSON(http.MethodPost, s.url("/workspace/upload", "actor", "a", "path", "f.txt"), strings.NewReader("f\n"))
	var held []*heldBody
	done := make(chan int, 2)
	for i := range 2 {
		b := &heldBody{reading: make(chan struct{}), release: make(chan struct{}), r: strings.NewReader("slow\n")}
		held = append(held, b)
		go func() {
			done <- serve(http.MethodPost, fmt.Sprintf("/workspace/upload?actor=a&path=slow%d.txt", i), b).Code
		}()
		<-b.reading // its handler holds a turn
	}

	third := strings.NewReader("third\n")
	rec := serve(http.MethodPost, "/workspace/upload?actor=a&path=third.txt", third)
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code, "%s", rec.Body)
	assert.Equal(t, "store.busy", errCode(t, rec.Body.Bytes()))
	assert.Equal(t, "1", rec.Header().Get("Retry-After"))
	assert.Equal(t, 6, third.Len(), "nothing of it read")
	rec = serve(http.MethodGet, "/workspace/file?actor=a&path=f.txt", nil)
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code, "a download is a transfer too: %s", rec.Body)
	rec = serve(http.MethodPost, "/v1/op", strings.NewReader(`{"op":"actor.stats","actor":"a"}`))
	assert.Equal(t, http.StatusOK, rec.Code, "a small op is served: %s", rec.Body)

	close(held[0].release)
	require.Equal(t, http.StatusOK, <-done)
	rec = serve(http.MethodPost, "/workspace/upload?actor=a&path=third.txt", strings.NewReader("third\n"))
	assert.Equal(t, http.StatusOK, rec.Code, "a turn came free: %s", rec.Body)
	close(held[1].release)
	require.Equal(t, http.StatusOK, <-done)
}

// TestTransferTurnComesAfterTheToken: while every transfer's turn is
// taken, a transfer without a valid token is 401 and one its token may
// not make 403, at once, as when the server is idle: never queued for a
// turn and answered 503 store.busy, which says to try again.
func TestTransferTurnComesAfterTheToken(t *testing.T) {
	s := newServer(t, httpapi.Options{MaxTransfers: 1, BusyDeadline: 5 * time.Second})
	ro := s.token(tokens.Spec{ReadOnly: true})
	bob := s.token(tokens.Spec{Actors: []string{"bob"}})
	s.okJSON(http.MethodPost, s.url("/workspace/upload", "actor", "a", "path", "f.txt"), strings.NewReader("f\n"))
	serve := func(method, u, token string, body io.Reader) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, u, body)
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		s.h.ServeHTTP(rec, r)
		return rec
	}
	held := &heldBody{reading: make(chan struct{}), release: make(chan struct{}), r: strings.NewReader("slow\n")}
	done := make(chan int, 1)
	go func() { done <- serve(http.MethodPost, "/workspace/upload?actor=a&path=slow.txt", s.full, held).Code }()
	<-held.reading // it holds the one turn

	for _, tc := range []struct {
		name, method, u, token string
		body                   io.Reader
		code                   int
	}{
		{"DownloadWithoutToken", http.MethodGet, "/workspace/file?actor=a&path=f.txt", "", nil, http.StatusUnauthorized},
		{"UploadWithoutToken", http.MethodPost, "/workspace/upload?actor=a&path=g.txt", "", strings.NewReader("g"), http.StatusUnauthorized},
		{"ExportWithoutToken", http.MethodGet, "/v1/export?all=true", "", nil, http.StatusUnauthorized},
		{"ImportWithoutToken", http.MethodPost, "/v1/import", "", strings.NewReader("x"), http.StatusUnauthorized},
		{"RunFileWithoutToken", http.MethodGet, "/v1/runs/r/file?path=x", "", nil, http.StatusUnauthorized},
		{"ReadOnlyUpload", http.MethodPost, "/workspace/upload?actor=a&path=g.txt", ro, strings.NewReader("g"), http.StatusForbidden},
		{"OtherActorsDownload", http.MethodGet, "/workspace/file?actor=a&path=f.txt", bob, nil, http.StatusForbidden},
		{"ReadOnlyImport", http.MethodPost, "/v1/import", ro, strings.NewReader("x"), http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			rec := serve(tc.method, tc.u, tc.token, tc.body)
			assert.Equal(t, tc.code, rec.Code, "%s", rec.Body)
			assert.Less(t, time.Since(start), 2*time.Second, "answered without waiting for a turn")
		})
	}
	close(held.release)
	require.Equal(t, http.StatusOK, <-done)
}

// TestContentOpsAreTransfers: an op whose answer holds a file's content
// (actor.download, read, diff, …) holds it whole, encoded, however small
// its request: it is served in turn as a download is, so with every turn
// taken it waits, then is answered 503 store.busy as an op's answer,
// while an op that answers a few fields is served at once.
func TestContentOpsAreTransfers(t *testing.T) {
	s := newServer(t, httpapi.Options{MaxTransfers: 1, BusyDeadline: 200 * time.Millisecond})
	s.okJSON(http.MethodPost, s.url("/workspace/upload", "actor", "a", "path", "f.txt"), strings.NewReader("f\n"))
	serve := func(method, u string, body io.Reader) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, u, body)
		r.Header.Set("Authorization", "Bearer "+s.full)
		rec := httptest.NewRecorder()
		s.h.ServeHTTP(rec, r)
		return rec
	}
	held := &heldBody{reading: make(chan struct{}), release: make(chan struct{}), r: strings.NewReader("slow\n")}
	done := make(chan int, 1)
	go func() { done <- serve(http.MethodPost, "/workspace/upload?actor=a&path=slow.txt", held).Code }()
	<-held.reading // it holds the one turn

	rec := serve(http.MethodPost, "/v1/op", strings.NewReader(`{"op":"actor.download","id":7,"actor":"a","path":"f.txt"}`))
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code, "%s", rec.Body)
	assert.Equal(t, "1", rec.Header().Get("Retry-After"))
	assert.JSONEq(t, `{"op":"actor.download","id":7,"ok":false,"error":{"code":"store.busy","message":"this server serves 1 transfers at once (--max-transfers), all in progress: try again"}}`, rec.Body.String())
	rec = serve(http.MethodPost, "/v1/op", strings.NewReader(`{"op":"actor.stats","actor":"a"}`))
	assert.Equal(t, http.StatusOK, rec.Code, "an op that answers a few fields is served: %s", rec.Body)

	close(held.release)
	require.Equal(t, http.StatusOK, <-done)
	rec = serve(http.MethodPost, "/v1/op", strings.NewReader(`{"op":"actor.download","actor":"a","path":"f.txt"}`))
	assert.Equal(t, http.StatusOK, rec.Code, "a turn came free: %s", rec.Body)
}
