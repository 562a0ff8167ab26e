package httpapi

import (
	"context"
	"time"

	"github.com/wsstore/wsstore/wserr"
)

// retry calls fn until it fails with anything but store.busy, with a
// backoff from 5 ms doubling to 500 ms, for at most the busy deadline; a
// busy store is answered only once the deadline has passed. fn must be
// safe to call again after a busy failure: a busy transaction committed
// nothing.
func (h *Handler) retry(ctx context.Context, fn func() error) error {
	deadline := time.Now().Add(h.opts.BusyDeadline)
	wait := 5 * time.Millisecond
	for {
		err := fn()
		if !wserr.Is(err, wserr.Busy) || time.Now().Add(wait).After(deadline) {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		wait = min(wait*2, 500*time.Millisecond)
	}
}
