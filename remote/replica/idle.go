package replica

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http/httptrace"
	"sync"
	"time"

	"github.com/benbjohnson/litestream"
	lss3 "github.com/benbjohnson/litestream/s3"
	"github.com/superfly/ltx"
)

// stalledReadFactor times the idle timeout is how long a call may see no
// byte at all, as on the blob tier's connections (remote.Options).
const stalledReadFactor = 10

// stalledError is a call to the object store given up because it waited
// too long for a byte: the store stopped answering.
type stalledError struct{ wait time.Duration }

func (e *stalledError) Error() string {
	return fmt.Sprintf("the object store sent nothing for %s", e.wait)
}

// idleClient is Litestream's S3 client with the bounds the blob tier's
// client has. Litestream's builds its own HTTP client, which waits a day
// for an answer and can be given no other, so a server that took the
// connection and stopped answering held restore and replicate for good.
// idleClient watches each call through its context instead (watch): a
// call whose request has had no answer for idle, or that has read no byte
// for stalledReadFactor times that, is cancelled and fails with a
// stalledError, which is store.busy (unreachable). A stalled attempt so
// ends its call rather than being retried: a replication round is tried
// again at the next, and a restore's reads are reopened by Litestream.
type idleClient struct {
	*lss3.ReplicaClient
	idle time.Duration
}

var (
	_ litestream.ReplicaClient   = (*idleClient)(nil)
	_ litestream.ReplicaClientV3 = (*idleClient)(nil)
)

// call runs fn watched, as one call.
func call[T any](c *idleClient, ctx context.Context, fn func(context.Context) (T, error)) (T, error) {
	ctx, w := newWatch(ctx, c.idle)
	defer w.close()
	w.begin()
	v, err := fn(ctx)
	w.end()
	return v, w.err(err)
}

// open runs fn watched, and the reads of the body it returns, until that
// is closed.
func open(c *idleClient, ctx context.Context, fn func(context.Context) (io.ReadCloser, error)) (io.ReadCloser, error) {
	ctx, w := newWatch(ctx, c.idle)
	w.begin()
	rc, err := fn(ctx)
	w.end()
	if err != nil {
		w.close()
		return nil, w.err(err)
	}
	return &idleBody{rc: rc, w: w}, nil
}

func (c *idleClient) Init(ctx context.Context) error {
	_, err := call(c, ctx, func(ctx context.Context) (struct{}, error) { return struct{}{}, c.ReplicaClient.Init(ctx) })
	return err
}

func (c *idleClient) LTXFiles(ctx context.Context, level int, seek ltx.TXID, useMetadata bool) (ltx.FileIterator, error) {
	ctx, w := newWatch(ctx, c.idle)
	w.begin()
	itr, err := c.ReplicaClient.LTXFiles(ctx, level, seek, useMetadata)
	w.end()
	if err != nil {
		w.close()
		return nil, w.err(err)
	}
	return &idleIterator{FileIterator: itr, w: w}, nil
}

func (c *idleClient) OpenLTXFile(ctx context.Context, level int, minTXID, maxTXID ltx.TXID, offset, size int64) (io.ReadCloser, error) {
	return open(c, ctx, func(ctx context.Context) (io.ReadCloser, error) {
		return c.ReplicaClient.OpenLTXFile(ctx, level, minTXID, maxTXID, offset, size)
	})
}

func (c *idleClient) WriteLTXFile(ctx context.Context, level int, minTXID, maxTXID ltx.TXID, r io.Reader) (*ltx.FileInfo, error) {
	return call(c, ctx, func(ctx context.Context) (*ltx.FileInfo, error) {
		return c.ReplicaClient.WriteLTXFile(ctx, level, minTXID, maxTXID, r)
	})
}

func (c *idleClient) DeleteLTXFiles(ctx context.Context, a []*ltx.FileInfo) error {
	_, err := call(c, ctx, func(ctx context.Context) (struct{}, error) { return struct{}{}, c.ReplicaClient.DeleteLTXFiles(ctx, a) })
	return err
}

func (c *idleClient) DeleteAll(ctx context.Context) error {
	_, err := call(c, ctx, func(ctx context.Context) (struct{}, error) { return struct{}{}, c.ReplicaClient.DeleteAll(ctx) })
	return err
}

func (c *idleClient) GenerationsV3(ctx context.Context) ([]string, error) {
	return call(c, ctx, c.ReplicaClient.GenerationsV3)
}

