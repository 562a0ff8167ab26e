package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/remote"
	"github.com/wsstore/wsstore/remote/replica"
	"github.com/wsstore/wsstore/wserr"
)

type replicateOptions struct {
	globals
	to       string
	interval time.Duration
	once     bool
	takeOver bool
}

func newReplicateCmd(a *app) *cobra.Command {
	var o replicateOptions
	cmd := &cobra.Command{
		Use:   "replicate [--to URL] [--interval D] [--once] [--take-over]",
		Short: "Replicate the store's database to an object store through Litestream, until stopped",
		Long: `replicate ships every transaction of the store's SQLite database to an
S3-compatible object store with Litestream (embedded), until SIGINT or
SIGTERM, then ships what is left and exits 0. Each --interval (default
10s) it also pushes the blobs not yet on the store's remote tier, so a
restored copy reads its files from there; while another device runs
reclaim-remote the push waits for a later round. A round the object store
does not answer, the first one too, is tried again, backing off while
they fail: an interval after the first failure, twice as long after each
next one, up to a minute. Each failed try prints one line on stderr
("round failed", with the tries so far), as does the replicator's own
reading of the log ("sync failed"), and the first success after them
("round resumed", "sync resumed"); the round after a signal reports its
failure. --once does one round and
exits (store.busy, exit 8, if a reclaim kept it from pushing or the object
store did not answer). A second replicate on a store one is replicating
is refused (store.busy, exit 8).

--to is the replica's s3:// URL; the default is the store's blob tier with
"meta" added to its prefix, the same for every device syncing through
that tier: at most one of them may use it, the others give --to. One
store replicates to one URL: an object there (owner.json) names the
store that does, and another store is refused (store.conflict, exit 5)
before anything there changes. A store restored from the replica
continues it; from then on the store it was restored from is refused
there, at its next round if it is replicating. --take-over makes this
store the replica's owner whatever store it names (a store moved by
export and import, or one replacing another): the other is refused there
from then on.
"wsctl restore --from URL DIR" builds a store from it (docs/remote.md).`,
		Args: cobra.NoArgs,
		RunE: a.runWith(&o.globals, func(ctx context.Context, args []string) error {
			return runReplicate(ctx, o)
		}),
	}
	cmd.Flags().StringVar(&o.to, "to", "", "replica `URL` s3://bucket/prefix?endpoint=… (default: the blob tier's, prefix + meta)")
	cmd.Flags().DurationVar(&o.interval, "interval", 10*time.Second, "how often to push blobs and sync the replica")
	cmd.Flags().BoolVar(&o.once, "once", false, "do one round and exit")
	cmd.Flags().BoolVar(&o.takeOver, "take-over", false, "replicate to the URL though another store replicates there; that store is refused there from then on")
	refuseEmpty(cmd, "to")
	return cmd
}

// metaURL is the default replica URL of a store: its blob tier's location
// with "meta" appended to the prefix.
func metaURL(st *wsstore.Store) (string, error) {
	if st.Remote == nil {
		return "", usageError{wserr.New(wserr.InvalidOptions, "replicate", "", "needs --to s3://bucket/prefix, or a store with a remote blob tier (--blobs)")}
	}
	loc := st.Remote.Location()
	loc.Prefix = strings.TrimSuffix(loc.Prefix, "/") + "/meta/"
	loc.Prefix = strings.TrimPrefix(loc.Prefix, "/")
	return loc.String(), nil
}

