package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/wsstore/wsstore/httpapi"
	"github.com/wsstore/wsstore/protocol"
	"github.com/wsstore/wsstore/wserr"
)

// defaultListen is where wsctl serve listens without --listen: loopback.
const defaultListen = "127.0.0.1:7433"

// defaultMemoryLimit is serve's soft limit of the Go runtime's memory
// (debug.SetMemoryLimit). A transfer's garbage (chunk buffers, copies out
// of SQLite) would otherwise let the heap double past its live size
// before a collection; the limit keeps the process's resident memory
// bounded at little cost while what is live stays below it, and is soft:
// it never fails an allocation.
const defaultMemoryLimit = 32 << 20

type serveOptions struct {
	globals
	listen          string
	allowRemote     bool
	corsOrigins     []string
	maxRequest      int64
	maxUpload       int64
	readTimeout     time.Duration
	writeTimeout    time.Duration
	idleTimeout     time.Duration
	shutdownTimeout time.Duration
	busyDeadline    time.Duration
	maxTransfers    int
	memoryLimit     int64
	// ready, if set, is called with the address once the server listens
	// (tests).
	ready func(addr string)
}

func newServeCmd(a *app) *cobra.Command {
	var o serveOptions
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the HTTP API: seed 004's Workspace endpoints and the batch op table",
		Long: `serve answers HTTP on --listen (default ` + defaultListen + `, loopback; any other
address needs --allow-remote). Every endpoint but GET /healthz needs a
bearer token from "wsctl token create". A listing answers a page: pass the
last entry's path (after=) or seq (afterSeq=) of one page to get the next.

  GET    /healthz                                 {"ok": true}, without a token
  GET    /workspace/files?actor=&path=&depth=&after=&limit=
                                  a page of entries, and more; without
                                  actor=, every space as one tree: a
                                  directory per actor (path=alice/x)
  GET    /workspace/file?actor=&path=             the file, streamed (Range, If-None-Match)
  POST   /workspace/upload?actor=&path=           the body (or a multipart file), streamed
                                  (If-Match, If-None-Match: *)
  DELETE /workspace/file?actor=&path=             (If-Match, If-None-Match: *)
  GET    /workspace/stats?actor=                  without actor=: a page of every
                                  actor's (after=&limit=), and more
  POST   /workspace/gc?actor=&keepVersions=       prune versions, then gc the store
  DELETE /workspace/delete-by-prefix?actor=&prefix=
  POST   /v1/op                                   one batch request -> one response
  GET    /v1/ops                                  the op table (batch --help)
  GET    /v1/export?run=&chat=&actor=&all=&skipWorkspace=
                                  an archive, streamed; its summary in
                                  the Wsstore-Summary trailer (HEAD: its
                                  headers, checked, nothing exported)
  POST   /v1/import                               the body is an archive -> its summary
  GET    /v1/runs/{run}
  GET    /v1/runs/{run}/checkpoints?afterSeq=&limit=
                                  a page, oldest first, and more
  GET    /v1/runs/{run}/files?path=&depth=&at=&after=&limit=
                                  a page of entries, and more
  GET    /v1/runs/{run}/file?path=&at=            a file, live or at a checkpoint (Range, If-None-Match)
  GET    /v1/runs/{run}/diff?from=&to=&maxBytes=&after=&limit=
                                  a page of changed files, and more
  GET    /v1/runs/{run}/events?afterSeq=&beforeSeq=&limit=
                                  a page of the journal, more and next
  GET    /v1/runs/{run}/events/follow?afterSeq=&wait=
                                  long poll; server-sent events with
                                  "Accept: text/event-stream" (Last-Event-ID)

Errors are {"error": {"code", "message"}} with the status of the code
(401 without a valid token, 403 when the token may not). Over HTTP there is
no current run: op requests name their run ("runId").

Each request is logged on standard error. SIGINT or SIGTERM stop accepting
connections and let the requests in flight finish (--shutdown-timeout);
serve then exits 0. With --json the startup line on standard output is JSON with the address.`,
		Args: exactArgs(0),
	}
	cmd.RunE = a.runWith(&o.globals, func(ctx context.Context, args []string) error { return runServe(ctx, o, args) })
	f := cmd.Flags()
	f.StringVar(&o.listen, "listen", defaultListen, "`ADDR` to listen on (host:port; port 0 picks one)")
	f.BoolVar(&o.allowRemote, "allow-remote", false, "allow a --listen address that is not loopback")
	f.StringArrayVar(&o.corsOrigins, "cors-origin", nil, "allow browser calls from `ORIGIN` (repeatable; \"*\": any); default none")
	int64Var(f, &o.maxRequest, "max-request-bytes", httpapi.DefaultMaxRequestBytes, "largest op request body")
	int64Var(f, &o.maxUpload, "max-upload-bytes", 0, "largest upload (0: no limit; uploads stream)")
	f.DurationVar(&o.readTimeout, "read-timeout", time.Minute, "time to read a request (uploads: extended while bytes flow)")
	f.DurationVar(&o.writeTimeout, "write-timeout", 2*time.Minute, "time to write a response from when it starts, however long the work before it took (downloads and exports: extended while bytes flow)")
	f.DurationVar(&o.idleTimeout, "idle-timeout", 2*time.Minute, "how long an idle keep-alive connection stays open")
	f.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long a shutdown waits for requests in flight")
	f.DurationVar(&o.busyDeadline, "busy-deadline", httpapi.DefaultBusyDeadline, "how long a request retries a busy store")
	intVar(f, &o.maxTransfers, "max-transfers", httpapi.DefaultMaxTransfers, "uploads, downloads, imports, exports, diffs, listing pages of more than 1,000 entries and large ops served at once (each holds a few MiB); one more waits up to --busy-deadline, then 503 (negative: no bound)")
	int64Var(f, &o.memoryLimit, "memory-limit", defaultMemoryLimit, "soft limit in `BYTES` of the Go runtime's memory, so garbage is collected before the process grows (0: none; GOMEMLIMIT, if set, wins)")
	return cmd
}

