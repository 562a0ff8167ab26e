package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/internal/storetest"
)

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func TestToken(t *testing.T) {
	c := newCLI(t)
	out := c.ok("token", "create", "--actor", "alice", "--read-only", "--name", "viewer")
	tok := lastLine(out)
	assert.True(t, strings.HasPrefix(tok, "wst_"), out)
	assert.NotContains(t, tok, " ", "the token alone on its last line")
	var ls []struct {
		ID       string   `json:"id"`
		Name     string   `json:"name"`
		Actors   []string `json:"actors"`
		ReadOnly bool     `json:"readOnly"`
		Revoked  *string  `json:"revoked"`
	}
	c.jsonOut(&ls, "token", "ls")
	require.Len(t, ls, 1)
	assert.Equal(t, []string{"alice"}, ls[0].Actors)
	assert.True(t, ls[0].ReadOnly)
	assert.Nil(t, ls[0].Revoked)
	assert.NotContains(t, c.ok("token", "ls"), tok[len(tok)-20:], "ls never shows a secret")
	c.ok("token", "revoke", ls[0].ID)
	c.jsonOut(&ls, "token", "ls")
	assert.NotNil(t, ls[0].Revoked)
	c.fails(3, "token", "revoke", "nope")
	assert.Contains(t, c.fails(2, "token", "create", "--actor", "../x"), "wsctl.invalid_argument")
}

// TestTokenExpires: a token created with --expires lists its expiry and is
// refused by wsctl serve once it has passed (401, as a revoked one); one
// created beside it without --expires is served.
func TestTokenExpires(t *testing.T) {
	c := newCLI(t)
	before := time.Now()
	month := lastLine(c.ok("token", "create", "--expires", "30d", "--name", "month"))
	short := lastLine(c.ok("token", "create", "--expires", "1ms", "--name", "short"))
	var ls []struct {
		Name    string     `json:"name"`
		Expires *time.Time `json:"expires"`
	}
	c.jsonOut(&ls, "token", "ls")
	require.Len(t, ls, 2)
	for _, tk := range ls {
		require.NotNil(t, tk.Expires, tk.Name)
		if tk.Name == "month" {
			assert.WithinRange(t, *tk.Expires, before.Add(30*24*time.Hour), time.Now().Add(30*24*time.Hour))
		}
	}
	assert.Contains(t, c.ok("token", "ls"), "(expired)", "the 1 ms token")

	srv := startServe(t, c)
	get := func(tok string) int {
		req, err := http.NewRequest(http.MethodGet, srv.url+"/v1/ops", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	assert.Equal(t, http.StatusOK, get(month))
	assert.Equal(t, http.StatusUnauthorized, get(short), "expired")
}

// TestServeAddressInUse: a --listen address another process holds is
// store.conflict naming it (exit 5), not a usage error: the command line
// is right, the port is taken.
func TestServeAddressInUse(t *testing.T) {
	c := newCLI(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	addr := ln.Addr().String()
	errOut := c.fails(5, "serve", "--listen", addr)
	assert.Contains(t, errOut, "store.conflict")
	assert.Contains(t, errOut, "--listen "+addr+": the address is in use")
}

func TestServeRefusesRemoteWithoutFlag(t *testing.T) {
	c := newCLI(t)
	errOut := c.fails(2, "serve", "--listen", "0.0.0.0:0")
	assert.Contains(t, errOut, "--allow-remote")
	c.fails(2, "serve", "--listen", ":0")
}

// TestServe runs wsctl serve on a loopback port: the --json startup line
// names the address, requests are served and logged, and SIGINT (the
// context) lets the request in flight finish before the server stops.
// serving is a wsctl serve running in the test.
type serving struct {
	url    string
	listen string
	errOut *storetest.Buffer
	cancel context.CancelFunc // interrupts it
	done   chan int           // its exit status, once it ends
}

// startServe runs wsctl serve on c's store on a free loopback port, with
// args, until the test ends or cancel.
func startServe(t *testing.T, c *cli, args ...string) *serving {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	outR, outW := io.Pipe()
	s := &serving{errOut: &storetest.Buffer{}, cancel: cancel, done: make(chan int, 1)}
	go func() {
		code := execute(ctx, c.app(), append([]string{"--store", c.store, "serve", "--listen", "127.0.0.1:0", "--json"}, args...), strings.NewReader(""), outW, s.errOut)
		outW.Close()
		s.done <- code
	}()
	t.Cleanup(cancel)
	line, err := bufio.NewReader(outR).ReadString('\n')
	require.NoError(t, err)
	go io.Copy(io.Discard, outR)
	var start struct{ Listen, URL string }
	require.NoError(t, json.Unmarshal([]byte(line), &start), line)
	s.url, s.listen = start.URL, start.Listen
	return s
}

func TestServe(t *testing.T) {
	c := newCLI(t)
	tok := lastLine(c.ok("token", "create"))
	srv := startServe(t, c)
	assert.True(t, strings.HasPrefix(srv.listen, "127.0.0.1:"))

	resp, err := http.Get(srv.url + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	// An upload in flight when the interrupt comes is finished. The
	// client asks to continue before it sends the body, so the first
	// bytes go only once the server's handler reads them: the request is
	// accepted and in flight when the interrupt comes, however slowly the
	// server got to it.
	bodyR, bodyW := io.Pipe()
	got := make(chan *http.Response, 1)
	continued := make(chan struct{})
	go func() {
		r, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
			Got100Continue: func() { close(continued) },
		}), http.MethodPost, srv.url+"/workspace/upload?actor=alice&path=slow.md", bodyR)
		if !assert.NoError(t, err) {
			close(continued)
			got <- nil
			return
		}
		r.Header.Set("Authorization", "Bearer "+tok)
		r.Header.Set("Expect", "100-continue")
		client := &http.Client{Transport: &http.Transport{ExpectContinueTimeout: time.Hour}}
		resp, err := client.Do(r)
		assert.NoError(t, err)
		got <- resp
	}()
	_, err = bodyW.Write([]byte("first half, "))
	require.NoError(t, err)
	<-continued // the handler reads the body
	srv.cancel()
	time.Sleep(100 * time.Millisecond) // the shutdown has begun
	_, err = bodyW.Write([]byte("second half"))
	require.NoError(t, err)
	require.NoError(t, bodyW.Close())
	resp = <-got
	require.NotNil(t, resp)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, 0, <-srv.done)
	assert.Contains(t, srv.errOut.String(), `"/workspace/upload?actor=alice&path=slow.md" 200`)
	assert.Contains(t, srv.errOut.String(), "stopped")
	assert.Equal(t, "first half, second half", c.ok("actor", "download", "alice", "slow.md"))
}

