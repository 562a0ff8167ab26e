package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/wsstore/wsstore/wserr"
)

// Locks on the object store (docs/remote.md, "Locks"): a sync holds a
// shared lock, locks/sync/DEVICE-NANOS, for as long as it runs, and a push
// outside a sync holds one of its own, locks/push/DEVICE-NANOS; a reclaim
// holds the exclusive lease, locks/reclaim/N, the next number after the
// highest there, taken by a conditional PUT (If-None-Match: *), so two
// devices never hold lease N both. Each writes its lock first and then
// looks for the other kind, so of a sync (or push) and a reclaim that
// start together at least one sees the other and gives up (store.busy).
// A lock names its holder and when it expires; an expired one counts as
// absent, and is removed by the next reclaim. The lease is short and the
// reclaim writes it again as it goes (lease.hold, and a heartbeat),
// removing nothing once it could not: a device that saw it expired may
// have taken it since.
const (
	syncLockDir    = "locks/sync/"
	pushLockDir    = "locks/push/"
	reclaimLockDir = "locks/reclaim/"
)

// defaultLockTTL is how long a sync or push lock holds unless released.
const defaultLockTTL = time.Hour

// DefaultLeaseTTL is how long a reclaim lease holds unless renewed or
// released: a reclaim killed part way blocks the devices' syncs at most
// this long.
const DefaultLeaseTTL = 5 * time.Minute

// lockBody is a lock object's content.
type lockBody struct {
	Device  string    `json:"device"`
	At      time.Time `json:"at"`
	Expires time.Time `json:"expires"`
}

type lockObj struct {
	key  string
	body lockBody
}

// ErrLocked is wrapped (with store.busy) by a sync, push or reclaim that
// found the other kind holding its lock.
var ErrLocked = errors.New("the object store is locked")

// ErrLeaseLost is wrapped (with store.busy) by a reclaim whose lease ended
// before it was renewed: another device may hold the lease since, so the
// reclaim removed nothing more.
var ErrLeaseLost = errors.New("the reclaim lease was lost")

func (s *Storage) readLocks(ctx context.Context, dir string) ([]lockObj, error) {
	var keys []string
	if err := s.b.list(ctx, dir, "", func(key string, _ time.Time) error { keys = append(keys, key); return nil }); err != nil {
		return nil, err
	}
	var out []lockObj
	for _, k := range keys {
		b, err := readSmall(ctx, s.b, k)
		if errors.Is(err, ErrMissing) {
			continue // released meanwhile
		}
		if err != nil && !errors.Is(err, errTooLarge) {
			return nil, err
		}
		var lb lockBody
		if err != nil || json.Unmarshal(b, &lb) != nil {
			lb = lockBody{} // unreadable: expired
		}
		out = append(out, lockObj{key: k, body: lb})
	}
	return out, nil
}

func (s *Storage) live(l lockObj) bool { return s.opts.Now().Before(l.body.Expires) }

// lockBytes is the body of a lock of device that expires ttl from now,
// and when that is.
func (s *Storage) lockBytes(device string, ttl time.Duration) ([]byte, time.Time) {
	now := s.opts.Now()
	expires := now.Add(ttl).UTC()
	b, _ := json.Marshal(lockBody{Device: device, At: now.UTC(), Expires: expires})
	return b, expires
}

// locked is the error of op, for device, that found lock l live.
func locked(op, device string, l lockObj) error {
	until := l.body.Expires.Format(time.RFC3339)
	if l.body.Device == device {
		// Of this very device: a command of its store that was killed
		// or failed part way left it, or one runs now.
		return fmt.Errorf("%w: %w", wserr.New(wserr.Busy, op, l.key, "this device (%s) holds the lock until %s: another command of this store is running, or one was killed or failed before it could remove the lock; it expires then",
			device, until), ErrLocked)
	}
	return fmt.Errorf("%w: %w", wserr.New(wserr.Busy, op, l.key, "device %s holds the lock until %s; try again later",
		l.body.Device, until), ErrLocked)
}

// LockSync takes device's shared sync lock and returns its release,
// which takes the error the sync ended with (nil for success): after a
// failure the lock's removal is tried once (releaseLock). It fails with
// store.busy wrapping ErrLocked while a live reclaim lease is on the
// object store, having removed its own lock again. The device's earlier
// sync locks (of syncs that failed before they could remove theirs) are
// removed: a device runs one sync at a time.
func (s *Storage) LockSync(ctx context.Context, device string) (release func(ctx context.Context, failed error) error, err error) {
	key := fmt.Sprintf("%s%s-%020d", syncLockDir, device, s.opts.Now().UnixNano())
	if release, err = s.sharedLock(ctx, "sync", key, device); err != nil {
		return nil, err
	}
	mine, err := s.readLocks(ctx, syncLockDir+device+"-")
	if err != nil {
		_ = release(ctx, err)
		return nil, fmt.Errorf("lock: %w", err)
	}
	for _, l := range mine {
		// The device's earlier locks are of syncs that failed before
		// they could remove them.
		if l.key != key {
			if err := s.b.remove(ctx, l.key); err != nil {
				_ = release(ctx, err)
				return nil, fmt.Errorf("lock: %w", err)
			}
		}
	}
	return release, nil
}

