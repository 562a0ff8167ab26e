package replica_test

import (
	"context"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/remote/replica"
)

// records keeps the messages logged and the tries each names.
type records struct {
	mu    sync.Mutex
	msgs  []string
	tries []int64
}

func (h *records) Enabled(context.Context, slog.Level) bool { return true }

func (h *records) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r.Message != "sync failed" && r.Message != "sync resumed" {
		return nil
	}
	h.msgs = append(h.msgs, r.Message)
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "tries" {
			h.tries = append(h.tries, a.Value.Int64())
		}
		return true
	})
	return nil
}

func (h *records) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *records) WithGroup(string) slog.Handler      { return h }

func (h *records) count(msg string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, m := range h.msgs {
		if m == msg {
			n++
		}
	}
	return n
}

// TestWatchBacksOff: the object store refuses the listing the first sync
// reads (the credentials no longer accepted there) from the start, so
// every turn of the replicator's own loop fails. It retried and logged at
// every tick (200 tries a second at this one); now it backs off, doubling
// its wait, so the tries over the window are about log2(window / tick),
// each logged with its count. Once the store answers again, the loop's
// next try succeeds and says so, and the replica restores.
func TestWatchBacksOff(t *testing.T) {
	srv, url, path, db := newSource(t)
	ctx := context.Background()
	rnd := rewriteRows(t, db, 9, 8)
	began := time.Now()
	var mu sync.Mutex
	refused, down := 0, true
	srv.SetFault(func(r *http.Request) int {
		mu.Lock()
		defer mu.Unlock()
		if down && r.Method == http.MethodGet && strings.HasPrefix(r.URL.Query().Get("prefix"), "meta/0009/") {
			refused++
			return http.StatusForbidden
		}
		return 0
	})
	logs := &records{}
	const tick = 5 * time.Millisecond
	rep, err := replica.Start(ctx, path, url, replica.Options{Interval: tick, Owner: testOwner, Logger: slog.New(logs)})
	require.NoError(t, err, "the first sync's failure is the next round's")
	time.Sleep(120 * tick)
	mu.Lock()
	n, window := refused, time.Since(began)
	down = false
	mu.Unlock()

	// Start's try and Litestream's own listing as it starts, then the
	// loop's, the first a tick after Start and each next at least 1, 2,
	// 4, … ticks after the one before: within the window at most
	// 3 + log2(window / tick), however slow the machine; one more for
	// slack. Without backoff, one a tick.
	bound := 4 + int(math.Log2(float64(window)/float64(tick)))
	assert.LessOrEqual(t, n, bound, "tries in %s at a tick of %s", window, tick)
	failed := logs.count("sync failed")
	assert.LessOrEqual(t, failed, n, "one line per failed try at most")
	logs.mu.Lock()
	for i, k := range logs.tries {
		assert.Equal(t, int64(i+1), k, "each line counts the failed tries")
	}
	logs.mu.Unlock()

	for logs.count("sync resumed") == 0 {
		require.Less(t, time.Since(began), 20*time.Second, "the loop resumes")
		time.Sleep(tick)
	}
	assert.Equal(t, 1, logs.count("sync resumed"))
	rewrite(t, db, rnd, 20)
	require.NoError(t, rep.Sync(ctx))
	require.NoError(t, rep.Close(ctx))
	assertRestores(t, url, db)
	t.Logf("%d tries refused in %s at a tick of %s (bound %d), %d failures logged", n, window, tick, bound, failed)
}