func (c *idleClient) SnapshotsV3(ctx context.Context, generation string) ([]litestream.SnapshotInfoV3, error) {
	return call(c, ctx, func(ctx context.Context) ([]litestream.SnapshotInfoV3, error) {
		return c.ReplicaClient.SnapshotsV3(ctx, generation)
	})
}

func (c *idleClient) WALSegmentsV3(ctx context.Context, generation string) ([]litestream.WALSegmentInfoV3, error) {
	return call(c, ctx, func(ctx context.Context) ([]litestream.WALSegmentInfoV3, error) {
		return c.ReplicaClient.WALSegmentsV3(ctx, generation)
	})
}

func (c *idleClient) OpenSnapshotV3(ctx context.Context, generation string, index int) (io.ReadCloser, error) {
	return open(c, ctx, func(ctx context.Context) (io.ReadCloser, error) {
		return c.ReplicaClient.OpenSnapshotV3(ctx, generation, index)
	})
}

func (c *idleClient) OpenWALSegmentV3(ctx context.Context, generation string, index int, offset int64) (io.ReadCloser, error) {
	return open(c, ctx, func(ctx context.Context) (io.ReadCloser, error) {
		return c.ReplicaClient.OpenWALSegmentV3(ctx, generation, index, offset)
	})
}

// idleIterator is a listing whose every step is watched.
type idleIterator struct {
	ltx.FileIterator
	w *watch
}

func (it *idleIterator) Next() bool {
	it.w.begin()
	defer it.w.end()
	return it.FileIterator.Next()
}

func (it *idleIterator) Err() error { return it.w.err(it.FileIterator.Err()) }

func (it *idleIterator) Close() error {
	err := it.FileIterator.Close()
	it.w.close()
	return it.w.err(err)
}

// idleBody is a download whose every read is watched.
type idleBody struct {
	rc io.ReadCloser
	w  *watch
}

func (b *idleBody) Read(p []byte) (int, error) {
	b.w.begin()
	n, err := b.rc.Read(p)
	b.w.end()
	if err != nil && err != io.EOF {
		err = b.w.err(err)
	}
	return n, err
}

func (b *idleBody) Close() error {
	err := b.rc.Close()
	b.w.close()
	return err
}

// watch cancels the context of one call to the object store once it has
// waited too long, while it is within a step of the call (begin to end:
// the call, a listing's step, a read of a body it returned): idle from
// when a request was sent to the first byte of its answer (the HTTP
// transport reports both through httptrace), and stalledReadFactor times
// idle at any other point (a connection taken, an upload being sent, a
// body being read). Outside its steps nothing is waited for.
type watch struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	idle   time.Duration

	mu    sync.Mutex
	on    bool
	gen   int // of the timer set last
	timer *time.Timer
}

func newWatch(ctx context.Context, idle time.Duration) (context.Context, *watch) {
	ctx, cancel := context.WithCancelCause(ctx)
	w := &watch{cancel: cancel, idle: idle}
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn:              func(httptrace.GotConnInfo) { w.wait(stalledReadFactor * idle) },
		WroteRequest:         func(httptrace.WroteRequestInfo) { w.wait(idle) },
		GotFirstResponseByte: func() { w.wait(stalledReadFactor * idle) },
	})
	w.ctx = ctx
	return ctx, w
}

// begin starts a step.
func (w *watch) begin() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.on = true
	w.set(stalledReadFactor * w.idle)
}

// end ends a step.
func (w *watch) end() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.on = false
	w.set(0)
}

// wait gives the step d from now for its next byte.
func (w *watch) wait(d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.on {
		w.set(d)
	}
}

// set replaces the timer with one of d (none for 0).
func (w *watch) set(d time.Duration) {
	if w.timer != nil {
		w.timer.Stop()
	}
	w.gen++
	w.timer = nil
	if d > 0 {
		gen := w.gen
		w.timer = time.AfterFunc(d, func() { w.fire(gen, d) })
	}
}

func (w *watch) fire(gen int, d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if gen == w.gen && w.on {
		w.cancel(&stalledError{wait: d})
	}
}

// close ends the call: its context is cancelled.
func (w *watch) close() {
	w.end()
	w.cancel(nil)
}

// err is err, or the stalledError that cut the call short in its place:
// the call's failure then is the context's cancellation, which must not
// read as the caller's.
func (w *watch) err(err error) error {
	var se *stalledError
	if err != nil && errors.As(context.Cause(w.ctx), &se) {
		return se
	}
	return err
}
