package replica

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/benbjohnson/litestream"
	lss3 "github.com/benbjohnson/litestream/s3"

	"github.com/wsstore/wsstore/remote"
	"github.com/wsstore/wsstore/wserr"
)

// Options configure a Replicator. The zero value means the defaults given.
type Options struct {
	// Interval is how often the write-ahead log is read and shipped,
	// default 1s (Litestream's own).
	Interval time.Duration
	// Logger receives Litestream's log; nil discards it.
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.Interval <= 0 {
		o.Interval = litestream.DefaultMonitorInterval
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return o
}

// client builds Litestream's S3 client for an s3:// URL of the form
// remote.ParseURL takes (s3://BUCKET/PREFIX?endpoint=…&region=…).
// Credentials come from the environment or the shared AWS files. It fails
// with store.invalid_options for a bad URL, or one naming a profile
// (Litestream's client reads AWS_PROFILE, not a URL parameter).
func client(ctx context.Context, url string, log *slog.Logger) (*lss3.ReplicaClient, error) {
	loc, err := remote.ParseURL(url)
	if err != nil {
		return nil, err
	}
	if loc.Profile != "" {
		return nil, wserr.New(wserr.InvalidOptions, "replica url", url, "profile= is not taken for replication: set AWS_PROFILE")
	}
	if os.Getenv("AWS_CA_BUNDLE") != "" {
		// Litestream's client gives the SDK an HTTP client it cannot add
		// the bundle's roots to, and every call would fail.
		return nil, wserr.New(wserr.InvalidOptions, "replica url", url, "AWS_CA_BUNDLE is not taken for replication: unset it and name the bundle in SSL_CERT_FILE, which Go reads on Linux and the BSDs (sync and the blob tier take either)")
	}
	if err := remote.CheckCredentials(ctx, url); err != nil {
		return nil, err
	}
	c := lss3.NewReplicaClient()
	c.Bucket = loc.Bucket
	c.Path = strings.TrimSuffix(loc.Prefix, "/")
	c.Region = loc.Region
	if loc.Endpoint != "" {
		c.Endpoint = loc.Endpoint
		c.ForcePathStyle = true
		if c.Region == "" {
			c.Region = lss3.DefaultRegion
		}
	}
	c.SetLogger(log)
	return c, nil
}

// Replicator ships one database's transactions to a replica while it is
// open.
type Replicator struct {
	db *litestream.DB
}

// Start starts replicating the SQLite database at path to the replica at
// url, in the background, until Close. Litestream keeps its own state in
// a directory beside the database (".NAME-litestream"). It fails with
// store.invalid_options for a bad URL and store.busy when the object
// store cannot be reached.
func Start(ctx context.Context, path, url string, opts Options) (*Replicator, error) {
	opts = opts.withDefaults()
	c, err := client(ctx, url, opts.Logger)
	if err != nil {
		return nil, err
	}
	if err := c.Init(ctx); err != nil {
		return nil, unavailable("replicate", url, err)
	}
	db := litestream.NewDB(path)
	db.SetLogger(opts.Logger)
	db.MonitorInterval = opts.Interval
	r := litestream.NewReplicaWithClient(db, c)
	r.SyncInterval = opts.Interval
	db.Replica = r
	if err := db.Open(); err != nil {
		return nil, wserr.Wrap(wserr.Internal, "replicate", path, err)
	}
	return &Replicator{db: db}, nil
}

// Sync ships every transaction committed so far and returns once the
// replica holds them. It fails with store.busy when the object store
// cannot be reached; what was shipped stays shipped.
func (r *Replicator) Sync(ctx context.Context) error {
	if err := r.db.SyncAndWait(ctx); err != nil {
		return unavailable("replicate", r.db.Path(), err)
	}
	return nil
}

// Close ships what is left, stops replicating and releases the database.
// Call it after the process's own connections to the database are
// closed: it closes Litestream's descriptors of the file, and closing any
// descriptor of a file drops every POSIX lock the process holds on it.
func (r *Replicator) Close(ctx context.Context) error {
	if err := r.db.Close(ctx); err != nil {
		return unavailable("replicate", r.db.Path(), err)
	}
	return nil
}

// Restore builds the database at path from the replica at url, at the
// latest transaction the replica holds, and checks it with SQLite's
// integrity check. It fails with store.invalid_options when a file is at
// path already, store.not_found when the replica holds nothing, and
// store.busy when the object store cannot be reached.
func Restore(ctx context.Context, url, path string, opts Options) error {
	opts = opts.withDefaults()
	if _, err := os.Stat(path); err == nil {
		return wserr.New(wserr.InvalidOptions, "restore", path, "a database is there already: restore into a new directory")
	}
	c, err := client(ctx, url, opts.Logger)
	if err != nil {
		return err
	}
	if err := c.Init(ctx); err != nil {
		return unavailable("restore", url, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return wserr.Wrap(wserr.Internal, "restore", path, err)
	}
	db := litestream.NewDB(path)
	db.SetLogger(opts.Logger)
	r := litestream.NewReplicaWithClient(db, c)
	o := litestream.NewRestoreOptions()
	o.OutputPath = path
	o.IntegrityCheck = litestream.IntegrityCheckQuick
	err = r.Restore(ctx, o)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, litestream.ErrNoSnapshots), errors.Is(err, litestream.ErrTxNotAvailable):
		return wserr.New(wserr.NotFound, "restore", url, "no replica here: run wsctl replicate on the source store first")
	}
	return unavailable("restore", url, err)
}

// unavailable codes a failure to reach the replica as store.busy; a
// cancelled context stays itself; a request refused for what no retry
// changes (no credentials, none accepted, no such bucket) and a client
// whose AWS configuration does not load are store.invalid_options.
func unavailable(op, what string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s %s: %w", op, what, err)
	}
	if r := remote.Refused(op, what, err); r != nil {
		return r
	}
	if strings.Contains(err.Error(), "cannot load aws config") {
		return wserr.Wrap(wserr.InvalidOptions, op, what, err)
	}
	return fmt.Errorf("%w: %w", wserr.Wrap(wserr.Busy, op, what, err), remote.ErrUnavailable)
}
