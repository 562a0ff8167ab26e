package replica

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/benbjohnson/litestream"
	lss3 "github.com/benbjohnson/litestream/s3"

	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/remote"
	"github.com/wsstore/wsstore/wserr"
)

// Options configure a Replicator. The zero value means the defaults given.
//
// Each shipped transaction is a file of its own on the replica (level 0).
// Every Levels[0] those files are merged into one of level 1, every
// Levels[1] level 1's into one of level 2, and so on; every
// SnapshotInterval, if the database changed, a full copy of it is written.
// A level 0 file merged into level 1 goes, from the replica and from the
// local state, L0Retention after it was written; a snapshot older than
// SnapshotRetention goes at a later snapshot pass, and with it the files
// of levels 1 and up that only an older snapshot needed. The newest file
// of each level and the newest snapshot always stay: a restore reads one
// snapshot and a few files of each level.
type Options struct {
	// Interval is how often the write-ahead log is read and shipped,
	// default 1s (Litestream's own).
	Interval time.Duration
	// Levels are the intervals at which each level merges the one below,
	// level 1 first, each positive; default 30s and 5m.
	Levels []time.Duration
	// SnapshotInterval is how often a snapshot is written, default 1h.
	SnapshotInterval time.Duration
	// SnapshotRetention is the age past which a snapshot other than the
	// newest is deleted, at a snapshot pass; default 1h.
	SnapshotRetention time.Duration
	// L0Retention is how long a shipped transaction's own file is kept
	// once it is merged into level 1, default 1m.
	L0Retention time.Duration
	// Logger receives Litestream's log and the Replicator's own (its
	// loop's "sync failed" and "sync resumed"); nil discards them.
	Logger *slog.Logger
	// Owner is the store replicating (remote.ReplicaOwnerOf), which the
	// replica's owner object must name or come to name
	// (remote.ClaimReplica); Start needs it, Restore ignores it.
	Owner remote.ReplicaOwner
	// TakeOver makes Start claim a replica whose owner object names
	// another store: from then on that store is refused there.
	TakeOver bool
	// IdleTimeout bounds each call to the object store through
	// Litestream's client as remote.Options.IdleTimeout bounds the blob
	// tier's attempts: a request sent may wait this long for the first
	// byte of its answer, and the call ten times this for any byte,
	// before it fails with store.busy; default remote.DefaultIdleTimeout.
	// A stalled call is not retried (idleClient).
	IdleTimeout time.Duration
}

// Defaults of Options.
const (
	DefaultSnapshotInterval  = time.Hour
	DefaultSnapshotRetention = time.Hour
	DefaultL0Retention       = time.Minute
)

// DefaultLevels are the default Options.Levels.
var DefaultLevels = []time.Duration{30 * time.Second, 5 * time.Minute}

func (o Options) withDefaults() Options {
	if o.Interval <= 0 {
		o.Interval = litestream.DefaultMonitorInterval
	}
	if len(o.Levels) == 0 {
		o.Levels = DefaultLevels
	}
	if o.SnapshotInterval <= 0 {
		o.SnapshotInterval = DefaultSnapshotInterval
	}
	if o.SnapshotRetention <= 0 {
		o.SnapshotRetention = DefaultSnapshotRetention
	}
	if o.L0Retention <= 0 {
		o.L0Retention = DefaultL0Retention
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = remote.DefaultIdleTimeout
	}
	return o
}

// client builds Litestream's S3 client for an s3:// URL of the form
// remote.ParseURL takes (s3://BUCKET/PREFIX?endpoint=…&region=…), its
// calls bounded by opts.IdleTimeout (idleClient). Credentials come from
// the environment or the shared AWS files. It fails with
// store.invalid_options for a bad URL, or one naming a profile
// (Litestream's client reads AWS_PROFILE, not a URL parameter).
func client(ctx context.Context, url string, opts Options) (*idleClient, error) {
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
	c.SetLogger(opts.Logger)
	return &idleClient{ReplicaClient: c, idle: opts.IdleTimeout}, nil
}

