package wsstore

import (
	"bytes"
	"context"
	"fmt"

	"github.com/wsstore/wsstore/archive"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/remote"
	"github.com/wsstore/wsstore/wserr"
)

// SyncReport says what a Sync did.
type SyncReport struct {
	// Device is this store's id on the object store.
	Device string `json:"device"`
	// Pushed and Pulled are the blob tier's push and pull.
	Pushed remote.PushStats `json:"pushed"`
	Pulled remote.PullStats `json:"pulled"`
	// TookIn names the other devices' archives read; Added, Updated and
	// Unchanged the chats, runs and actor spaces they brought, as
	// "run ID"; Conflicts what was left as it was, by name.
	TookIn    []string           `json:"tookIn"`
	Added     []string           `json:"added"`
	Updated   []string           `json:"updated"`
	Unchanged int                `json:"unchanged"`
	Conflicts []archive.Conflict `json:"conflicts"`
	// Published is the key of the archive this store wrote ("" when it
	// holds nothing to publish).
	Published string `json:"published"`
}

// Sync reconciles the store with every other store that syncs through its
// remote blob tier (docs/remote.md, "Sync"): it pushes its blobs and pulls
// the others' (a union: blobs are immutable); takes in the newest
// metadata archive of every other device, merging by id (archive
// Options.Merge: a run is brought forward when this store holds an
// earlier state of it, one written on both devices is a named conflict;
// persist/ layers move by compare-and-swap, and one promoted on both is a
// named conflict); then publishes its own archive, metadata only (blobs
// are on the tier), under a new write-once key. Conflicts are reported
// in SyncReport, not failed: the rest is synced. With the archive it
// publishes the list of every object the store records, which
// ReclaimRemote spares. It fails with
// store.invalid_options for a store without a remote tier, store.busy
// when the object store cannot be reached (what was done stays done; run
// it again), and store.corrupt or archive.corrupt for damaged objects.
func (s *Store) Sync(ctx context.Context) (SyncReport, error) {
	rep := SyncReport{TookIn: []string{}, Added: []string{}, Updated: []string{}, Conflicts: []archive.Conflict{}}
	if s.Remote == nil {
		return rep, wserr.New(wserr.InvalidOptions, "sync", s.Dir, "the store has no remote blob tier (--blobs)")
	}
	dev, err := remote.Device(ctx, s.DB)
	if err != nil {
		return rep, err
	}
	rep.Device = dev
	if rep.Pushed, err = s.Remote.Push(ctx, s.DB); err != nil {
		return rep, err
	}
	if rep.Pulled, err = s.Remote.Pull(ctx, s.DB); err != nil {
		return rep, err
	}
	all, err := s.Remote.Archives(ctx)
	if err != nil {
		return rep, err
	}
	seen, err := remote.Seen(ctx, s.DB)
	if err != nil {
		return rep, err
	}
	for d, a := range remote.Latest(all) {
		if d == dev || seen[d] == a.Key {
			continue
		}
		b, err := s.Remote.Fetch(ctx, a)
		if err != nil {
			return rep, err
		}
		if err := s.recoverBlobs(ctx, b); err != nil {
			return rep, fmt.Errorf("sync: archive of device %s: %w", d, err)
		}
		sum, err := s.Archive.Import(ctx, bytes.NewReader(b), archive.Options{Merge: true})
		if err != nil {
			return rep, fmt.Errorf("sync: archive of device %s: %w", d, err)
		}
		if err := remote.SetSeen(ctx, s.DB, d, a.Key); err != nil {
			return rep, err
		}
		rep.TookIn = append(rep.TookIn, a.Key)
		rep.Added = append(rep.Added, sum.Added...)
		rep.Updated = append(rep.Updated, sum.Updated...)
		rep.Unchanged += len(sum.Unchanged)
		rep.Conflicts = append(rep.Conflicts, sum.Conflicts...)
	}
	var buf bytes.Buffer
	_, err = s.Archive.Export(ctx, &buf, archive.Scope{All: true}, archive.Options{BlobsElsewhere: true})
	empty := wserr.Is(err, wserr.InvalidArgument) // nothing to publish but the object list
	if err != nil && !empty {
		return rep, err
	}
	// Blobs written since the first push, which the archive may name.
	more, err := s.Remote.Push(ctx, s.DB)
	if err != nil {
		return rep, err
	}
	rep.Pushed.Packs += more.Packs
	rep.Pushed.Objects += more.Objects
	rep.Pushed.Chunked += more.Chunked
	rep.Pushed.Bytes += more.Bytes
	// The list of what this store records, which remote reclaim spares.
	if _, err := s.Remote.PublishObjects(ctx, s.DB, dev, s.now()); err != nil {
		return rep, err
	}
	if empty {
		return rep, nil
	}
	pub, err := s.Remote.Publish(ctx, dev, s.now(), buf.Bytes())
	if err != nil {
		return rep, err
	}
	rep.Published = pub.Key
	return rep, nil
}

// ReclaimRemote removes from the store's remote tier the packs no device
// uses and the devices' superseded archives, within opts' bounds (see
// remote.Storage.Reclaim and docs/remote.md). It fails with
// store.invalid_options for a store without a remote tier.
func (s *Store) ReclaimRemote(ctx context.Context, opts remote.ReclaimOptions) (remote.ReclaimStats, error) {
	if s.Remote == nil {
		return remote.ReclaimStats{}, wserr.New(wserr.InvalidOptions, "reclaim remote", s.Dir, "the store has no remote blob tier (--blobs)")
	}
	return s.Remote.Reclaim(ctx, s.DB, opts)
}

// recoverBlobs records again the blobs the archive b names that this
// store has no record of: its gc drops the records of blobs nothing here
// uses (the other side of a conflict, a run deleted here), which another
// device's archive may still name.
func (s *Store) recoverBlobs(ctx context.Context, b []byte) error {
	m, err := archive.ReadManifest(ctx, bytes.NewReader(b))
	if err != nil {
		return err
	}
	var missing []cas.Hash
	for _, br := range m.Blobs {
		has, err := s.Blobs.Has(ctx, br.Hash)
		if err != nil {
			return err
		}
		if !has {
			missing = append(missing, br.Hash)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	_, err = s.Remote.Recover(ctx, s.DB, missing)
	return err
}