// lockPush takes a push's shared lock for device. A device's earlier push
// locks stay: another process of the device may be pushing; those of
// pushes that failed expire, and a reclaim removes them.
func (s *Storage) lockPush(ctx context.Context, device string) (release func(ctx context.Context, failed error) error, err error) {
	return s.sharedLock(ctx, "push", fmt.Sprintf("%s%s-%020d", pushLockDir, device, s.opts.Now().UnixNano()), device)
}

// sharedLock writes the lock object key unless a live reclaim lease is
// there, then looks again, so that a reclaim whose lease it did not see
// the first time sees the lock (lockReclaim writes its lease before it
// looks for locks).
func (s *Storage) sharedLock(ctx context.Context, op, key, device string) (release func(ctx context.Context, failed error) error, err error) {
	check := func() error {
		leases, err := s.readLocks(ctx, reclaimLockDir)
		if err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		for _, l := range leases {
			if s.live(l) {
				return locked(op, device, l)
			}
		}
		return nil
	}
	if err := check(); err != nil {
		return nil, err
	}
	body, _ := s.lockBytes(device, s.opts.LockTTL)
	if _, err := s.b.put(ctx, key, body); err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	release = func(ctx context.Context, failed error) error { return s.releaseLock(ctx, key, failed) }
	if err := check(); err != nil {
		_ = release(ctx, err)
		return nil, err
	}
	return release, nil
}

// lease is the reclaim lease a device holds: its key, and when it ends as
// last written. The reclaim holds it before each step (hold), and a
// heartbeat does every tenth of LeaseTTL, so a step that blocks (a long
// download) does not outlast it.
type lease struct {
	s      *Storage
	key    string
	device string
	stop   chan struct{}
	done   chan struct{}

	mu      sync.Mutex
	expires time.Time
	err     error // lost: every hold from then on fails with it
}

// hold keeps the lease: once a third of its time has passed since it was
// written, it writes it again, to end LeaseTTL from now, so a step starts
// with at least two thirds of it left. It fails with store.busy wrapping
// ErrLeaseLost when the lease has ended, when the renewal was not
// answered, or when it was answered only after the lease ended: a device
// that found it ended may have taken the lease, or started a sync, since;
// a renewal refused (the credentials, their permissions, the bucket)
// fails the same way coded store.invalid_options, as a refused put is. A
// renewal that fails because ctx ended is ctx's error (store.canceled):
// the lease is not lost then.
func (l *lease) hold(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return l.err
	}
	ttl := l.s.opts.LeaseTTL
	now := l.s.opts.Now()
	switch {
	case !now.Before(l.expires):
		l.err = l.lost("it ended before it was renewed")
		return l.err
	case l.expires.Sub(now) > ttl-ttl/3:
		return nil
	}
	b, expires := l.s.lockBytes(l.device, ttl)
	if err := l.s.b.replace(ctx, l.key, b); err != nil {
		if ctx.Err() != nil {
			return err // the caller's context ended: the lease is not lost
		}
		// Coded as the request's failure is: refused (the credentials,
		// their permissions, the bucket) is a setup to fix, as a put's
		// refusal is; not answered is store.busy.
		l.err = fmt.Errorf("%w: %w", l.lostAs(wserr.CodeOf(err), "it could not be renewed"), err)
		return l.err
	}
	if !l.s.opts.Now().Before(l.expires) {
		l.err = l.lost("its renewal was answered after it ended")
		return l.err
	}
	l.expires = expires
	return nil
}

// heartbeat holds the lease every tenth of LeaseTTL until it is released
// or lost.
func (l *lease) heartbeat(ctx context.Context) {
	defer close(l.done)
	tick := time.NewTicker(max(l.s.opts.LeaseTTL/10, time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-tick.C:
			if l.hold(ctx) != nil {
				return
			}
		}
	}
}

// bound returns ctx ending when the lease does (by this device's clock),
// for a removal: one not answered by then is given up, so that none lands
// once another device may hold the lease.
func (l *lease) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return context.WithTimeout(ctx, l.expires.Sub(l.s.opts.Now()))
}

func (l *lease) lost(why string) error { return l.lostAs(wserr.Busy, why) }