// Replicator ships one database's transactions to a replica while it is
// open, and compacts the replica and its local state as Options say.
type Replicator struct {
	store  *litestream.Store
	db     *litestream.DB
	unlock func()

	url      string
	owner    remote.ReplicaOwner
	takeOver bool
	interval time.Duration
	logger   *slog.Logger
	mu       sync.Mutex
	claim    *remote.Claim // nil until the replica is claimed and store opened
	synced   bool          // Litestream's first sync is made (firstSync)
	tries    Backoff       // watch's

	stop chan struct{} // closed at Close: watch returns
	done chan struct{} // closed when watch has returned
}

// Start starts replicating the SQLite database at path to the replica at
// url, in the background, until Close. Litestream keeps its own state in
// a directory beside the database (".NAME-litestream"), and one
// Replicator at a time ships a database: another one shipping it, in this
// process or another, is store.busy (on platforms without flock, in this
// process only). The replica must be opts.Owner's: Start claims it
// (remote.ClaimReplica) before Litestream writes anything, and a replica
// another store replicates to is store.conflict, nothing there changed,
// unless opts.TakeOver. When the object store does not answer, the claim
// and the start of Litestream wait for the first Sync that reaches it.
// It fails with store.invalid_options for a bad URL, no opts.Owner or a
// level interval that is not positive.
func Start(ctx context.Context, path, url string, opts Options) (*Replicator, error) {
	opts = opts.withDefaults()
	levels := litestream.CompactionLevels{{Level: 0}}
	for i, d := range opts.Levels {
		if d <= 0 {
			return nil, wserr.New(wserr.InvalidOptions, "replicate", path, "level %d's interval %s: give a positive duration", i+1, d)
		}
		levels = append(levels, &litestream.CompactionLevel{Level: i + 1, Interval: d})
	}
	if err := levels.Validate(); err != nil {
		return nil, wserr.Wrap(wserr.InvalidOptions, "replicate", path, err)
	}
	c, err := client(ctx, url, opts)
	if err != nil {
		return nil, err
	}
	if err := c.Init(ctx); err != nil {
		return nil, unavailable("replicate", url, err)
	}
	db := litestream.NewDB(path)
	// Two replicators would write the same files of the local state
	// under each other, and one fails at random with an error of
	// Litestream's own.
	if err := os.MkdirAll(db.MetaPath(), 0o755); err != nil {
		return nil, wserr.FromFS("replicate", path, err)
	}
	unlockMeta, held, err := lockMeta(db.MetaPath())
	switch {
	case err != nil:
		return nil, wserr.FromFS("replicate", path, err)
	case held:
		return nil, wserr.New(wserr.Busy, "replicate", path, "another replicator (wsctl replicate) is shipping this database: stop it first")
	}
	// The store's own descriptor of the -shm file stays open until
	// Litestream has closed the database (Close): closed before, when the
	// store was (wsctl replicate closes it first), it dropped Litestream's
	// read lock, and the store's other processes folded the log back and
	// started it over behind Litestream's last sync.
	releaseShm := index.HoldShm(path)
	unlock := func() {
		releaseShm()
		unlockMeta()
	}
	// Litestream's own monitor syncs without the log held still, which
	// its first sync needs (firstSync): watch syncs instead.
	db.MonitorInterval = 0
	r := litestream.NewReplicaWithClient(db, c)
	r.SyncInterval = opts.Interval
	db.Replica = r
	// The store runs the compaction, snapshot and retention monitors; a
	// bare DB runs none, and every transaction stayed a file of its own
	// on the replica and beside the database.
	s := litestream.NewStore([]*litestream.DB{db}, levels)
	s.Logger = opts.Logger
	db.SetLogger(opts.Logger)
	s.SnapshotInterval = opts.SnapshotInterval
	s.SnapshotRetention = opts.SnapshotRetention
	s.SetL0Retention(opts.L0Retention)
	s.L0RetentionCheckInterval = min(opts.Levels[0], litestream.DefaultL0RetentionCheckInterval)
	rep := &Replicator{store: s, db: db, unlock: unlock, url: url, owner: opts.Owner, takeOver: opts.TakeOver,
		interval: opts.Interval, logger: opts.Logger, stop: make(chan struct{}), done: make(chan struct{}),
		tries: Backoff{What: "sync", Interval: opts.Interval, Logger: opts.Logger}}
	// Once Litestream is started, a failure of its first sync is the
	// next Sync's to report (and retry).
	if err := rep.ready(ctx); err != nil && !errors.Is(err, remote.ErrUnavailable) && rep.claim == nil {
		unlock()
		return nil, err
	}
	return rep, nil
}

