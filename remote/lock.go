package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
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
// absent, and is removed by the next reclaim.
const (
	syncLockDir    = "locks/sync/"
	pushLockDir    = "locks/push/"
	reclaimLockDir = "locks/reclaim/"
)

// defaultLockTTL is how long a lock holds unless released.
const defaultLockTTL = time.Hour

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

func (s *Storage) readLocks(ctx context.Context, dir string) ([]lockObj, error) {
	var keys []string
	if err := s.b.list(ctx, dir, "", func(key string, _ time.Time) error { keys = append(keys, key); return nil }); err != nil {
		return nil, err
	}
	var out []lockObj
	for _, k := range keys {
		b, err := s.b.get(ctx, k, 0, -1)
		if errors.Is(err, ErrMissing) {
			continue // released meanwhile
		}
		if err != nil {
			return nil, err
		}
		var lb lockBody
		if json.Unmarshal(b, &lb) != nil {
			lb = lockBody{} // unreadable: expired
		}
		out = append(out, lockObj{key: k, body: lb})
	}
	return out, nil
}

func (s *Storage) live(l lockObj) bool { return s.opts.Now().Before(l.body.Expires) }

func (s *Storage) lockBytes(device string) []byte {
	now := s.opts.Now()
	b, _ := json.Marshal(lockBody{Device: device, At: now.UTC(), Expires: now.Add(s.opts.LockTTL).UTC()})
	return b
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

// LockSync takes device's shared sync lock and returns its release. It
// fails with store.busy wrapping ErrLocked while a live reclaim lease is
// on the object store, having removed its own lock again. The device's
// earlier sync locks (of syncs that failed before they could remove
// theirs) are removed: a device runs one sync at a time.
func (s *Storage) LockSync(ctx context.Context, device string) (release func(context.Context) error, err error) {
	key := fmt.Sprintf("%s%s-%020d", syncLockDir, device, s.opts.Now().UnixNano())
	if release, err = s.sharedLock(ctx, "sync", key, device); err != nil {
		return nil, err
	}
	mine, err := s.readLocks(ctx, syncLockDir+device+"-")
	if err != nil {
		_ = release(ctx)
		return nil, fmt.Errorf("lock: %w", err)
	}
	for _, l := range mine {
		// The device's earlier locks are of syncs that failed before
		// they could remove them.
		if l.key != key {
			if err := s.b.remove(ctx, l.key); err != nil {
				_ = release(ctx)
				return nil, fmt.Errorf("lock: %w", err)
			}
		}
	}
	return release, nil
}

// lockPush takes a push's shared lock for device. A device's earlier push
// locks stay: another process of the device may be pushing; those of
// pushes that failed expire, and a reclaim removes them.
func (s *Storage) lockPush(ctx context.Context, device string) (release func(context.Context) error, err error) {
	return s.sharedLock(ctx, "push", fmt.Sprintf("%s%s-%020d", pushLockDir, device, s.opts.Now().UnixNano()), device)
}

// sharedLock writes the lock object key unless a live reclaim lease is
// there, then looks again, so that a reclaim whose lease it did not see
// the first time sees the lock (lockReclaim writes its lease before it
// looks for locks).
func (s *Storage) sharedLock(ctx context.Context, op, key, device string) (release func(context.Context) error, err error) {
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
	if _, err := s.b.put(ctx, key, s.lockBytes(device)); err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	release = func(ctx context.Context) error { return s.b.remove(ctx, key) }
	if err := check(); err != nil {
		_ = release(ctx)
		return nil, err
	}
	return release, nil
}

// lockReclaim takes the exclusive reclaim lease for device and returns
// its release. It fails with store.busy wrapping ErrLocked while another
// lease is live, or a sync or push lock is (the lease is given back then).
func (s *Storage) lockReclaim(ctx context.Context, device string) (release func(context.Context) error, err error) {
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
	key := fmt.Sprintf("%s%020d", reclaimLockDir, next)
	wrote, err := s.b.put(ctx, key, s.lockBytes(device))
	if err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	if !wrote {
		return nil, fmt.Errorf("%w: %w", wserr.New(wserr.Busy, "reclaim remote", key, "another device took the lease first; try again later"), ErrLocked)
	}
	release = func(ctx context.Context) error { return s.b.remove(ctx, key) }
	// A device that listed before this one's lease was written may have
	// taken another number: whoever sees the other's gives up.
	again, err := s.readLocks(ctx, reclaimLockDir)
	if err != nil {
		_ = release(ctx)
		return nil, fmt.Errorf("lock: %w", err)
	}
	for _, l := range again {
		if l.key != key && s.live(l) {
			_ = release(ctx)
			return nil, locked("reclaim remote", device, l)
		}
	}
	for _, dir := range []string{syncLockDir, pushLockDir} {
		shared, err := s.readLocks(ctx, dir)
		if err != nil {
			_ = release(ctx)
			return nil, fmt.Errorf("lock: %w", err)
		}
		for _, l := range shared {
			if s.live(l) {
				_ = release(ctx)
				return nil, locked("reclaim remote", device, l)
			}
		}
	}
	// Leases before this one are expired: they go.
	for _, l := range leases {
		if err := s.b.remove(ctx, l.key); err != nil {
			_ = release(ctx)
			return nil, fmt.Errorf("lock: %w", err)
		}
	}
	return release, nil
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