// isLoopback reports whether host names only the loopback interface.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func runServe(ctx context.Context, o serveOptions, _ []string) error {
	host, _, err := net.SplitHostPort(o.listen)
	if err != nil {
		return usageError{argError("serve", "--listen %q: %v", o.listen, err)}
	}
	if !isLoopback(host) && !o.allowRemote {
		return usageError{argError("serve", "--listen %q is not a loopback address: pass --allow-remote to serve other machines", o.listen)}
	}
	for _, f := range []struct {
		name string
		v    int64
	}{{"--max-request-bytes", o.maxRequest}, {"--max-upload-bytes", o.maxUpload}, {"--memory-limit", o.memoryLimit},
		{"--busy-deadline", int64(o.busyDeadline)}, {"--read-timeout", int64(o.readTimeout)}, {"--write-timeout", int64(o.writeTimeout)},
		{"--idle-timeout", int64(o.idleTimeout)}, {"--shutdown-timeout", int64(o.shutdownTimeout)}} {
		if f.v < 0 {
			return usageError{argError("serve", "%s must not be negative", f.name)}
		}
	}
	defer softMemoryLimit(o.memoryLimit)()
	// Each wait for another process's lock is within --busy-deadline,
	// which the retries keep to.
	g := o.globals
	g.busyTimeout = o.busyDeadline
	st, err := openServing(ctx, g)
	if err != nil {
		return err
	}
	defer st.Close()
	h, err := httpapi.New(httpapi.FromStore(st), httpapi.Options{
		MaxRequestBytes: o.maxRequest, MaxUploadBytes: o.maxUpload, BusyDeadline: o.busyDeadline, MaxTransfers: o.maxTransfers,
		CORSOrigins: o.corsOrigins, AccessLog: o.errOut,
		// A transfer may stall as long as the flags let a request be read
		// or an answer be written; none when they set no deadline.
		ReadIOTimeout: stallWindow(o.readTimeout), WriteIOTimeout: stallWindow(o.writeTimeout),
		// Beside the store, on the disk that takes the upload anyway.
		SpoolDir: st.Dir,
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.listen)
	if addrInUse(err) {
		// The address is right; another process holds it, as a non-empty
		// directory refuses a checkout: a conflict with what is there.
		return wserr.New(wserr.Conflict, "serve", "", "--listen %s: the address is in use by another process; stop it, or listen on another port (port 0 picks a free one)", o.listen)
	}
	if err != nil {
		return wserr.Wrap(protocol.CodeInvalidArgument, "serve", "", err)
	}
	// Requests keep running past the interrupt: shutdown lets them finish.
	base := context.WithoutCancel(ctx)
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       o.readTimeout,
		WriteTimeout:      o.writeTimeout,
		IdleTimeout:       o.idleTimeout,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return base },
	}
	srv.RegisterOnShutdown(h.Close)
	addr := ln.Addr().String()
	if o.json {
		// One line, so a host reading the output line by line gets it whole.
		b, _ := json.Marshal(map[string]any{"listen": addr, "url": "http://" + addr, "store": o.storeDir})
		if _, err := fmt.Fprintf(o.out, "%s\n", b); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(o.out, "wsctl serve: listening on http://%s (store %s)\n", addr, o.storeDir)
	}
	if o.ready != nil {
		o.ready(addr)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(base, o.shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
		return fmt.Errorf("serve: shutdown: %w", err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	fmt.Fprintln(o.errOut, "wsctl serve: stopped")
	return nil
}

// stallWindow is the httpapi stall window for a server timeout d: d, or
// none (negative) when d sets no deadline.
func stallWindow(d time.Duration) time.Duration {
	if d <= 0 {
		return -1
	}
	return d
}

// addrInUse reports whether err, a listen's, says another socket holds
// the address: EADDRINUSE, which Windows gives as WSAEADDRINUSE (10048).
func addrInUse(err error) bool {
	var errno syscall.Errno
	return errors.Is(err, syscall.EADDRINUSE) || runtime.GOOS == "windows" && errors.As(err, &errno) && errno == 10048
}