// ready claims the replica and starts Litestream on it, if that is not
// done yet; else it checks that the replica is still the store's. Then
// it makes Litestream's first sync, if that is not done yet (firstSync).
func (r *Replicator) ready(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.claim != nil {
		if err := r.claim.Check(ctx); err != nil {
			return err
		}
		return r.firstSync(ctx)
	}
	claim, err := remote.ClaimReplica(ctx, r.url, r.owner, r.takeOver)
	if err != nil {
		return err
	}
	if err := r.align(ctx); err != nil {
		return err
	}
	if err := r.store.Open(ctx); err != nil {
		return wserr.Wrap(wserr.Internal, "replicate", r.db.Path(), err)
	}
	r.claim = claim
	go r.watch()
	return r.firstSync(ctx)
}

// watch reads the write-ahead log into Litestream's local state every
// interval, as Litestream's own monitor would, until Close; Litestream
// ships what it read in the background. While its tries fail (the
// object store does not answer, or refuses the credentials), it backs
// off (Backoff "sync"): it waits the interval after the first failure
// and twice as long after each next one, up to maxBackoff; a Sync that
// succeeds makes it try at its next turn. Each failed try is logged (a
// warning, with the count of failed tries so far), so at the backoff's
// pace, and the try that succeeds after them too.
//
// A read of the log is never cancelled midway (Close waits for it, and
// Sync reads it whatever its context): Litestream's checkpoint lets go of
// its read transaction and takes a new one after it, and cancelled in
// between it went on without one, through its last sync at Close too.
// Then nothing kept the store's writers from starting the log over
// behind it, which it then misread as above (firstsync.go).
func (r *Replicator) watch() {
	defer close(r.done)
	ctx := context.Background()
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		r.mu.Lock()
		if r.tries.Due(time.Now()) {
			r.try(ctx)
		}
		r.mu.Unlock()
	}
}

// try is one turn of watch; r.mu is held.
func (r *Replicator) try(ctx context.Context) {
	err := r.firstSync(ctx)
	if err == nil {
		err = r.db.Sync(ctx)
	}
	r.tries.Done(time.Now(), err, "path", r.db.Path())
}

// markerName names the file in Litestream's local state directory that
// says which replica (bucket and prefix) that state was shipped to.
const markerName = "wsstore-replica"

// align makes Litestream's local state one the replica can follow on
// from, before Litestream starts. Litestream ships the local transactions
// after the replica's last, by number, and prunes locally those merged on
// the replica. So the state is dropped, and Litestream ships the whole
// database again (as the first transaction of an empty replica, or above
// the last of one it is behind), when it was shipped to another replica
// (its transactions are numbered as that one's), and when the replica
// ends before the first transaction it holds (a replica emptied:
// Litestream would look for a transaction pruned long ago, every round).
func (r *Replicator) align(ctx context.Context) error {
	loc, err := remote.ParseURL(r.url)
	if err != nil {
		return err
	}
	here := loc.Bucket + "/" + strings.TrimSuffix(loc.Prefix, "/") + "\n"
	marker := filepath.Join(r.db.MetaPath(), markerName)
	reset := false
	switch was, err := os.ReadFile(marker); {
	case err == nil:
		// A state of an earlier build has no marker: it is checked
		// against the replica's end alone.
		reset = string(was) != here
	case !errors.Is(err, fs.ErrNotExist):
		return wserr.FromFS("replicate", marker, err)
	}
	if !reset {
		info, err := r.db.Replica.MaxLTXFileInfo(ctx, 0)
		if err != nil {
			return unavailable("replicate", r.url, err)
		}
		_, local, err := r.db.MaxLTX()
		if err != nil {
			return wserr.FromFS("replicate", r.db.Path(), err)
		}
		if local > info.MaxTXID {
			next := r.db.LTXPath(0, info.MaxTXID+1, info.MaxTXID+1)
			switch _, err := os.Stat(next); {
			case errors.Is(err, fs.ErrNotExist):
				reset = true
			case err != nil:
				return wserr.FromFS("replicate", next, err)
			}
		}
	}
	if reset {
		if err := r.db.ResetLocalState(ctx); err != nil {
			return wserr.FromFS("replicate", r.db.Path(), err)
		}
	}
	if err := os.WriteFile(marker, []byte(here), 0o644); err != nil {
		return wserr.FromFS("replicate", marker, err)
	}
	return nil
}

