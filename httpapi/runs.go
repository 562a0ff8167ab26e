package httpapi

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/checkpoint"
	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/protocol"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// Read-only views of a run, for a browser that wants no protocol: they
// take the host's view (every path, input/ included), as wsctl does.
// They need a token not limited to actors.

// readRun authorizes a run view and returns the run's id.
func (h *Handler) readRun(w http.ResponseWriter, r *http.Request) (string, bool) {
	if _, ok := h.authorize(w, r, access{store: true}); !ok {
		return "", false
	}
	return r.PathValue("run"), true
}

// GET /v1/runs/{run}: the run.
func (h *Handler) run(w http.ResponseWriter, r *http.Request) {
	id, ok := h.readRun(w, r)
	if !ok {
		return
	}
	var run runs.Run
	err := h.retry(r.Context(), func() (err error) {
		run, err = h.b.Runs.Run(r.Context(), id)
		return err
	})
	answer(w, run, err)
}

// GET /v1/runs/{run}/checkpoints?afterSeq=&limit=: a page of the run's
// checkpoints, oldest first (limit default and at most checkpoint.MaxPage),
// and whether more remain after it.
func (h *Handler) checkpoints(w http.ResponseWriter, r *http.Request) {
	id, ok := h.readRun(w, r)
	if !ok {
		return
	}
	q, err := eventQuery(r, checkpoint.MaxPage)
	if err == nil && q.BeforeSeq != 0 {
		err = badRequest("beforeSeq is for events; checkpoints page with afterSeq")
	}
	var cps []checkpoint.Checkpoint
	more := false
	if err == nil {
		err = h.retry(r.Context(), func() (err error) {
			if _, err = h.b.Runs.Run(r.Context(), id); err != nil {
				return err
			}
			cps, more, err = h.b.Checkpoints.PageMore(r.Context(), id, q.AfterSeq, q.Limit)
			return err
		})
	}
	if cps == nil {
		cps = []checkpoint.Checkpoint{}
	}
	answer(w, map[string]any{"checkpoints": cps, "more": more}, err)
}

// view returns the run's workspace at ?at= (a checkpoint, cp_000003 or
// 3; "" or live: the live workspace).
func (h *Handler) view(r *http.Request, id string) (*runs.Workspace, error) {
	at := r.URL.Query().Get("at")
	if at == "" || strings.EqualFold(at, "live") {
		return h.b.Runs.Workspace(id, runs.HostScope), nil
	}
	seq, err := checkpoint.ParseRef(at)
	if err != nil {
		return nil, err
	}
	return h.b.Runs.WorkspaceAt(id, seq, runs.HostScope), nil
}

// pathParam parses ?path=, "", "/" and "./" (vfs.NamesRoot) being the
// root where root is allowed, as on /workspace/files.
func pathParam(r *http.Request, root bool) (vfs.Path, error) {
	s := r.URL.Query().Get("path")
	if root && (s == "/" || vfs.NamesRoot(s)) {
		return vfs.Root(), nil
	}
	return vfs.ParsePath(s)
}

// GET /v1/runs/{run}/files?path=&depth=&at=&after=&limit=: the entries
// below path, a page at a time (more: entries remain after the last).
func (h *Handler) runFiles(w http.ResponseWriter, r *http.Request) {
	id, ok := h.readRun(w, r)
	if !ok {
		return
	}
	ws, err := h.view(r, id)
	var p vfs.Path
	if err == nil {
		p, err = pathParam(r, true)
	}
	var depth int
	if err == nil {
		depth, err = intParam(r.URL.Query().Get("depth"), "depth", math.MaxInt)
	}
	if err == nil && depth < 0 {
		err = badRequest("depth must not be negative") // as the list op and /workspace/files
	}
	var page vfs.ListPage
	if err == nil {
		page, err = pageParams(r)
	}
	var ls []vfs.FileInfo
	var more bool
	if err == nil {
		release, ok := h.listTurn(w, r, page.Limit)
		if !ok {
			return
		}
		defer release()
		err = h.retry(r.Context(), func() (err error) {
			ls, more, err = ws.ListPage(r.Context(), p, depth, page)
			return err
		})
	}
	if ls == nil {
		ls = []vfs.FileInfo{}
	}
	answer(w, map[string]any{"entries": ls, "more": more}, err)
}