// TestServeBusyDeadline: a request that finds the store locked by another
// process answers 503 store.busy once --busy-deadline has passed, while
// the lock is still held, rather than waiting out the store's own 30 s
// wait for it.
func TestServeBusyDeadline(t *testing.T) {
	c := newCLI(t)
	tok := lastLine(c.ok("token", "create"))
	srv := startServe(t, c, "--busy-deadline", "300ms")

	ctx := context.Background()
	lock, err := rawDB(t, c).Conn(ctx)
	require.NoError(t, err)
	defer lock.Close()
	_, err = lock.ExecContext(ctx, "BEGIN IMMEDIATE")
	require.NoError(t, err)
	got := make(chan int, 1)
	go func() {
		r, err := http.NewRequest(http.MethodPost, srv.url+"/workspace/upload?actor=alice&path=a.md", strings.NewReader("x"))
		if !assert.NoError(t, err) {
			return
		}
		r.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(r)
		if !assert.NoError(t, err) {
			return
		}
		resp.Body.Close()
		got <- resp.StatusCode
	}()
	var status int
	select {
	case status = <-got:
	case <-time.After(10 * time.Second):
		// Released long after the deadline: a server still waiting
		// then takes the lock and answers 200.
		_, err = lock.ExecContext(ctx, "ROLLBACK")
		require.NoError(t, err)
		status = <-got
	}
	assert.Equal(t, http.StatusServiceUnavailable, status, "answered busy while the lock was held")
	_, _ = lock.ExecContext(ctx, "ROLLBACK")
}

func TestServeRefusesANegativeBusyDeadline(t *testing.T) {
	c := newCLI(t)
	assert.Contains(t, c.fails(2, "serve", "--listen", "127.0.0.1:0", "--busy-deadline", "-1s"), "--busy-deadline")
}

// TestServeHelpListsTheRoutes: `wsctl serve --help` lists every route with
// the query parameters it takes, the listings' paging ones included, and
// README lists the same routes, line for line.
func TestServeHelpListsTheRoutes(t *testing.T) {
	help := newCLI(t).ok("serve", "--help")
	start := strings.Index(help, "  GET    /healthz")
	require.GreaterOrEqual(t, start, 0, "the route list starts with /healthz:\n%s", help)
	routes, _, _ := strings.Cut(help[start:], "\n\n")
	listed := map[string]bool{}
	for _, line := range strings.Split(routes, "\n") {
		if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[1], "/") {
			listed[f[0]+" "+f[1]] = true
		}
	}
	for _, r := range []string{
		"GET /workspace/files?actor=&path=&depth=&after=&limit=",
		"GET /v1/runs/{run}/checkpoints?afterSeq=&limit=",
		"GET /v1/runs/{run}/files?path=&depth=&at=&after=&limit=",
		"GET /v1/runs/{run}/diff?from=&to=&maxBytes=&after=&limit=",
		"GET /v1/runs/{run}/events?afterSeq=&beforeSeq=&limit=",
		"GET /v1/runs/{run}/events/follow?afterSeq=&wait=",
	} {
		assert.True(t, listed[r], "the help lists %s:\n%s", r, routes)
	}
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	assert.Contains(t, string(readme), "```text\n"+routes+"\n```", "README lists the routes as the help does")
}