// Sync ships every transaction committed so far and returns once the
// replica holds them. It first reads the replica's owner object (claims
// the replica, when Start could not) and fails with store.conflict when
// another store has claimed it (a store restored from it, or one that
// took it over): stop replicating then. It fails with store.busy when the
// object store cannot be reached (what was shipped stays shipped, and a
// later Sync ships the rest), and store.disk_full when Litestream's local
// state meets a full disk.
func (r *Replicator) Sync(ctx context.Context) error {
	if err := r.ready(ctx); err != nil {
		return err
	}
	r.mu.Lock()
	err := r.db.Sync(context.WithoutCancel(ctx)) // see watch
	if err == nil {
		r.tries.Hurry() // watch tries at its next turn
	}
	r.mu.Unlock()
	if err == nil {
		err = r.db.Replica.Sync(ctx)
	}
	if err != nil {
		return syncError(r.db.Path(), err)
	}
	return nil
}

// Close ships what is left, stops replicating and releases the database;
// after a Sync that found the replica claimed by another store, it still
// ships what Litestream took from the log since the last Sync.
// Call it after the process's own connections to the database are
// closed: it closes Litestream's descriptors of the file, and closing any
// descriptor of a file drops every POSIX lock the process holds on it.
func (r *Replicator) Close(ctx context.Context) error {
	defer r.unlock()
	r.mu.Lock()
	started := r.claim != nil
	r.mu.Unlock()
	if !started {
		// Never started: the object store did not answer, or another
		// store holds the replica.
		return nil
	}
	close(r.stop)
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.store.Close(ctx); err != nil {
		return syncError(r.db.Path(), err)
	}
	return nil
}

// Restore builds the database at path from the replica at url, at the
// latest transaction the replica holds, and checks it with SQLite's
// integrity check. It fails with store.invalid_options when a file is at
// path already, store.not_found when the replica holds nothing,
// store.busy when the object store cannot be reached, store.corrupt when
// the replica's files do not make a sound database (one missing, cut
// short or altered, or a database that fails the check), and
// store.disk_full when the disk at path is full.
func Restore(ctx context.Context, url, path string, opts Options) error {
	opts = opts.withDefaults()
	if _, err := os.Stat(path); err == nil {
		return wserr.New(wserr.InvalidOptions, "restore", path, "a database is there already: restore into a new directory")
	}
	c, err := client(ctx, url, opts)
	if err != nil {
		return err
	}
	if err := c.Init(ctx); err != nil {
		return unavailable("restore", url, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return wserr.FromFS("restore", path, err)
	}
	db := litestream.NewDB(path)
	db.SetLogger(opts.Logger)
	r := litestream.NewReplicaWithClient(db, c)
	o := litestream.NewRestoreOptions()
	o.OutputPath = path
	o.IntegrityCheck = litestream.IntegrityCheckQuick
	err = r.Restore(ctx, o)
	if err == nil {
		return nil
	}
	if errors.Is(err, litestream.ErrNoSnapshots) || errors.Is(err, litestream.ErrTxNotAvailable) {
		// Nothing to start from: an empty replica, or one whose first
		// files are gone.
		n, lerr := ltxFiles(ctx, c)
		switch {
		case lerr != nil:
			return restoreError(url, path, lerr)
		case n == 0:
			return wserr.New(wserr.NotFound, "restore", url, "no replica here: run wsctl replicate on the source store first")
		}
		return wserr.New(wserr.Corrupt, "restore", url, "the replica holds %d files but neither a snapshot nor its first transaction to start from: it was damaged; replicate the source store to a new URL", n)
	}
	return restoreError(url, path, err)
}

// ltxFiles counts the files of every level of the replica.
func ltxFiles(ctx context.Context, c litestream.ReplicaClient) (int, error) {
	n := 0
	for level := 0; level <= litestream.SnapshotLevel; level++ {
		itr, err := c.LTXFiles(ctx, level, 0, false)
		if err != nil {
			return n, err
		}
		for itr.Next() {
			n++
		}
		if err := itr.Close(); err != nil {
			return n, err
		}
	}
	return n, nil
}

// restoreError codes a failed restore into path from url: a cancelled
// context stays itself; a request refused (unavailable's rules) is
// store.invalid_options and one the object store did not answer
// store.busy; a failure of the local file system is coded as FromFS
// codes it (store.disk_full for a full disk); anything else is the
// replica's content failing to make a database (a file missing, cut
// short or altered, the integrity check failing): store.corrupt.
func restoreError(url, path string, err error) error {
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("restore %s: %w", url, err)
	case remote.Refused("restore", url, err) != nil:
		return remote.Refused("restore", url, err)
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT), errors.Is(err, syscall.EROFS):
		return wserr.FromFS("restore", path, err)
	case errors.As(err, &pe), errors.As(err, &le):
		return wserr.FromFS("restore", path, err)
	case unreachable(err):
		return unavailable("restore", url, err)
	}
	return &wserr.Error{Code: wserr.Corrupt, Op: "restore", Path: url, Msg: "the replica does not make a sound database", Err: trimmed{err}}
}

