package remote

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/wserr"
)

// parseObjectName reads a version 1 segment's name of an object,
// "KIND:HASH".
func parseObjectName(name string) (cas.Kind, cas.Hash, bool) {
	ks, hs, ok := strings.Cut(name, ":")
	if !ok || (ks != "0" && ks != "1") {
		return 0, cas.Hash{}, false
	}
	h, err := cas.ParseHash(hs)
	if err != nil {
		return 0, cas.Hash{}, false
	}
	return cas.Kind(ks[0] - '0'), h, true
}

// recordKey is an object's key in a scratch set: its record.
func recordKey(kind cas.Kind, h cas.Hash) []byte {
	rec := record(kind, h)
	return rec[:]
}

// objectSets returns (in sc, on disk: a base names every object its
// device records) every object any device's segments from its newest base
// on add, dropped since or not, with the segments older than each device's
// newest base and each registered device's newest segment (the zero
// Segment for one that has written none). A segment a device has
// yet to read may bring in a run whose objects its writer dropped after
// it: those objects are kept until a base stands for the segment. It
// holds the lease l as it goes.
func (s *Storage) objectSets(ctx context.Context, sc *index.Scratch, l *lease) (named *index.ScratchMap, superseded []Segment, newest map[string]Segment, err error) {
	if named, err = sc.NewMap(ctx); err != nil {
		return nil, nil, nil, err
	}
	newest = map[string]Segment{}
	devs, err := s.Devices(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	for _, d := range devs {
		segs, err := s.Segments(ctx, d, "")
		if err != nil {
			return nil, nil, nil, err
		}
		newest[d] = Segment{} // none: a device that may record what no segment names
		if len(segs) > 0 {
			newest[d] = segs[len(segs)-1]
		}
		from := FromBase(segs)
		superseded = append(superseded, segs[:len(segs)-len(from)]...)
		for _, seg := range from {
			if err := l.hold(ctx); err != nil {
				return nil, nil, nil, err
			}
			h, off, err := s.readHeader(ctx, seg)
			if err != nil {
				return nil, nil, nil, err
			}
			if err := s.eachObject(ctx, seg, h, off, func(dropped bool, kind cas.Kind, hash cas.Hash) error {
				if err := l.hold(ctx); err != nil || dropped {
					return err
				}
				_, err := named.Add(ctx, recordKey(kind, hash), 1)
				return err
			}); err != nil {
				return nil, nil, nil, err
			}
		}
	}
	return named, superseded, newest, nil
}

// cutOff returns the devices, other than device, whose last sync (or
// pull) ended without publishing its segment, and the keys of the expired
// sync locks that say so. A sync takes in other devices' records before
// it publishes the object set that names them; cut off in between (the
// network lost, the process killed), it leaves its lock to expire, dated
// after the device's newest segment (its At: the device's own clock, as
// the lock's is). What such a device took in is named nowhere until its
// next sync publishes, so no pack may go meanwhile.
func (s *Storage) cutOff(ctx context.Context, device string, newest map[string]Segment) (devices []string, locks map[string]bool, err error) {
	held, err := s.readLocks(ctx, syncLockDir)
	if err != nil {
		return nil, nil, err
	}
	locks = map[string]bool{}
	for _, l := range held {
		d := l.body.Device
		if s.live(l) || d == "" || d == device || !l.body.At.After(newest[d].At) {
			continue
		}
		locks[l.key] = true
		if !slices.Contains(devices, d) {
			devices = append(devices, d)
		}
	}
	slices.Sort(devices)
	return devices, locks, nil
}

// unpublished reports whether device has written no segment at or after
// since, as the object store dates them (newest: each device's newest, as
// objectSets returns them): it may record objects it pushed that no
// segment of it names yet.
func unpublished(newest map[string]Segment, device string, since time.Time) bool {
	last := newest[device].Modified // zero: none, or the store does not say
	return last.IsZero() || last.Before(since)
}

// ReclaimOptions configure Reclaim. The zero value means the defaults
// given.
type ReclaimOptions struct {
	// Grace is how old an object must be before Reclaim may remove it,
	// default 7 days; negative means none (tests, and a bucket only this
	// store uses).
	Grace time.Duration
	// Max bounds the objects one call removes, default 1000 (0); the
	// next call goes on. Negative is workspace.invalid_argument.
	Max int
	// DryRun counts what would be removed and removes nothing.
	DryRun bool
}

// ReclaimStats says what Reclaim removed (or, DryRun, would remove).
type ReclaimStats struct {
	// Packs counts the packs removed (those no index object named
	// among them), Indexes their index objects (and
	// those of chunk lists), Segments the devices' superseded sync
	// segments, Locks the expired sync and push
	// locks.
	Packs    int `json:"packs"`
	Indexes  int `json:"indexes"`
	Segments int `json:"segments"`
	Locks    int `json:"locks"`
	// Kept counts the index objects looked at and kept.
	Kept int `json:"kept"`
	// More says Max stopped the call with more to remove.
	More bool `json:"more"`
	// Waiting names the devices whose last sync was cut off before it
	// published: no pack goes until each has synced again.
	Waiting []string `json:"waiting"`
}

// Reclaim removes from the object store what no store uses, within a
// bound (docs/remote.md, "Reclaiming space"), holding the exclusive
// reclaim lease as device: it fails with store.busy wrapping ErrLocked
// while another device reclaims or any device syncs. A pack goes, with
// its index, when its index is older than the grace and none of its
// objects is in the object set of any device (folded from the device's
// newest base segment through its newest segment: every object its store
// records as of its last sync) or recorded by this store; a pack no index
// object names (left by a reclaim or a push cut off between the two) goes
// when older than the grace, none of the objects the index it ends with
// lists is so used, and every device has published since; a device's
// segments older than its newest base go once older than the grace, and
// so do expired sync locks. While another device's last sync (or pull)
// was cut off before it published its segment (its expired sync lock is
// dated after its newest segment), no pack goes: what that sync took in
// is in no object set yet; such a device is named in Waiting, and its
// lock stays until it syncs again. The object store must say when each object
// was written (LastModified): one it does not is kept. A failure to reach
// the store is store.busy; what was removed stays removed, index objects
// before their packs, so no device learns of a pack that is gone. The
// lease is renewed as the reclaim goes; one that could not be renewed in
// time stops it before its next removal, with store.busy wrapping
// ErrLeaseLost.
func (s *Storage) Reclaim(ctx context.Context, db *index.DB, device string, opts ReclaimOptions) (st ReclaimStats, err error) {
	s.push.Lock()
	defer s.push.Unlock()
	grace := opts.Grace
	switch {
	case grace == 0:
		grace = 7 * 24 * time.Hour
	case grace < 0:
		grace = 0
	}
	if opts.Max < 0 {
		return st, wserr.New(wserr.InvalidArgument, "reclaim remote", "", "max %d is negative (0: 1000)", opts.Max)
	}
	if opts.Max == 0 {
		opts.Max = 1000
	}
	l, err := s.lockReclaim(ctx, device)
	if err != nil {
		return st, err
	}
	defer func() {
		if rerr := l.release(ctx, err); rerr != nil && err == nil {
			err = fmt.Errorf("reclaim: release the lease: %w", rerr)
		}
	}()
	cutoff := s.opts.Now().Add(-grace)
	// A pack's device must have written a segment at least this long
	// after the pack's index: a sync lasts less than LockTTL, so such a
	// segment's object set was taken after the pack was recorded.
	margin := min(grace, s.opts.LockTTL)
	sc, err := index.OpenScratch(ctx)
	if err != nil {
		return st, fmt.Errorf("reclaim: %w", err)
	}
	defer sc.Close()
	named, superseded, newest, err := s.objectSets(ctx, sc, l)
	if err != nil {
		return st, fmt.Errorf("reclaim: %w", err)
	}
	waiting, evidence, err := s.cutOff(ctx, device, newest)
	if err != nil {
		return st, fmt.Errorf("reclaim: %w", err)
	}
	st.Waiting = waiting
	// used reports whether some device's object set names one of idx's
	// objects or this store records it.
	used := func(idx *storedIndex) (u bool, err error) {
		err = db.View(ctx, func(tx *index.Tx) error {
			err := idx.each(func(e entry) error {
				if _, ok, err := named.Get(ctx, recordKey(e.Kind, e.Hash)); ok || err != nil {
					u = ok
					return cmp.Or(err, errUsed)
				}
				if ok, err := s.Has(ctx, tx, e.Kind, e.Hash); ok || err != nil {
					u = ok
					return cmp.Or(err, errUsed)
				}
				return nil
			})
			if errors.Is(err, errUsed) {
				return nil
			}
			return err
		})
		return u, err
	}
	remove := func(key string) error {
		if err := l.hold(ctx); err != nil || opts.DryRun {
			return err
		}
		bctx, cancel := l.bound(ctx)
		defer cancel()
		err := s.b.remove(bctx, key)
		if err != nil && bctx.Err() != nil && ctx.Err() == nil {
			return fmt.Errorf("%w: %w", l.lost("a removal was not answered before it ended"), err)
		}
		return err
	}
	budget := opts.Max
	// Every index object is read, the young ones too: a pack goes only
	// when every index object naming it may go (two devices that pushed
	// the same pack, or one that pushed it again, each wrote their own).
	// They are read as the listing goes by; what the removals need waits
	// in sc: each pack's group (in the order the listing first named it)
	// and whether an index object keeps it, each group's pack, and the
	// index objects that may go by group and place in the listing.
	packs, err := sc.NewMap(ctx) // pack → group<<1, | 1 when kept
	if err != nil {
		return st, fmt.Errorf("reclaim: %w", err)
	}
	groups, err := sc.NewList(ctx) // each group's pack, "" for an index of chunk lists alone
	if err != nil {
		return st, fmt.Errorf("reclaim: %w", err)
	}
	doomed, err := sc.NewMap(ctx) // group, place, key of each index object that may go
	if err != nil {
		return st, fmt.Errorf("reclaim: %w", err)
	}
	var place uint64
	err = s.b.list(ctx, indexDir, "", func(key string, mod time.Time) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := l.hold(ctx); err != nil {
			return err
		}
		pi, err := s.fetchIndex(ctx, key)
		if wserr.CodeOf(err) == wserr.Corrupt && !errors.Is(err, ErrMissing) {
			// It may be what keeps a pack (its device has not published
			// since): nothing goes while it is there.
			return fmt.Errorf("%w (nothing is removed while an index object does not read: remove it from the object store; what it lists stays readable from its pack)", err)
		}
		if err != nil {
			return err
		}
		defer pi.Close()
		gone := len(waiting) == 0 && !mod.IsZero() && mod.Before(cutoff)
		if gone {
			u, err := used(pi)
			if err != nil {
				return err
			}
			gone = !u
		}
		// The pushing device may record the objects and name them in its
		// next segment; this store's own records were asked above.
		if pi.Device != "" && pi.Device != device && unpublished(newest, pi.Device, mod.Add(margin)) {
			gone = false
		}
		group := groups.Len()
		if pi.Pack != "" {
			v, ok, err := packs.Get(ctx, []byte(pi.Pack))
			if err != nil {
				return err
			}
			if !ok {
				if err := groups.Push(ctx, []byte(pi.Pack)); err != nil {
					return err
				}
				v = group << 1
			}
			if !ok || !gone && v&1 == 0 {
				if !gone {
					v |= 1
				}
				if err := packs.Set(ctx, []byte(pi.Pack), v); err != nil {
					return err
				}
			}
			group = v >> 1
		} else if gone {
			if err := groups.Push(ctx, []byte{}); err != nil {
				return err
			}
		}
		if !gone {
			st.Kept++
			return nil
		}
		place++
		k := binary.BigEndian.AppendUint64(nil, uint64(group))
		k = binary.BigEndian.AppendUint64(k, place)
		_, err = doomed.Add(ctx, append(k, key...), 0)
		return err
	})
	if err != nil {
		return st, fmt.Errorf("reclaim: %w", err)
	}
	// The index objects of a pack go before it, so no device learns of a
	// pack that is gone; a pack goes with all of them or waits. An index
	// of chunk lists alone (no pack) goes by itself.
	var keys []string // of the group at hand: a few, the index objects naming one pack
	group, full := int64(-1), false
	settle := func() error {
		if len(keys) == 0 {
			return nil
		}
		pack, err := groups.At(ctx, group)
		if err != nil {
			return err
		}
		if len(pack) > 0 {
			if v, _, err := packs.Get(ctx, pack); err != nil || v&1 != 0 {
				st.Kept += len(keys)
				return err
			}
		}
		need := len(keys)
		if len(pack) > 0 {
			need++
		}
		if full || budget < need {
			st.More, full = true, true
			return nil
		}
		for _, k := range keys {
			if err := remove(k); err != nil {
				return err
			}
			st.Indexes++
			budget--
		}
		if len(pack) > 0 {
			if err := remove(string(pack)); err != nil {
				return err
			}
			st.Packs++
			budget--
		}
		return nil
	}
	err = doomed.Each(ctx, func(k []byte, _ int64) error {
		if g := int64(binary.BigEndian.Uint64(k)); g != group {
			if err := settle(); err != nil {
				return err
			}
			keys, group = keys[:0], g
		}
		keys = append(keys, string(k[16:]))
		return nil
	})
	if err == nil {
		err = settle()
	}
	if err == nil && len(waiting) == 0 {
		err = s.unnamedPacks(ctx, packs, func(mod time.Time) bool {
			if mod.IsZero() || !mod.Before(cutoff) {
				return false
			}
			// The copy of the index a pack ends with names no device:
			// any of them may have pushed it and record its objects
			// without naming them yet.
			for d := range newest {
				if unpublished(newest, d, mod.Add(margin)) {
					return false
				}
			}
			return true
		}, used, func(pack string) (bool, error) {
			if budget < 1 {
				st.More = true
				return false, nil
			}
			if err := remove(pack); err != nil {
				return false, err
			}
			st.Packs++
			budget--
			return true, nil
		})
	}
	if err != nil {
		return st, fmt.Errorf("reclaim: %w", err)
	}
	for _, seg := range superseded {
		if !seg.At.Before(cutoff) {
			continue
		}
		if budget <= 0 {
			st.More = true
			break
		}
		if err := remove(seg.Key); err != nil {
			return st, fmt.Errorf("reclaim: %w", err)
		}
		st.Segments++
		budget--
	}
	stale, err := s.expiredLocks(ctx)
	if err != nil {
		return st, fmt.Errorf("reclaim: %w", err)
	}
	for _, k := range stale {
		if evidence[k] {
			continue
		}
		if err := remove(k); err != nil {
			return st, fmt.Errorf("reclaim: %w", err)
		}
		st.Locks++
	}
	return st, nil
}