// GET /v1/runs/{run}/file?path=&at=: a file's bytes, live or at a
// checkpoint, streamed; one byte range (Range:) is read alone, and the
// ETag is the content hash (sendFile).
func (h *Handler) runFile(w http.ResponseWriter, r *http.Request) {
	id, ok := h.readRun(w, r)
	if !ok {
		return
	}
	ws, err := h.view(r, id)
	var p vfs.Path
	if err == nil {
		p, err = pathParam(r, false)
	}
	var fi vfs.FileInfo
	if err == nil {
		err = h.retry(r.Context(), func() (err error) {
			// A host file is not read here: Open hashes it as it opens
			// it, then streams it checked against that hash.
			fi, err = ws.StatNoRead(r.Context(), p)
			return err
		})
	}
	if err == nil {
		err = vfs.CheckFileSpelling("read", r.URL.Query().Get("path"), p, fi.Kind)
	}
	if err == nil && fi.Kind != vfs.KindFile {
		_, err = ws.Read(r.Context(), p, vfs.ReadOptions{}) // the error a directory gets
	}
	if err != nil {
		writeError(w, err)
		return
	}
	stored := fi.Resource == vfs.ResourceMaterialized || fi.Resource == vfs.ResourceGenerated
	if stored && !fi.Hash.IsZero() {
		h.sendFile(w, r, p.String(), fi.Hash, fi.Size, h.blobRange(r, fi.Hash), true)
		return
	}
	// The file is made or read before its headers can be answered: that
	// is a transfer's work whatever the request asks of it.
	release, ok := h.turn(w, r)
	if !ok {
		return
	}
	defer release()
	if fi.Resource == vfs.ResourceHost || !stored && !fi.Hash.IsZero() {
		// Made when read (the run's manifest, a checkpoint's record, a
		// virtual resource) or read from the host (a file of a host
		// directory, hashed as it is opened and checked as it streams):
		// streamed as the workspace gives it, at any size (a
		// checkpoint.json is written from its tree as it is read).
		h.sendMade(w, r, ws, p)
		return
	}
	// Its hash not known before its bytes are read: read whole.
	h.sendRead(w, r, ws, p)
}

// sendMade answers a download of p, a file the workspace makes when it is
// read, from Workspace.Open: its stream, and the size and hash of what it
// streams (read whole, as sendRead, if it comes without a hash). A range
// is read from the start, the bytes before it skipped.
func (h *Handler) sendMade(w http.ResponseWriter, r *http.Request, ws *runs.Workspace, p vfs.Path) {
	rc, fi, err := ws.Open(r.Context(), p)
	if err != nil {
		writeError(w, err)
		return
	}
	defer func() {
		if rc != nil {
			rc.Close()
		}
	}()
	if fi.Hash.IsZero() {
		h.sendRead(w, r, ws, p)
		return
	}
	h.sendFile(w, r, p.String(), fi.Hash, fi.Size, func(off, n int64) (io.ReadCloser, error) {
		src := rc
		rc = nil
		if src == nil { // opened again: a busy store, retried
			var err error
			if src, _, err = ws.Open(r.Context(), p); err != nil {
				return nil, err
			}
		}
		if _, err := io.CopyN(io.Discard, src, off); err != nil {
			src.Close()
			return nil, err
		}
		return src, nil
	}, false)
}

// sendRead answers a download of p read whole (at most the 16 MiB a read
// returns), its hash the hash of what was read.
func (h *Handler) sendRead(w http.ResponseWriter, r *http.Request, ws *runs.Workspace, p vfs.Path) {
	res, err := ws.Read(r.Context(), p, vfs.ReadOptions{})
	if err != nil {
		writeError(w, err)
		return
	}
	content := res.Content
	h.sendFile(w, r, p.String(), cas.Sum(content), int64(len(content)), func(off, n int64) (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(content[off : off+n])), nil
	}, false)
}