// syncError codes a failed sync of the database at path: a full disk, a
// quota or a read-only file system as FromFS codes it; an object store
// that did not answer, or refused the request, as unavailable does
// (store.busy, to be tried again, or store.invalid_options); any other
// failure (of Litestream's local state, say) store.internal, which a
// later round would meet again.
func syncError(path string, err error) error {
	switch {
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT), errors.Is(err, syscall.EROFS):
		return wserr.FromFS("replicate", path, err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		remote.Refused("replicate", path, err) != nil, unreachable(err):
		return unavailable("replicate", path, err)
	}
	return wserr.Wrap(wserr.Internal, "replicate", path, trimmed{err})
}

// unreachable reports whether err is a request the object store did not
// answer, or answered with a server error or a throttle, after the SDK's
// retries, or a call given up because it stopped answering (idleClient).
func unreachable(err error) bool {
	var ne *net.OpError
	var ue *url.Error
	var re *smithyhttp.ResponseError
	var oe *smithy.OperationError
	var se *stalledError
	switch {
	case errors.As(err, &ne), errors.As(err, &ue), errors.As(err, &se):
		return true
	case errors.As(err, &re):
		s := re.HTTPStatusCode()
		return s == 0 || s >= 500 || s == http.StatusTooManyRequests || s == http.StatusRequestTimeout
	case errors.As(err, &oe):
		// The SDK's retries given up on a request that failed before any
		// answer, and is not one of the above.
		return strings.Contains(oe.Error(), "exceeded maximum number of attempts")
	}
	return false
}

// trimmed is err with a message that drops Litestream's own prefixes
// ("cannot calc restore plan: ", "get v0.3.x time bounds: s3: list
// generations: ", "decode database: "), keeping what failed; err stays
// reachable with errors.Unwrap.
type trimmed struct{ err error }

func (t trimmed) Unwrap() error { return t.err }

func (t trimmed) Error() string {
	msg := t.err.Error()
	for _, p := range []string{
		"cannot calc restore plan: ",
		"get v0.3.x time bounds: ",
		"get LTX time bounds: ",
		"s3: list generations: ",
		"decode database: ",
		"post-restore integrity check: ",
	} {
		msg = strings.Replace(msg, p, "", 1)
	}
	return msg
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
	return fmt.Errorf("%w: %w", wserr.Wrap(wserr.Busy, op, what, trimmed{err}), remote.ErrUnavailable)
}