// errUsed stops going over an index at its first object in use.
var errUsed = errors.New("in use")

// errEnough stops unnamedPacks' listing once no more may go.
var errEnough = errors.New("enough")

// unnamedPacks calls drop with each pack under data/ that no index object
// names (named: the packs the index objects name, as Reclaim's listing of
// index/ found them), that old says may go by the time it was written,
// and none of whose objects, as the copy of its index it ends with lists
// them, is used: a pack whose index objects a reclaim cut off removed
// before it could remove the pack, or one a push cut off wrote before its
// index object. drop removes it and reports whether another may go. A
// pack whose end does not read as an index is kept. The listing goes by
// page, each pack looked up in named, on disk: nothing of it is held.
func (s *Storage) unnamedPacks(ctx context.Context, named *index.ScratchMap, old func(mod time.Time) bool,
	used func(idx *storedIndex) (bool, error), drop func(pack string) (bool, error)) error {
	err := s.packIndexes(ctx, func(key string, mod time.Time) (bool, error) {
		if !old(mod) {
			return true, nil
		}
		_, ok, err := named.Get(ctx, []byte(key))
		return ok, err
	}, func(pack string, idx *storedIndex) error {
		if u, err := used(idx); err != nil || u {
			return err
		}
		more, err := drop(pack)
		if err == nil && !more {
			err = errEnough
		}
		return err
	})
	if errors.Is(err, errEnough) {
		return nil
	}
	return err
}
