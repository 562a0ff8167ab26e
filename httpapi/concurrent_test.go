package httpapi_test

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/httpapi"
)

// soak runs TestConcurrentClients at the full size: 32 clients
// for 30 seconds.
var soak = flag.Bool("httpapi.soak", false, "run the concurrent-clients test with 32 clients for 30 s")

// TestConcurrentClients: 16 clients (32 with
// -httpapi.soak) on loopback, for 3 s (30 s), mix
// uploads, downloads, listings, op writes and reads, and gc. Every
// acknowledged change is there at the end, every request succeeds, and
// none is answered busy.
func TestConcurrentClients(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for seconds")
	}
	clients, span := 16, 3*time.Second
	if *soak {
		clients, span = 32, 30*time.Second
	}
	s := newServer(t, httpapi.Options{})
	for r := range 4 {
		s.newRun(fmt.Sprintf("r%d", r))
	}
	type ack struct{ actor, path, content string }
	type failure struct {
		what   string
		status int
		body   string
	}
	var mu sync.Mutex
	var acks []ack
	var opAcks []ack // run id, path, content
	var failures []failure
	fail := func(what string, status int, body []byte) {
		mu.Lock()
		failures = append(failures, failure{what, status, string(body)})
		mu.Unlock()
	}
	client := s.srv.Client()
	do := func(method, u string, body io.Reader) (int, []byte) {
		req, err := http.NewRequest(method, u, body)
		if err != nil {
			return 0, []byte(err.Error())
		}
		req.Header.Set("Authorization", "Bearer "+s.full)
		resp, err := client.Do(req)
		if err != nil {
			return 0, []byte(err.Error())
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	stop := time.Now().Add(span)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			actor := fmt.Sprintf("actor%d", c%4)
			run := fmt.Sprintf("r%d", c%4)
			var mine []ack
			for n := 0; time.Now().Before(stop); n++ {
				switch {
				case n%25 == 24:
					u := s.url("/workspace/gc", "actor", actor)
					if c%2 == 0 {
						u = s.url("/workspace/gc")
					}
					if st, b := do(http.MethodPost, u, nil); st != http.StatusOK {
						fail("gc", st, b)
					}
				case n%5 == 4:
					path := fmt.Sprintf("output/c%d/%d.md", c, n)
					content := fmt.Sprintf("op %d %d", c, n)
					line := fmt.Sprintf(`{"op":"write","runId":%q,"path":%q,"content":%q}`, run, path, content)
					if st, b := do(http.MethodPost, s.url("/v1/op"), strings.NewReader(line)); st != http.StatusOK {
						fail("op write", st, b)
						continue
					}
					mu.Lock()
					opAcks = append(opAcks, ack{run, path, content})
					mu.Unlock()
				case n%3 == 2 && len(mine) > 0:
					a := mine[n%len(mine)]
					st, b := do(http.MethodGet, s.url("/workspace/file", "actor", a.actor, "path", a.path), nil)
					if st != http.StatusOK || string(b) != a.content {
						fail("download "+a.path, st, b)
					}
					if st, b := do(http.MethodGet, s.url("/workspace/files", "actor", actor, "depth", "3"), nil); st != http.StatusOK {
						fail("files", st, b)
					}
				default:
					a := ack{actor, fmt.Sprintf("c%d/%d.txt", c, n), fmt.Sprintf("client %d item %d", c, n)}
					st, b := do(http.MethodPost, s.url("/workspace/upload", "actor", a.actor, "path", a.path), strings.NewReader(a.content))
					if st != http.StatusOK {
						fail("upload", st, b)
						continue
					}
					mine = append(mine, a)
				}
			}
			mu.Lock()
			acks = append(acks, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	for _, f := range failures {
		t.Errorf("%s: %d %s", f.what, f.status, f.body)
	}
	require.Empty(t, failures, "no request failed, none was answered busy")
	require.NotEmpty(t, acks)
	require.NotEmpty(t, opAcks)
	for _, a := range acks {
		st, b := do(http.MethodGet, s.url("/workspace/file", "actor", a.actor, "path", a.path), nil)
		require.Equal(t, http.StatusOK, st, "%s/%s lost", a.actor, a.path)
		assert.Equal(t, a.content, string(b))
	}
	for _, a := range opAcks {
		_, b := do(http.MethodGet, s.url("/v1/runs/"+a.actor+"/file", "path", a.path), nil)
		assert.Equal(t, a.content, string(b), "%s %s lost", a.actor, a.path)
	}
	t.Logf("%d uploads and %d op writes acknowledged and found", len(acks), len(opAcks))
}