// lostAs is lost coded code: a renewal's failure gives it its own.
func (l *lease) lostAs(code wserr.Code, why string) error {
	return fmt.Errorf("%w: %w", wserr.New(code, "reclaim remote", l.key,
		"the reclaim lost its lease (%s; another device may hold it now) and removed nothing more; what it removed stays removed: run it again", why), ErrLeaseLost)
}

// release stops the heartbeat and removes the lease, once the reclaim
// ended with failed (nil for success), as releaseLock does.
func (l *lease) release(ctx context.Context, failed error) error {
	if l.stop != nil {
		close(l.stop)
		<-l.done
	}
	return l.s.releaseLock(ctx, l.key, failed)
}

// interruptedRelease bounds the removal of a lock object once the work it
// guarded was interrupted (its context ended).
var interruptedRelease = 5 * time.Second

// releaseLock removes the lock object key once the work it guarded
// ended, failed being the error it ended with (nil for success). After
// success the removal has every attempt. When ctx has ended (the command
// was interrupted) the removal goes on, but for interruptedRelease at
// most; after any other failure it is tried once. An object store that
// stopped answering would otherwise hold the command that already failed
// for every attempt of the request, each waiting IdleTimeout, and a lock
// left behind only expires (a device's next sync removes its earlier sync
// locks at once). A removal cut off so fails with store.busy wrapping
// ErrUnavailable.
func (s *Storage) releaseLock(ctx context.Context, key string, failed error) error {
	if ctx.Err() == nil && failed != nil {
		return s.b.removeOnce(ctx, key)
	}
	rctx, cancel := context.WithoutCancel(ctx), context.CancelFunc(func() {})
	if ctx.Err() != nil {
		rctx, cancel = context.WithTimeout(rctx, interruptedRelease)
	}
	defer cancel()
	err := s.b.remove(rctx, key)
	if err != nil && rctx.Err() != nil && errors.Is(err, rctx.Err()) {
		return fmt.Errorf("%w: %w", wserr.Wrap(wserr.Busy, "remote delete", key, err), ErrUnavailable)
	}
	return err
}

// lockReclaim takes the exclusive reclaim lease for device, for LeaseTTL.
// It fails with store.busy wrapping ErrLocked while another lease is live,
// or a sync or push lock is (the lease is given back then).
func (s *Storage) lockReclaim(ctx context.Context, device string) (*lease, error) {
	leases, err := s.readLocks(ctx, reclaimLockDir)
	if err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	next := int64(1)
	for _, l := range leases {
		if s.live(l) {
			return nil, locked("reclaim remote", device, l)
		}
		if n, err := strconv.ParseInt(strings.TrimPrefix(l.key, reclaimLockDir), 10, 64); err == nil && n >= next {
			next = n + 1
		}
	}
	l := &lease{s: s, key: fmt.Sprintf("%s%020d", reclaimLockDir, next), device: device}
	body, expires := s.lockBytes(device, s.opts.LeaseTTL)
	wrote, err := s.b.put(ctx, l.key, body)
	if err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	if !wrote {
		return nil, fmt.Errorf("%w: %w", wserr.New(wserr.Busy, "reclaim remote", l.key, "another device took the lease first; try again later"), ErrLocked)
	}
	l.expires = expires
	// A device that listed before this one's lease was written may have
	// taken another number: whoever sees the other's gives up.
	again, err := s.readLocks(ctx, reclaimLockDir)
	if err != nil {
		_ = l.release(ctx, err)
		return nil, fmt.Errorf("lock: %w", err)
	}
	for _, o := range again {
		if o.key != l.key && s.live(o) {
			err := locked("reclaim remote", device, o)
			_ = l.release(ctx, err)
			return nil, err
		}
	}
	for _, dir := range []string{syncLockDir, pushLockDir} {
		shared, err := s.readLocks(ctx, dir)
		if err != nil {
			_ = l.release(ctx, err)
			return nil, fmt.Errorf("lock: %w", err)
		}
		for _, o := range shared {
			if s.live(o) {
				err := locked("reclaim remote", device, o)
				_ = l.release(ctx, err)
				return nil, err
			}
		}
	}
	// Leases before this one are expired: they go.
	for _, o := range leases {
		if err := s.b.remove(ctx, o.key); err != nil {
			_ = l.release(ctx, err)
			return nil, fmt.Errorf("lock: %w", err)
		}
	}
	l.stop, l.done = make(chan struct{}), make(chan struct{})
	go l.heartbeat(ctx)
	return l, nil
}

// expiredLocks returns the sync and push locks that are past their
// expiry.
func (s *Storage) expiredLocks(ctx context.Context) ([]string, error) {
	var out []string
	for _, dir := range []string{syncLockDir, pushLockDir} {
		shared, err := s.readLocks(ctx, dir)
		if err != nil {
			return nil, err
		}
		for _, l := range shared {
			if !s.live(l) {
				out = append(out, l.key)
			}
		}
	}
	return out, nil
}