// GET /v1/runs/{run}/diff?from=&to=&maxBytes=&after=&limit=: what changed
// between two checkpoints (to: default the live workspace), a page of
// files at a time, as the diff op answers; a transfer (Options.MaxTransfers).
func (h *Handler) runDiff(w http.ResponseWriter, r *http.Request) {
	id, ok := h.readRun(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	if q.Get("from") == "" {
		writeError(w, badRequest("diff needs ?from=: a checkpoint"))
		return
	}
	from, err := checkpoint.ParseRef(q.Get("from"))
	var to int64
	if err == nil && q.Get("to") != "" && !strings.EqualFold(q.Get("to"), "live") {
		to, err = checkpoint.ParseRef(q.Get("to"))
	}
	var maxBytes int
	if err == nil {
		maxBytes, err = intParam(q.Get("maxBytes"), "maxBytes", MaxDiffBytes)
	}
	if err == nil && maxBytes > MaxDiffBytes {
		err = badRequest("maxBytes %d is more text than this server puts in one answer (%d): page the diff with after= and limit= instead (a page of one file holds its whole text)", maxBytes, MaxDiffBytes)
	}
	var page vfs.ListPage
	if err == nil {
		page, err = pageParams(r)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	// Its answer holds up to maxBytes of the files' text, read whole, as
	// the diff op's does: it is served in turn, as a download is.
	release, ok := h.turn(w, r)
	if !ok {
		return
	}
	defer release()
	var changes []checkpoint.FileDiff
	var more bool
	err = h.retry(r.Context(), func() (err error) {
		changes, more, err = h.b.Runs.DiffPage(r.Context(), id, from, to, runs.DiffOptions{MaxBytes: maxBytes}, page)
		return err
	})
	answer(w, map[string]any{"changes": changes, "more": more}, err)
}

// eventQuery parses ?afterSeq=&beforeSeq=&limit=, limit taking
// 0..maxLimit.
func eventQuery(r *http.Request, maxLimit int) (journal.PageQuery, error) {
	var q journal.PageQuery
	var err error
	for _, f := range []struct {
		name string
		dst  *int64
	}{{"afterSeq", &q.AfterSeq}, {"beforeSeq", &q.BeforeSeq}} {
		if err == nil {
			*f.dst, err = int64Param(r.URL.Query().Get(f.name), f.name, math.MaxInt64)
		}
	}
	if err == nil {
		q.Limit, err = intParam(r.URL.Query().Get("limit"), "limit", maxLimit)
	}
	return q, err
}

// GET /v1/runs/{run}/events?afterSeq=&beforeSeq=&limit=: a page of the
// journal, whether events remain after it (below beforeSeq, if given:
// more, as the events op says), and next, the afterSeq of the next page,
// when the page is full.
func (h *Handler) events(w http.ResponseWriter, r *http.Request) {
	id, ok := h.readRun(w, r)
	if !ok {
		return
	}
	q, err := eventQuery(r, journal.MaxLimit)
	var evs []journal.Event
	if err == nil {
		err = h.retry(r.Context(), func() (err error) {
			if _, err = h.b.Runs.Run(r.Context(), id); err != nil {
				return err
			}
			evs, err = h.b.Journal.Page(r.Context(), id, q)
			return err
		})
	}
	if evs == nil {
		evs = []journal.Event{}
	}
	res := map[string]any{"events": evs, "more": false}
	if err == nil && len(evs) > 0 {
		// A page, full or cut short at journal.MaxPageBytes, may be the
		// last: an event after it (below beforeSeq) says.
		var more bool
		err = h.retry(r.Context(), func() (err error) {
			more, err = h.b.Journal.HasEvents(r.Context(), id, evs[len(evs)-1].Seq, q.BeforeSeq)
			return err
		})
		res["more"] = more
		if lim := cmp.Or(q.Limit, journal.DefaultLimit); more || len(evs) == lim {
			res["next"] = evs[len(evs)-1].Seq
		}
	}
	answer(w, res, err)
}

// GET /v1/runs/{run}/events/follow?afterSeq=&wait=: the journal as it
// grows. With "Accept: text/event-stream" a stream of server-sent events
// (id: seq, event: type, data: the event), resumed after Last-Event-ID,
// until the client goes or the server shuts down. Otherwise a long poll:
// the events after afterSeq as soon as there is one, or none once wait
// (default 30s, at most MaxWait) has passed. A HEAD waits for nothing:
// once its request is checked, it answers with the headers its GET would
// send.
func (h *Handler) follow(w http.ResponseWriter, r *http.Request) {
	id, ok := h.readRun(w, r)
	if !ok {
		return
	}
	q, err := eventQuery(r, journal.MaxLimit)
	if err == nil && q.AfterSeq == 0 {
		if s := r.Header.Get("Last-Event-ID"); s != "" {
			if q.AfterSeq, err = strconv.ParseInt(s, 10, 64); err != nil {
				err = badRequest("Last-Event-ID must be an event's seq, not %q", s)
			}
		}
	}
	if err == nil {
		err = h.retry(r.Context(), func() error { _, err := h.b.Runs.Run(r.Context(), id); return err })
	}
	sse := strings.Contains(r.Header.Get("Accept"), "text/event-stream")
	wait := 30 * time.Second
	if s := r.URL.Query().Get("wait"); err == nil && !sse && s != "" {
		if wait, err = time.ParseDuration(s); err != nil || wait < 0 {
			err = badRequest("wait must be a duration such as 30s, not %q", s)
		}
	}
	if err != nil {
		writeError(w, err)
		return
	}
	if r.Method == http.MethodHead {
		if sse {
			streamHeaders(w.Header())
		} else {
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			w.Header().Set("X-Content-Type-Options", "nosniff")
		}
		w.WriteHeader(http.StatusOK)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() {
		select {
		case <-h.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	if sse {
		h.stream(ctx, w, id, q.AfterSeq)
		return
	}
	wait = min(wait, h.opts.MaxWait)
	if q.Limit == 0 {
		q.Limit = journal.MaxLimit
	}
	// The answer goes out once the wait is over, which may be past the
	// server's write timeout: it has its write window then (answerWindow).
	deadline := time.Now().Add(wait)
	for {
		evs, err := h.b.Journal.Page(ctx, id, journal.PageQuery{AfterSeq: q.AfterSeq, Limit: q.Limit})
		if err != nil && ctx.Err() == nil {
			writeError(w, err)
			return
		}
		if len(evs) == 0 && ctx.Err() == nil {
			// A run deleted while waited on has no event to come.
			if _, err := h.b.Runs.Run(ctx, id); wserr.Is(err, wserr.RunNotFound) {
				writeError(w, err)
				return
			}
		}
		if len(evs) > 0 || ctx.Err() != nil || !time.Now().Before(deadline) {
			if evs == nil {
				evs = []journal.Event{}
			}
			writeJSON(w, http.StatusOK, map[string]any{"events": evs})
			return
		}
		t := time.NewTimer(min(h.opts.FollowPoll, time.Until(deadline)))
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}

// streamHeaders sets the headers of a stream of server-sent events.
func streamHeaders(hd http.Header) {
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Accel-Buffering", "no")
}

// stream sends the run's events after afterSeq as server-sent events until
// ctx ends, with a comment line every Heartbeat while nothing happens.
func (h *Handler) stream(ctx context.Context, w http.ResponseWriter, id string, afterSeq int64) {
	rc := http.NewResponseController(w)
	streamHeaders(w.Header())
	w.WriteHeader(http.StatusOK)
	extend := func() { _ = rc.SetWriteDeadline(time.Now().Add(h.opts.Heartbeat * 2)) }
	extend()
	_, _ = io.WriteString(w, ": following "+id+"\n\n")
	_ = rc.Flush()
	events := make(chan journal.Event)
	done := make(chan error, 1)
	go func() {
		// A run deleted while followed ends the stream with an error
		// event: its journal went with it.
		alive := func(ctx context.Context) error {
			_, err := h.b.Runs.Run(ctx, id)
			if wserr.Is(err, wserr.RunNotFound) {
				return wserr.New(wserr.RunNotFound, "events", "", "run %s was deleted while it was followed", id)
			}
			return nil
		}
		done <- h.b.Journal.FollowWhile(ctx, id, afterSeq, h.opts.FollowPoll, alive, func(e journal.Event) error {
			select {
			case events <- e:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	beat := time.NewTicker(h.opts.Heartbeat)
	defer beat.Stop()
	for {
		select {
		case e := <-events:
			b, _ := json.Marshal(e)
			extend()
			if _, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", e.Seq, e.Type, b); err != nil {
				return
			}
			_ = rc.Flush()
		case <-beat.C:
			extend()
			if _, err := io.WriteString(w, ": ping\n\n"); err != nil {
				return
			}
			_ = rc.Flush()
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				b, _ := json.Marshal(errorBody{Error: protocol.ErrorBody{Code: wserr.CodeOf(err), Message: wserr.MessageOf(err)}})
				fmt.Fprintf(w, "event: error\ndata: %s\n\n", b)
				_ = rc.Flush()
			}
			return
		}
	}
}

// answer writes v, or err if there is one.
func answer(w http.ResponseWriter, v any, err error) {
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}
