package remote

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/wserr"
)

// objectList is a device's .objects entry: every object its store
// records, as "KIND:HASH" (0 blob, 1 chunk).
type objectList struct {
	Version int      `json:"version"`
	Device  string   `json:"device"`
	Objects []string `json:"objects"`
}

func objectName(kind cas.Kind, h cas.Hash) string { return fmt.Sprintf("%d:%s", int(kind), h) }

// recorded returns every object the store at db records, by objectName.
func (s *Storage) recorded(ctx context.Context, db *index.DB) (map[string]bool, error) {
	out := map[string]bool{}
	err := db.View(ctx, func(tx *index.Tx) error {
		for _, k := range []cas.Kind{cas.KindBlob, cas.KindChunk} {
			if err := s.Iterate(ctx, tx, k, func(o cas.Object) error {
				out[objectName(k, o.Hash)] = true
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	})
	return out, err
}

// PublishObjects writes the list of every object the store at db records
// under device's name (sync/DEVICE/NANOS-HASH.objects), write-once. Reclaim
// never removes an object the newest list of any device names.
func (s *Storage) PublishObjects(ctx context.Context, db *index.DB, device string, at time.Time) (Archive, error) {
	rec, err := s.recorded(ctx, db)
	if err != nil {
		return Archive{}, err
	}
	l := objectList{Version: 1, Device: device, Objects: make([]string, 0, len(rec))}
	for k := range rec {
		l.Objects = append(l.Objects, k)
	}
	b, err := json.Marshal(l)
	if err != nil {
		return Archive{}, err
	}
	return s.publish(ctx, device, at, b, ".objects")
}

// ReclaimOptions configure Reclaim. The zero value means the defaults
// given.
type ReclaimOptions struct {
	// Grace is how old an object must be before Reclaim may remove it,
	// default 7 days; negative means none (tests, and a bucket only this
	// store uses).
	Grace time.Duration
	// Max bounds the objects one call removes, default 1000; the next
	// call goes on.
	Max int
	// DryRun counts what would be removed and removes nothing.
	DryRun bool
}

// ReclaimStats says what Reclaim removed (or, DryRun, would remove).
type ReclaimStats struct {
	// Packs counts the packs removed, Indexes their index objects (and
	// those of chunk lists), Archives the superseded archives and object
	// lists of devices.
	Packs, Indexes, Archives int
	// Kept counts the index objects looked at and kept.
	Kept int
	// More says Max stopped the call with more to remove.
	More bool
}

// Reclaim removes from the object store what no store uses, within a
// bound (docs/remote.md, "Reclaiming space"). A pack goes, with its index,
// when its index is older than the grace and none of its objects is named
// by the newest object list of any device (PublishObjects; Sync publishes
// one each time) or recorded by this store; a device's archives and object
// lists other than its newest go once older than the grace. The object
// store must say when each object was written (LastModified): one it
// does not is kept. A failure to reach the store is store.busy; what was
// removed stays removed, index objects before their packs, so no device
// learns of a pack that is gone.
func (s *Storage) Reclaim(ctx context.Context, db *index.DB, opts ReclaimOptions) (ReclaimStats, error) {
	s.push.Lock()
	defer s.push.Unlock()
	var st ReclaimStats
	grace := opts.Grace
	switch {
	case grace == 0:
		grace = 7 * 24 * time.Hour
	case grace < 0:
		grace = 0
	}
	if opts.Max <= 0 {
		opts.Max = 1000
	}
	cutoff := s.opts.Now().Add(-grace)
	named, err := s.recorded(ctx, db)
	if err != nil {
		return st, fmt.Errorf("reclaim: %w", err)
	}
	all, err := s.Archives(ctx)
	if err != nil {
		return st, fmt.Errorf("reclaim: %w", err)
	}
	lists := latest(all, true)
	for _, a := range lists {
		b, err := s.Fetch(ctx, a)
		if err != nil {
			return st, fmt.Errorf("reclaim: %w", err)
		}
		var l objectList
		if err := json.Unmarshal(b, &l); err != nil || l.Version != 1 {
			return st, wserr.New(wserr.Corrupt, "reclaim", a.Key, "unreadable object list")
		}
		for _, o := range l.Objects {
			named[o] = true
		}
	}
	remove := func(key string) error {
		if opts.DryRun {
			return nil
		}
		return s.b.remove(ctx, key)
	}
	budget := opts.Max
	type old struct {
		key string
		mod time.Time
	}
	var idx []old
	if err := s.b.list(ctx, indexDir, func(key string, mod time.Time) error {
		idx = append(idx, old{key, mod})
		return nil
	}); err != nil {
		return st, fmt.Errorf("reclaim: %w", err)
	}
	for _, o := range idx {
		if o.mod.IsZero() || !o.mod.Before(cutoff) {
			st.Kept++
			continue
		}
		if budget <= 0 {
			st.More = true
			break
		}
		b, err := s.b.get(ctx, o.key, 0, -1)
		if err != nil {
			return st, fmt.Errorf("reclaim: %w", err)
		}
		pi, err := decodeIndex(o.key, b)
		if err != nil {
			return st, fmt.Errorf("reclaim: %w", err)
		}
		used := false
		for _, e := range pi.Objects {
			used = used || named[objectName(e.Kind, e.Hash)]
		}
		if used {
			st.Kept++
			continue
		}
		if err := remove(o.key); err != nil {
			return st, fmt.Errorf("reclaim: %w", err)
		}
		st.Indexes++
		budget--
		if pi.Pack != "" {
			if err := remove(pi.Pack); err != nil {
				return st, fmt.Errorf("reclaim: %w", err)
			}
			st.Packs++
			budget--
		}
	}
	newest := map[string]bool{}
	for _, a := range Latest(all) {
		newest[a.Key] = true
	}
	for _, a := range lists {
		newest[a.Key] = true
	}
	for _, a := range all {
		if newest[a.Key] || !a.At.Before(cutoff) || !strings.HasPrefix(a.Key, syncDir) {
			continue
		}
		if budget <= 0 {
			st.More = true
			break
		}
		if err := remove(a.Key); err != nil {
			return st, fmt.Errorf("reclaim: %w", err)
		}
		st.Archives++
		budget--
	}
	return st, nil
}