func runReplicate(ctx context.Context, o replicateOptions) error {
	if o.interval <= 0 {
		return argError("replicate", "--interval %s: give a positive duration such as 10s", o.interval)
	}
	// A signal stops replication after a last round, whenever it comes:
	// opening, starting and the first round do not watch for it.
	steady := context.WithoutCancel(ctx)
	st, err := openStore(steady, o.globals, readWrite)
	if err != nil {
		return err
	}
	stClosed := false
	defer func() {
		if !stClosed {
			st.Close()
		}
	}()
	to := o.to
	if to == "" {
		if to, err = metaURL(st); err != nil {
			return err
		}
	} else if _, err := remote.ParseURL(to); err != nil {
		return usageError{err}
	}
	owner, err := remote.ReplicaOwnerOf(steady, st.DB)
	if err != nil {
		return err
	}
	logger := slog.New(&replicateLog{w: o.errOut})
	rep, err := replica.Start(steady, st.DB.Path(), to, replica.Options{Interval: min(o.interval, time.Second), Owner: owner, TakeOver: o.takeOver, Logger: logger})
	if err != nil {
		return err
	}
	rounds := 0
	round := func(ctx context.Context) error {
		if st.Remote != nil {
			// While another device reclaims, the push waits for a later
			// round (--once fails instead); the database's replica does
			// not wait.
			if _, err := st.Remote.Push(ctx, st.DB); err != nil && (o.once || !errors.Is(err, remote.ErrLocked)) {
				return err
			}
		}
		if err := rep.Sync(ctx); err != nil {
			return err
		}
		rounds++
		return nil
	}
	// An object store that does not answer fails this round only, the
	// first one too: what it did not ship, the next one does. The rounds
	// back off while they fail, as the replicator's own loop does.
	tries := replica.Backoff{What: "round", Interval: o.interval, Logger: logger}
	riddenOut := func(err error) error {
		if err != nil && (!errors.Is(err, remote.ErrUnavailable) || ctx.Err() != nil) {
			return err
		}
		tries.Done(time.Now(), err)
		return nil
	}
	err = round(steady)
	if !o.once {
		err = riddenOut(err)
	}
	if !o.once && err == nil {
		t := time.NewTicker(o.interval)
		for err == nil {
			select {
			case <-ctx.Done():
			case <-t.C:
				if tries.Due(time.Now()) {
					err = riddenOut(round(ctx))
				}
				continue
			}
			break
		}
		t.Stop()
		if ctx.Err() != nil {
			// Stopped by a signal: the final round below is the last word.
			err = round(steady)
		}
	}
	// The store closes before the replicator: Litestream's close drops
	// its descriptors of the database file, and with them (POSIX) every
	// lock this process holds on it, the store's connections' included.
	stClosed = true
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	if cerr := rep.Close(steady); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if o.json {
		return writeJSON(o.out, map[string]any{"replica": to, "rounds": rounds})
	}
	_, err = fmt.Fprintf(o.out, "replicate: %d rounds to %s\n", rounds, to)
	return err
}

// replicateLog prints the lines of the replicator's loop and of the
// rounds' (replica.Backoff: a try failed, tries resumed) on stderr, one
// line each in wsctl's style:
//
//	wsctl: replicate: round failed (tries 3, trying again in 40s): store.busy: …
//
// Litestream's own lines (its compactions and monitors starting and
// failing) are left out: their failures are the loops' too, which print
// them at the backoff's pace.
type replicateLog struct {
	mu sync.Mutex
	w  io.Writer
}

func (h *replicateLog) Enabled(context.Context, slog.Level) bool { return true }

func (h *replicateLog) Handle(_ context.Context, r slog.Record) error {
	var tries, failedTries int64
	var retryIn time.Duration
	var cause any
	r.Attrs(func(a slog.Attr) bool {
		switch k := a.Value.Kind(); {
		case a.Key == "tries" && k == slog.KindInt64:
			tries = a.Value.Int64()
		case a.Key == "failed_tries" && k == slog.KindInt64:
			failedTries = a.Value.Int64()
		case a.Key == "retry_in" && k == slog.KindDuration:
			retryIn = a.Value.Duration()
		case a.Key == "error":
			cause = a.Value.Any()
		}
		return true
	})
	var line string
	switch {
	case tries > 0:
		line = fmt.Sprintf("wsctl: replicate: %s (tries %d, trying again in %s): %v\n", r.Message, tries, retryIn, cause)
	case failedTries > 0:
		line = fmt.Sprintf("wsctl: replicate: %s after %d failed tries\n", r.Message, failedTries)
	default:
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := io.WriteString(h.w, line)
	return err
}

func (h *replicateLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *replicateLog) WithGroup(string) slog.Handler      { return h }
