package wsstore

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/wsstore/wsstore/actors"
	"github.com/wsstore/wsstore/archive"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/remote"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/wserr"
)

// SyncReport says what a Sync did.
type SyncReport struct {
	// Device is this store's id on the object store.
	Device string `json:"device"`
	// Pushed and Pulled are the blob tier's push and pull.
	Pushed remote.PushStats `json:"pushed"`
	Pulled remote.PullStats `json:"pulled"`
	// TookIn names the other devices' segments read; Added and Updated
	// name the chats, runs and actor spaces they brought, as "run ID",
	// the first MaxTakenNames of each in the order they were taken in,
	// and AddedCount and UpdatedCount count them all; Unchanged counts
	// those held already; Deleted names what their tombstones deleted
	// here; Conflicts what was left as it was, by name.
	TookIn       []string           `json:"tookIn"`
	Added        []string           `json:"added"`
	AddedCount   int                `json:"addedCount"`
	Updated      []string           `json:"updated"`
	UpdatedCount int                `json:"updatedCount"`
	Unchanged    int                `json:"unchanged"`
	Deleted      []string           `json:"deleted"`
	Conflicts    []archive.Conflict `json:"conflicts"`
	// Published is the key of the segment this store wrote ("" when it
	// had nothing new to say), Base whether it was a base segment, and
	// SegmentBytes its size; Sent names what it carried, as "run ID",
	// the first MaxSentNames in name order, and SentCount counts all of
	// it; Tombstones names the deletions.
	Published    string   `json:"published"`
	Base         bool     `json:"base,omitempty"`
	SegmentBytes int64    `json:"segmentBytes"`
	Sent         []string `json:"sent"`
	SentCount    int      `json:"sentCount"`
	Tombstones   []string `json:"tombstones"`
	// Repaired says what of this store's own the sync found gone from
	// the object store and published again (remote.Storage.CheckPublished).
	Repaired remote.Repair `json:"repaired"`
	// Held names the devices whose segments the sync took in only up to
	// a gap (a segment gone from the object store, or damaged): nothing
	// of theirs after it until they publish a base. The sync then fails
	// with the first gap's store.corrupt, after taking in the other
	// devices' and publishing its own.
	Held []string `json:"held,omitempty"`
}

// MaxSentNames bounds the names in SyncReport.Sent, so that a report of a
// base segment does not grow with the store; SentCount counts them all.
const MaxSentNames = 1000

// MaxTakenNames bounds the names in SyncReport.Added and Updated, so that
// the report of taking in a base does not grow with the store;
// AddedCount and UpdatedCount count them all.
const MaxTakenNames = 1000

// Sync reconciles the store with every other store that syncs through its
// remote blob tier (docs/remote.md, "Sync"), holding a sync lock on the
// object store meanwhile. It pushes its blobs and pulls the others'; takes
// in every other device's segments it has not read (from the newest base
// on for a device it never read), each a metadata archive of what that
// device changed, merged by id (archive Options.Merge: a run, persist/
// layer or actor space is brought forward when this store holds an
// earlier state of it; one written on both devices is a named conflict),
// and the deletions it published (a chat or run deleted here unless this
// store changed it since, which is a named conflict; one a later segment
// brings back is deleted again); then publishes one segment of its own:
// what changed here since its last sync, its deletions and the change of
// its object set, under a new write-once key. A base segment, the whole
// store, is written instead when the deltas since the last one outgrow
// it, so a device starting from nothing reads O(store). Conflicts are
// reported in SyncReport, not failed. It fails with store.invalid_options
// for a store without a remote tier, store.busy when the object store
// cannot be reached or another device holds the reclaim lease (what was
// done stays done; run it again), and store.corrupt or archive.corrupt
// for damaged objects.
func (s *Store) Sync(ctx context.Context) (rep SyncReport, err error) {
	return s.SyncWith(ctx, SyncOptions{})
}

// SyncOptions configure SyncWith.
type SyncOptions struct {
	// Base publishes a base segment whatever the deltas since the last
	// one: the device's older segments are then superseded, and
	// ReclaimRemote may remove them, and the packs only they named, once
	// they are older than its grace (docs/remote.md, "Reclaiming space").
	Base bool
}

// SyncWith is Sync as opt asks.
func (s *Store) SyncWith(ctx context.Context, opt SyncOptions) (rep SyncReport, err error) {
	rep = SyncReport{TookIn: []string{}, Added: []string{}, Updated: []string{}, Deleted: []string{},
		Conflicts: []archive.Conflict{}, Sent: []string{}, Tombstones: []string{}}
	if s.Remote == nil {
		return rep, wserr.New(wserr.InvalidOptions, "sync", s.Dir, "the store has no remote blob tier (--blobs)")
	}
	dev, err := remote.Device(ctx, s.DB)
	if err != nil {
		return rep, err
	}
	rep.Device = dev
	release, err := s.lockAndRegister(ctx, dev, &rep.Repaired)
	if err != nil {
		return rep, err
	}
	// A sync that took in records and failed before it published them
	// leaves its lock to expire: dated after the device's newest
	// segment, it tells ReclaimRemote that this device may use objects no
	// object set names yet (remote.Storage.Reclaim).
	tookIn := false
	defer func() {
		if err != nil && tookIn {
			return
		}
		if rerr := release(ctx, err); rerr != nil && err == nil {
			err = fmt.Errorf("sync: release the lock: %w", rerr)
		}
	}()
	if err := s.collectDeletions(ctx, dev); err != nil {
		return rep, err
	}
	if rep.Pushed, err = s.Remote.PushInSync(ctx, s.DB); err != nil {
		return rep, err
	}
	applied, err := s.Remote.Applied(ctx, s.DB)
	if err != nil {
		return rep, err
	}
	devs, err := s.Remote.Devices(ctx)
	if err != nil {
		return rep, err
	}
	// Every listing of segments comes before a listing of index/, so
	// that listing holds the index objects of every segment listed.
	var todo []remote.Segment
	var listAll bool
	for _, d := range devs {
		if d == dev {
			continue
		}
		segs, err := s.Remote.Segments(ctx, d, applied[d])
		if err != nil {
			return rep, err
		}
		segs = remote.FromBase(segs)
		// A device read from its base on: the base names no index
		// objects, and the deltas skipped for it are not read.
		listAll = listAll || len(segs) > 0 && (segs[0].Base || applied[d] == "")
		todo = append(todo, segs...)
	}
	pull := &pulls{s: s, st: &rep.Pulled}
	tookIn = listAll || len(todo) > 0
	read := applied // each device's segment read last
	if listAll {
		if err := pull.all(ctx); err != nil {
			return rep, err
		}
	}
	// A gap in one device's chain holds back that device's segments
	// after it, not the other devices' nor this store's own.
	var gap error
	held := func(seg remote.Segment) bool { return slices.Contains(rep.Held, seg.Device) }
	for i := 0; i < len(todo); i++ {
		seg := todo[i]
		if held(seg) {
			continue
		}
		h, arch, err := s.Remote.FetchSegment(ctx, seg)
		if wserr.CodeOf(err) == wserr.Corrupt {
			// A segment damaged or gone since it was listed is a gap too.
			err = fmt.Errorf("sync: segment %s: %w (nothing of device %s after it is taken in until the device publishes a base: `wsctl sync --base` there)", seg.Key, err, seg.Device)
		} else if err == nil {
			if err = remote.FollowsOn(seg, h, read[seg.Device]); err != nil {
				arch.Close()
			}
		}
		if wserr.CodeOf(err) == wserr.Corrupt {
			rep.Held = append(rep.Held, seg.Device)
			gap = cmp.Or(gap, err)
			todo = append(todo[:i], slices.DeleteFunc(slices.Clone(todo[i:]), held)...)
			i--
			continue
		}
		if err == nil {
			err = pull.of(ctx, h)
		}
		if err == nil {
			// The segments after seg follow on from it (a sync that
			// fails here reads it again next time).
			read[seg.Device] = seg.Key
			err = s.takeIn(ctx, seg, h, arch, &rep, todo[i+1:], read)
		}
		arch.Close()
		if err != nil {
			return rep, fmt.Errorf("sync: segment %s: %w", seg.Key, err)
		}
		rep.TookIn = append(rep.TookIn, seg.Key)
	}
	if err := s.publish(ctx, dev, opt.Base, &rep); err != nil {
		return rep, err
	}
	tookIn = false // published: the lock goes now
	return rep, gap
}

// PullRemote pulls the other devices' index objects (remote.Storage.Pull)
// under a sync lock and publishes the change of the store's object set in
// a segment of its own (no metadata), so that what the store came to
// record is protected from ReclaimRemote at once, not only after its next
// sync. It fails as Sync does.
func (s *Store) PullRemote(ctx context.Context) (st remote.PullStats, err error) {
	if s.Remote == nil {
		return st, wserr.New(wserr.InvalidOptions, "pull", s.Dir, "the store has no remote blob tier (--blobs)")
	}
	dev, err := remote.Device(ctx, s.DB)
	if err != nil {
		return st, err
	}
	release, err := s.lockAndRegister(ctx, dev, &remote.Repair{})
	if err != nil {
		return st, err
	}
	published := false
	defer func() {
		// A pull that failed may have recorded what it did not publish:
		// its lock is left to expire, as a sync's (Sync).
		if err != nil && !published {
			return
		}
		if rerr := release(ctx, err); rerr != nil && err == nil {
			err = fmt.Errorf("pull: release the lock: %w", rerr)
		}
	}()
	// A gap in one device's chain holds back that device's segments
	// after it, as in Sync; the pull publishes, then fails with it.
	gap, err := s.pullIndexes(ctx, dev, &st)
	if err != nil {
		return st, err
	}
	objs, err := s.Remote.ObjectDelta(ctx, s.DB, false)
	if err != nil {
		return st, err
	}
	defer objs.Close()
	if objs.Empty() {
		published = true
		return st, gap
	}
	idx, err := s.Remote.PendingIndexes(ctx, s.DB)
	if err != nil {
		return st, err
	}
	at, err := remote.SegmentTime(ctx, s.DB, s.now().UTC())
	if err != nil {
		return st, err
	}
	prev, err := remote.LastSegment(ctx, s.DB)
	if err != nil {
		return st, err
	}
	seg, err := s.Remote.PublishSegment(ctx, remote.SegmentHeader{Device: dev, At: at, Indexes: &idx, Prev: prev}, objs, nil)
	if err != nil {
		return st, err
	}
	// No Claimed: the segment carries no metadata, so the changes marked
	// here stay for the next sync to send.
	if err := s.Remote.RecordPublished(ctx, s.DB, remote.Published{Segment: seg, Bytes: seg.Size, Objects: objs, Indexes: idx}); err != nil {
		return st, err
	}
	published = true
	return st, gap
}

// pulls takes in index objects for one sync or pull: those segment
// headers name, or, once, every one on the object store.
type pulls struct {
	s    *Store
	st   *remote.PullStats
	full bool
}

// all lists index/ and takes in what is new, once.
func (p *pulls) all(ctx context.Context) error {
	if p.full {
		return nil
	}
	st, err := p.s.Remote.Pull(ctx, p.s.DB)
	p.add(st)
	p.full = err == nil
	return err
}

// of takes in the index objects h names; a header naming none (a base, a
// segment of an older build) lists index/ instead.
func (p *pulls) of(ctx context.Context, h remote.SegmentHeader) error {
	if h.Indexes == nil {
		return p.all(ctx)
	}
	st, err := p.s.Remote.PullIndexes(ctx, p.s.DB, *h.Indexes)
	p.add(st)
	return err
}

func (p *pulls) add(st remote.PullStats) {
	p.st.Indexes += st.Indexes
	p.st.Objects += st.Objects
	p.st.Damaged = append(p.st.Damaged, st.Damaged...)
}

// pullIndexes takes in the index objects of the other devices' segments
// after those whose index objects the store took in: it reads their
// headers, not their archives, and lists index/ only for a device it
// never read or one that wrote a base since. A segment that does not
// follow on the one read before it (remote.FollowsOn), or whose header is
// damaged or gone, holds back its device: nothing of it past the gap is
// read, and the first such gap is returned as gap, the other devices'
// segments taken in.
func (s *Store) pullIndexes(ctx context.Context, dev string, st *remote.PullStats) (gap, err error) {
	indexed, err := s.Remote.Indexed(ctx, s.DB)
	if err != nil {
		return nil, err
	}
	devs, err := s.Remote.Devices(ctx)
	if err != nil {
		return nil, err
	}
	pull := &pulls{s: s, st: st}
	var listAll bool
	segs := map[string][]remote.Segment{}
	for _, d := range devs {
		if d == dev {
			continue
		}
		ss, err := s.Remote.Segments(ctx, d, indexed[d])
		if err != nil {
			return nil, err
		}
		segs[d] = ss
		listAll = listAll || indexed[d] == "" || slices.ContainsFunc(ss, func(g remote.Segment) bool { return g.Base })
	}
	if listAll {
		if err := pull.all(ctx); err != nil {
			return nil, err
		}
	}
	for _, d := range devs {
		last := indexed[d]
		for _, seg := range segs[d] {
			if pull.full {
				last = seg.Key
				continue
			}
			h, err := s.Remote.ReadHeader(ctx, seg)
			if wserr.CodeOf(err) == wserr.Corrupt {
				err = fmt.Errorf("pull: segment %s: %w (nothing of device %s after it is read until the device publishes a base: `wsctl sync --base` there)", seg.Key, err, seg.Device)
			} else if err == nil {
				err = remote.FollowsOn(seg, h, last)
			}
			if wserr.CodeOf(err) == wserr.Corrupt {
				gap = cmp.Or(gap, err)
				break
			}
			if err == nil {
				err = pull.of(ctx, h)
			}
			if err != nil {
				return nil, fmt.Errorf("pull: segment %s: %w", seg.Key, err)
			}
			last = seg.Key
		}
		if last != indexed[d] {
			if err := s.Remote.RecordIndexed(ctx, s.DB, d, last); err != nil {
				return nil, err
			}
		}
	}
	return gap, nil
}

// lockAndRegister takes dev's sync lock on the object store and registers
// the device on its first sync; on a later one it checks that what the
// device published is still there, and repairs what is not (rep).
func (s *Store) lockAndRegister(ctx context.Context, dev string, rep *remote.Repair) (func(context.Context, error) error, error) {
	release, err := s.Remote.LockSync(ctx, dev)
	if err != nil {
		return nil, err
	}
	ok, err := remote.Registered(ctx, s.DB, dev)
	switch {
	case err == nil && !ok:
		if err = s.Remote.RegisterDevice(ctx, dev); err == nil {
			err = remote.SetRegistered(ctx, s.DB, dev)
		}
	case err == nil:
		*rep, err = s.Remote.CheckPublished(ctx, s.DB, dev)
	}
	if err != nil {
		_ = release(ctx, err)
		return nil, err
	}
	return release, nil
}

// itemsOf returns the state now of the chats, runs and actor spaces
// names names ("KIND ID"), as eachItem would, leaving out those that
// do not exist.
func (s *Store) itemsOf(ctx context.Context, names []string) (map[string]remote.Item, error) {
	out := map[string]remote.Item{}
	err := s.DB.View(ctx, func(tx *index.Tx) error {
		for _, name := range names {
			kind, id, _ := strings.Cut(name, " ")
			var it remote.Item
			switch kind {
			case "chat":
				c, err := s.Runs.ExportChat(ctx, tx, id)
				if wserr.Is(err, wserr.NotFound) {
					continue
				} else if err != nil {
					return err
				}
				it = remote.Item{Kind: kind, ID: id, FP: fingerprint(c, 0)}
			case "run":
				r, err := s.Runs.ExportRun(ctx, tx, id)
				if wserr.Is(err, wserr.RunNotFound) {
					continue
				} else if err != nil {
					return err
				}
				last, err := s.Journal.Last(ctx, tx, id)
				if err != nil {
					return err
				}
				it = remote.Item{Kind: kind, ID: id, Parent: r.ChatID, Seq: last, FP: fingerprint(r, last)}
			case "actor":
				a, ok, err := s.Actors.ExportSpace(ctx, tx, id)
				if err != nil {
					return err
				}
				if !ok {
					continue
				}
				it = remote.Item{Kind: kind, ID: id, Seq: a.Seq, FP: fingerprint(a, a.Seq)}
			default:
				continue
			}
			out[name] = it
		}
		return nil
	})
	return out, err
}

// itemPage is how many synced items eachItem reads at a time.
const itemPage = 512

// eachItem calls fn with the state now of every chat, run and actor
// space, as remote.Item records it (itemsOf), and with its synced state
// (synced false for one never synced), chats, then runs, then actor
// spaces, each in id order, and with the read transaction tx, in which fn
// may read more. Both are read a page at a time, the synced states as a
// stream merged with the items', so a pass over any number of items holds
// a page of each.
func (s *Store) eachItem(ctx context.Context, fn func(tx *index.Tx, it, old remote.Item, synced bool) error) error {
	return s.DB.View(ctx, func(tx *index.Tx) error {
		st := syncedStream{tier: s.Remote}
		each := func(it remote.Item) error {
			old, ok, err := st.find(ctx, tx, it.Kind, it.ID)
			if err != nil {
				return err
			}
			return fn(tx, it, old, ok)
		}
		if err := s.Runs.EachChatRecord(ctx, tx, func(c runs.ChatRecord) error {
			return each(remote.Item{Kind: "chat", ID: c.ID, FP: fingerprint(c, 0)})
		}); err != nil {
			return err
		}
		if err := s.Runs.EachRunRecord(ctx, tx, "", func(r runs.RunRecord) error {
			last, err := s.Journal.Last(ctx, tx, r.ID)
			if err != nil {
				return err
			}
			return each(remote.Item{Kind: "run", ID: r.ID, Parent: r.ChatID, Seq: last, FP: fingerprint(r, last)})
		}); err != nil {
			return err
		}
		return s.Actors.EachSpaceRecord(ctx, tx, func(a actors.SpaceRecord) error {
			return each(remote.Item{Kind: "actor", ID: a.Actor, Seq: a.Seq, FP: fingerprint(a, a.Seq)})
		})
	})
}

// syncedStream reads the tier's synced items for ids asked in increasing
// order within a kind, a page at a time (remote.Storage.ItemsFrom).
type syncedStream struct {
	tier *remote.Storage
	kind string
	page []remote.Item // the page's items from the last id asked on
	end  bool          // nothing of kind after page
}

// find returns the synced item kind/id, if there is one, read in tx.
func (st *syncedStream) find(ctx context.Context, tx *index.Tx, kind, id string) (remote.Item, bool, error) {
	if kind != st.kind {
		st.kind, st.page, st.end = kind, nil, false
	}
	for {
		for len(st.page) > 0 && st.page[0].ID < id {
			st.page = st.page[1:]
		}
		if len(st.page) > 0 {
			return st.page[0], st.page[0].ID == id, nil
		}
		if st.end {
			return remote.Item{}, false, nil
		}
		// From id on: ids synced and gone since are skipped, not read.
		page, err := st.tier.ItemsFrom(ctx, tx, kind, id, itemPage)
		if err != nil {
			return remote.Item{}, false, err
		}
		st.page, st.end = page, len(page) < itemPage
	}
}

// fingerprint is what a sync compares to find what changed: the row and
// its journal length.
func fingerprint(row any, n int64) cas.Hash {
	b, _ := json.Marshal(struct {
		Row any   `json:"row"`
		N   int64 `json:"n"`
	}{row, n})
	return cas.Sum(b)
}

// eventHash identifies one event as archive's merge compares them.
func eventHash(e journal.Event) cas.Hash {
	var p bytes.Buffer
	if json.Compact(&p, e.Payload) != nil {
		p.Reset()
		p.Write(e.Payload)
	}
	return cas.Sum(fmt.Appendf(nil, "%s\x00%d\x00%s\x00%s\x00%d\x00%s", e.RunID, e.Seq, e.Type, e.Level, e.At.UnixNano(), p.Bytes()))
}

// lastEvent returns the seq and hash of run id's last event.
func (s *Store) lastEvent(ctx context.Context, tx *index.Tx, id string) (int64, cas.Hash, error) {
	n, err := s.Journal.Last(ctx, tx, id)
	if err != nil || n == 0 {
		return 0, cas.Hash{}, err
	}
	var last journal.Event
	err = s.Journal.ExportEventsAfter(ctx, tx, id, n-1, func(e journal.Event) error { last = e; return nil })
	if err != nil || last.Seq == 0 {
		return 0, cas.Hash{}, err
	}
	return last.Seq, eventHash(last), nil
}

// withLast fills in the run items' Last and First.
func (s *Store) withLast(ctx context.Context, items []remote.Item) error {
	return s.DB.View(ctx, func(tx *index.Tx) error {
		for i := range items {
			if err := s.withEnds(ctx, tx, &items[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

// withEnds fills in it's Seq, Last and First, read in tx, if it is a run.
func (s *Store) withEnds(ctx context.Context, tx *index.Tx, it *remote.Item) error {
	if it.Kind != "run" {
		return nil
	}
	seq, h, first, err := s.runEnds(ctx, tx, it.ID)
	if err != nil {
		return err
	}
	it.Seq, it.Last, it.First = seq, h, first
	return nil
}

// runEnds returns run id's journal length and the hashes of its last and
// first events (zero for a run with none), read in tx, or in a read
// transaction of its own when tx is nil.
func (s *Store) runEnds(ctx context.Context, tx *index.Tx, id string) (seq int64, last, first cas.Hash, err error) {
	if tx == nil {
		err = s.DB.View(ctx, func(tx *index.Tx) error {
			seq, last, first, err = s.runEnds(ctx, tx, id)
			return err
		})
		return seq, last, first, err
	}
	if seq, last, err = s.lastEvent(ctx, tx, id); err != nil {
		return 0, cas.Hash{}, cas.Hash{}, err
	}
	first, err = s.firstEvent(ctx, tx, id)
	return seq, last, first, err
}

// runFirst is firstEvent in a read transaction of its own.
func (s *Store) runFirst(ctx context.Context, id string) (first cas.Hash, err error) {
	err = s.DB.View(ctx, func(tx *index.Tx) error {
		first, err = s.firstEvent(ctx, tx, id)
		return err
	})
	return first, err
}

// firstEvent returns the hash of run id's first event, zero when it has
// none.
func (s *Store) firstEvent(ctx context.Context, tx *index.Tx, id string) (cas.Hash, error) {
	e, ok, err := s.Journal.EventAt(ctx, tx, id, 1)
	if err != nil || !ok {
		return cas.Hash{}, err
	}
	return eventHash(e), nil
}

// takeIn reads one segment of another device and takes in its archive
// and its tombstones; later are the segments the sync reads after it.
// What the archive brought is listed on disk beyond a page (broughtList)
// and read back a page at a time, so taking in a base of any size holds
// a page of its items.
func (s *Store) takeIn(ctx context.Context, seg remote.Segment, h remote.SegmentHeader, arch *remote.Spool, rep *SyncReport, later []remote.Segment, read map[string]string) error {
	early, err := s.deleteReplaced(ctx, h.Tombstones, rep)
	if err != nil {
		return err
	}
	brought := newBroughtList(ctx)
	defer brought.Close()
	if arch.Size() > 0 {
		r, err := arch.Reader()
		if err != nil {
			return err
		}
		if err := s.recoverBlobs(ctx, r); err != nil {
			return err
		}
		// The conflicts of the last import, and what the first held
		// already.
		var conflicts []archive.Conflict
		unchanged := 0
		opt := archive.Options{Merge: true, Taken: func(o archive.Outcome, name string, c archive.Conflict) error {
			switch o {
			case archive.Added, archive.Updated:
				return brought.push(name, o == archive.Added)
			case archive.Unchanged:
				unchanged++
			case archive.Conflicted:
				conflicts = append(conflicts, c)
			}
			return nil
		}}
		if r, err = arch.Reader(); err != nil {
			return err
		}
		if _, err := s.Archive.Import(ctx, r, opt); err != nil {
			return err
		}
		rep.Unchanged += unchanged
		freed, err := s.freeForOtherRuns(ctx, conflicts, later, read, rep)
		if err != nil {
			return err
		}
		if len(freed) > 0 {
			// The runs refused for the ones just deleted come in now;
			// the rest of the archive is unchanged since the first time.
			early = append(early, freed...)
			if r, err = arch.Reader(); err != nil {
				return err
			}
			conflicts, unchanged = nil, 0
			if _, err := s.Archive.Import(ctx, r, opt); err != nil {
				return err
			}
		}
		if err := brought.eachName(func(name string, added bool) error {
			list, n := &rep.Updated, &rep.UpdatedCount
			if added {
				list, n = &rep.Added, &rep.AddedCount
			}
			if *n++; len(*list) < MaxTakenNames {
				*list = append(*list, name)
			}
			return nil
		}); err != nil {
			return err
		}
		settled, err := s.tailsOfDeleted(ctx, conflicts, h.Tombstones, rep.Device)
		if err != nil {
			return err
		}
		rep.Conflicts = append(rep.Conflicts, slices.DeleteFunc(conflicts, settled)...)
	}
	// This segment's tombstones, runs before chats; then the tombstones
	// known before of what the segment brought back, one per run its id
	// named (the later deletion of each). Only what the segment names is
	// looked at: taking in costs what the segment holds.
	tombs := slices.Clone(h.Tombstones)
	if err := brought.eachName(func(name string, _ bool) error {
		kind, id, _ := strings.Cut(name, " ")
		if kind != "run" && kind != "chat" {
			return nil
		}
		known, err := s.Remote.FindTombstones(ctx, s.DB, kind, id)
		if err != nil {
			return err
		}
		for _, old := range known {
			i := slices.IndexFunc(tombs, func(x remote.Tombstone) bool {
				return x.Kind == kind && x.ID == id && x.Run().First == old.Run().First
			})
			switch {
			case i < 0:
				tombs = append(tombs, old)
			case old.Seq > tombs[i].Seq:
				tombs[i] = old
			}
		}
		return nil
	}); err != nil {
		return err
	}
	slices.SortStableFunc(tombs, func(a, b remote.Tombstone) int {
		return strings.Compare(b.Kind, a.Kind) // "run" before "chat"
	})
	tombNames := make(map[string]bool, len(tombs))
	for _, tb := range tombs {
		tombNames[tb.Kind+" "+tb.ID] = true
	}
	// The state now of what the segment brought, a page at a time, listed
	// to be recorded as synced; of what the tombstones name, the synced
	// state they are applied against.
	broughtStates := map[string]remote.Item{}
	broughtTombs := map[string]bool{} // of what the tombstones name
	if err := brought.eachPage(func(names []string) error {
		cur, err := s.itemsOf(ctx, names)
		if err != nil {
			return err
		}
		for _, name := range names {
			if tombNames[name] {
				broughtTombs[name] = true
			}
		}
		var items []remote.Item
		for _, name := range names {
			if it, ok := cur[name]; ok {
				items = append(items, it)
			}
		}
		if err := s.withLast(ctx, items); err != nil {
			return err
		}
		for _, it := range items {
			if tombNames[it.Name()] {
				broughtStates[it.Name()] = it
			}
			if err := brought.pushItem(it); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return err
	}
	cur, err := s.itemsOf(ctx, slices.Collect(maps.Keys(tombNames)))
	if err != nil {
		return err
	}
	synced, err := s.Remote.ItemsNamed(ctx, s.DB, slices.Collect(maps.Keys(tombNames)))
	if err != nil {
		return err
	}
	maps.Copy(synced, broughtStates)
	t := remote.TakenIn{Segment: seg, Tombstones: h.Tombstones, Drop: early}
	gone := map[string]bool{}
	for _, tb := range tombs {
		conflicts := len(rep.Conflicts)
		var another bool
		deleted, err := s.applyTombstone(ctx, tb, cur, synced, rep, &another)
		if err != nil {
			return err
		}
		name := tb.Kind + " " + tb.ID
		// Kept here against a deletion (a conflict: the deleting device
		// no longer holds the run), or the deletion was of another run
		// under the same id, which a device may have held and refused
		// this one for: either way the next segment sends it whole.
		resend := len(rep.Conflicts) > conflicts || another
		if it, ok := cur[name]; ok && tb.Kind == "run" && resend && !broughtTombs[name] {
			one := []remote.Item{it}
			if err := s.withLast(ctx, one); err != nil {
				return err
			}
			it = one[0]
			it.FP, it.Sent = remote.Resend, false
			t.Items = append(slices.DeleteFunc(t.Items, func(x remote.Item) bool { return x.Name() == name }), it)
		}
		if deleted {
			rep.Deleted = append(rep.Deleted, name)
			t.Drop = append(t.Drop, remote.Item{Kind: tb.Kind, ID: tb.ID})
			t.Items = slices.DeleteFunc(t.Items, func(it remote.Item) bool { return it.Name() == name })
			gone[name] = true
			delete(cur, name)
		}
	}
	t.EachItem = func(fn func(remote.Item) error) error {
		return brought.eachItem(func(it remote.Item) error {
			if gone[it.Name()] {
				return nil
			}
			return fn(it)
		})
	}
	return s.Remote.RecordTakenIn(ctx, s.DB, t)
}

// freeForOtherRuns applies early, where the archive just taken in held a
// run this store refused because it holds another run under the id, a
// deletion of exactly the state held here that a segment read later in
// this sync carries: taken in in its turn, it would leave the id empty,
// and the refused run's device, which sent it before, would not send it
// again. It returns the items of the runs it deleted, so that the archive
// taken in again brings the refused runs in. The segments after are read
// for their headers only, and only when such a conflict occurs; the
// deletion is recorded with its own segment, where it finds the other
// run and leaves it.
func (s *Store) freeForOtherRuns(ctx context.Context, conflicts []archive.Conflict, later []remote.Segment, read map[string]string, rep *SyncReport) ([]remote.Item, error) {
	var names []string
	for _, c := range conflicts {
		if c.OtherRun && c.Kind == "run" {
			names = append(names, "run "+c.ID)
		}
	}
	if len(names) == 0 || len(later) == 0 {
		return nil, nil
	}
	var tombs []remote.Tombstone
	// Each device's segments are read in its chain's order, from the one
	// read last: past a gap (remote.FollowsOn) nothing of it is applied.
	last := maps.Clone(read)
	gap := map[string]bool{}
	for _, seg := range later {
		if gap[seg.Device] {
			continue
		}
		h, err := s.Remote.ReadHeader(ctx, seg)
		if err == nil {
			h.Tombstones, err = s.Remote.ReadTombstones(ctx, seg, h)
		}
		if wserr.CodeOf(err) == wserr.Corrupt || err == nil && remote.FollowsOn(seg, h, last[seg.Device]) != nil {
			// Damaged or past a gap: its turn holds the device back.
			gap[seg.Device] = true
			continue
		}
		if err != nil {
			return nil, err
		}
		last[seg.Device] = seg.Key
		for _, tb := range h.Tombstones {
			// A deletion naming a successor puts that run in the
			// deleted one's place in its turn: it is left to its turn.
			if tb.Kind == "run" && !tb.Run().First.IsZero() && tb.Run().Successor.IsZero() && slices.Contains(names, "run "+tb.ID) {
				tombs = append(tombs, tb)
			}
		}
	}
	// Only a deletion of exactly the state held here: another state's
	// turn decides.
	exact := func(tb remote.Tombstone) (bool, error) {
		seq, last, first, err := s.runEnds(ctx, nil, tb.ID)
		return first == tb.Run().First && seq == tb.Seq && last == tb.Last, err
	}
	return s.applyAhead(ctx, tombs, rep, exact)
}

// tailsOfDeleted returns whether a conflict of an archive is a tail of a
// run that is not here because another device's deletion of it was taken
// in, and none of this one's: the writer of the tail settles it. The
// writer takes the deletion in too and, if it keeps the run, names the
// conflict and sends the run whole, which this store takes in against the
// deletion it knows, naming the conflict then. So a device that only
// passed another's deletion on, or a new one reading an older deletion
// before the tail of a writer that deleted the run too, names nothing for
// what it never held. A tail of a run this device deleted itself is named
// at once: the conflict is its own.
func (s *Store) tailsOfDeleted(ctx context.Context, conflicts []archive.Conflict, tombs []remote.Tombstone, self string) (func(archive.Conflict) bool, error) {
	settled := map[string]bool{}
	for _, c := range conflicts {
		if _, seen := settled[c.ID]; !c.NotHeld || seen {
			continue
		}
		known, err := s.Remote.FindTombstones(ctx, s.DB, "run", c.ID)
		if err != nil {
			return nil, err
		}
		for _, tb := range tombs {
			if tb.Kind == "run" && tb.ID == c.ID {
				known = append(known, tb)
			}
		}
		own := slices.ContainsFunc(known, func(tb remote.Tombstone) bool { return tb.Device == self })
		settled[c.ID] = len(known) > 0 && !own
	}
	return func(c archive.Conflict) bool { return c.NotHeld && settled[c.ID] }, nil
}

// deleteReplaced applies, before a segment's archive is taken in, its
// tombstones of runs the sending device created again under their ids,
// so that the archive's new run is added here rather than taken for
// writes to the deleted one on two devices. It returns the items of the
// runs it deleted. A run written here since is left to the tombstone's
// turn after the archive, which names the conflict.
func (s *Store) deleteReplaced(ctx context.Context, tombs []remote.Tombstone, rep *SyncReport) ([]remote.Item, error) {
	var replaced []remote.Tombstone
	for _, tb := range tombs {
		if !tb.Run().Successor.IsZero() {
			replaced = append(replaced, tb)
		}
	}
	return s.applyAhead(ctx, replaced, rep, nil)
}

// applyAhead applies tombs ahead of their turn in takeIn, those ready
// accepts (nil: all), quietly: a conflict is named in their turn. Each
// deletion is listed in rep.Deleted, and its item returned for the
// segment's drops.
func (s *Store) applyAhead(ctx context.Context, tombs []remote.Tombstone, rep *SyncReport, ready func(remote.Tombstone) (bool, error)) ([]remote.Item, error) {
	if len(tombs) == 0 {
		return nil, nil
	}
	names := make([]string, 0, len(tombs))
	for _, tb := range tombs {
		names = append(names, tb.Kind+" "+tb.ID)
	}
	cur, err := s.itemsOf(ctx, names)
	if err != nil {
		return nil, err
	}
	synced, err := s.Remote.ItemsNamed(ctx, s.DB, names)
	if err != nil {
		return nil, err
	}
	var gone []remote.Item
	for _, tb := range tombs {
		name := tb.Kind + " " + tb.ID
		if _, ok := cur[name]; !ok {
			continue
		}
		if ready != nil {
			ok, err := ready(tb)
			if err != nil {
				return gone, err
			}
			if !ok {
				continue
			}
		}
		var quiet SyncReport
		deleted, err := s.applyTombstone(ctx, tb, cur, synced, &quiet, nil)
		if err != nil {
			return gone, err
		}
		if deleted {
			rep.Deleted = append(rep.Deleted, name)
			gone = append(gone, remote.Item{Kind: tb.Kind, ID: tb.ID})
			delete(cur, name)
		}
	}
	return gone, nil
}

// applyTombstone deletes the chat or run tb names, unless this store
// changed it since it last synced, or holds a later state of it than the
// deleting device had: that is a conflict, reported, and it stays. It
// reports whether it deleted something, and in another (when not nil)
// whether it left alone a run here that is neither the one tb deleted
// nor the successor tb names.
func (s *Store) applyTombstone(ctx context.Context, tb remote.Tombstone, cur, synced map[string]remote.Item, rep *SyncReport, another *bool) (bool, error) {
	name := tb.Kind + " " + tb.ID
	now, ok := cur[name]
	if !ok {
		return false, nil
	}
	conflict := func(format string, args ...any) (bool, error) {
		rep.Conflicts = append(rep.Conflicts, archive.Conflict{Kind: tb.Kind, ID: tb.ID,
			Reason: fmt.Sprintf("deleted on device %s, ", tb.Device) + fmt.Sprintf(format, args...)})
		return false, nil
	}
	switch tb.Kind {
	case "run":
		_, last, first, err := s.runEnds(ctx, nil, tb.ID)
		if err != nil {
			return false, err
		}
		if d := tb.Run(); !d.First.IsZero() && first != d.First || !d.Successor.IsZero() && first == d.Successor {
			if another != nil {
				*another = first != d.Successor
			}
			return false, nil // another run under the same id, created later
		}
		prev, known := synced[name]
		switch {
		case now.Seq == tb.Seq && last == tb.Last:
		case now.Seq == tb.Seq:
			return conflict("but the journals part at event %d", now.Seq)
		case now.Seq > tb.Seq:
			return conflict("having seen %d events; here it has %d", tb.Seq, now.Seq)
		case !known || prev.FP != now.FP:
			return conflict("but it was written here since this device last synced it")
		}
		// The state here is the one the deleting device deleted (or an
		// earlier one): an active run here is that device's, cancelled
		// with it.
		_, err = s.Runs.CancelAndDeleteRun(ctx, tb.ID)
		if wserr.Is(err, wserr.RunNotFound) {
			return false, nil
		}
		return err == nil, err
	case "chat":
		// The first runs left are named, the others counted.
		var left []string
		n := 0
		if err := s.DB.View(ctx, func(tx *index.Tx) error {
			return s.Runs.EachRunRecord(ctx, tx, tb.ID, func(r runs.RunRecord) error {
				if n++; len(left) < namedRuns {
					left = append(left, r.ID)
				}
				return nil
			})
		}); err != nil {
			return false, err
		}
		if n > len(left) {
			left = append(left, fmt.Sprintf("and %d more", n-len(left)))
		}
		if n > 0 {
			return conflict("but here it holds runs the deletion did not: %s", strings.Join(left, ", "))
		}
		var det chatTombDetail
		key := runs.ChatKey{}
		if err := json.Unmarshal(tb.Detail, &det); err == nil {
			key = runs.ChatKey{Kind: det.Kind, StableChatID: det.StableChatID}
		}
		if key.Kind == "" || runs.ChatWorkspaceID(key) != tb.ID {
			return false, wserr.New(wserr.Corrupt, "sync", tb.ID, "tombstone of chat %s names no chat key", tb.ID)
		}
		if det.PersistVersion != nil {
			// The persist/ layer here is a later one than the deleting
			// device deleted: promoted here since (or taken in from a
			// device that did), not to be lost silently.
			var c runs.ChatRecord
			if err := s.DB.View(ctx, func(tx *index.Tx) error {
				var err error
				c, err = s.Runs.ExportChat(ctx, tx, tb.ID)
				return err
			}); err != nil {
				return false, err
			}
			if c.PersistVersion > *det.PersistVersion || c.PersistVersion == *det.PersistVersion && c.PersistRoot != det.PersistRoot {
				return conflict("but its persist/ here (version %d) is not the one deleted (version %d)", c.PersistVersion, *det.PersistVersion)
			}
		}
		res, err := s.Runs.DeleteChats(ctx, []runs.ChatKey{key}, false)
		if err != nil {
			return false, err
		}
		return len(res.Chats) == 1 && res.Chats[0].Found, nil
	}
	return false, nil
}

// namedRuns is how many of the runs a chat tombstone did not delete its
// conflict names.
const namedRuns = 3

// chatTombDetail is a chat tombstone's detail: the chat's key and, from
// builds that record it, the persist/ layer the device deleted (a device
// holding a later one keeps the chat and names a conflict).
type chatTombDetail struct {
	Kind           string   `json:"kind"`
	StableChatID   string   `json:"stableChatId"`
	PersistRoot    cas.Hash `json:"persistRoot,omitzero"`
	PersistVersion *int64   `json:"persistVersion,omitempty"`
}

// collectDeletions turns the store's deletion-log entries since the last
// sync into tombstones of the chats and runs it had synced, recorded as
// pending until a segment carries them. The log is read a page at a time,
// each page's tombstones recorded with the cursor after it, so a sync
// after many deletions holds one page of them.
func (s *Store) collectDeletions(ctx context.Context, dev string) error {
	cursor, err := remote.DeletionCursor(ctx, s.DB)
	if err != nil {
		return err
	}
	for {
		dels, more, err := s.Runs.Deletions(ctx, cursor, 0)
		if err != nil || len(dels) == 0 {
			return err
		}
		if err := s.collectDeletionPage(ctx, dev, dels); err != nil {
			return err
		}
		if !more {
			return nil
		}
		cursor = dels[len(dels)-1].ID
	}
}

// collectDeletionPage records the tombstones of dels, a page of the
// deletion log, and the cursor after its last entry.
func (s *Store) collectDeletionPage(ctx context.Context, dev string, dels []runs.Deletion) error {
	type chatDetail struct { // a chat's deletion-log entry: its tombstone's detail, and its runs
		chatTombDetail
		Runs []string `json:"runs"`
	}
	details := map[int64]chatDetail{}
	var names []string
	for _, d := range dels {
		switch d.Kind {
		case runs.DeletedRun:
			names = append(names, "run "+d.RunID)
		case runs.DeletedChat:
			var det chatDetail
			if err := json.Unmarshal(d.Detail, &det); err != nil {
				return wserr.New(wserr.Corrupt, "sync", d.ChatID, "unreadable deletion log entry %d", d.ID)
			}
			details[d.ID] = det
			names = append(names, "chat "+d.ChatID)
			for _, r := range det.Runs {
				names = append(names, "run "+r)
			}
		}
	}
	synced, err := s.Remote.ItemsNamed(ctx, s.DB, names)
	if err != nil {
		return err
	}
	// What is here again (a run a tombstone deleted, then brought back
	// by a later state) was not deleted by the entries below.
	here, err := s.itemsOf(ctx, names)
	if err != nil {
		return err
	}
	var tombs []remote.Tombstone
	var drop []remote.Item
	tomb := func(kind, id string, d runs.Deletion, detail json.RawMessage) error {
		it, ok := synced[kind+" "+id]
		if !ok {
			return nil // never synced: no other device holds it from here
		}
		var succ cas.Hash
		if _, back := here[it.Name()]; back {
			// Here again: brought back, or (a run) created again under
			// its id, whose tombstone names the new run's first event so
			// that the devices put it in the deleted one's place.
			var again bool
			var err error
			if succ, again, err = s.createdAgain(ctx, it); err != nil || !again {
				return err
			}
		}
		if kind == "run" && (!it.First.IsZero() || !succ.IsZero()) {
			detail, _ = json.Marshal(remote.RunDetail{First: it.First, Successor: succ})
		}
		// A deletion a tombstone made here dropped the item it deleted
		// when the sync recorded what it took in (remote.TakenIn.Drop),
		// so an entry that finds its item synced is this device's own
		// deletion, after any conflict (or one made by a sync that ended
		// before it recorded: then the tombstone is published again, of
		// the same state, under this device's id, which deletes nothing
		// more).
		delete(synced, it.Name())
		drop = append(drop, it)
		tombs = append(tombs, remote.Tombstone{Kind: kind, ID: id, Parent: it.Parent, Seq: it.Seq, Last: it.Last,
			Device: dev, At: d.At, Detail: detail})
		return nil
	}
	for _, d := range dels {
		switch d.Kind {
		case runs.DeletedRun:
			if err := tomb("run", d.RunID, d, nil); err != nil {
				return err
			}
		case runs.DeletedChat:
			det := details[d.ID]
			for _, r := range det.Runs {
				if err := tomb("run", r, d, nil); err != nil {
					return err
				}
			}
			key, _ := json.Marshal(det.chatTombDetail)
			if err := tomb("chat", d.ChatID, d, key); err != nil {
				return err
			}
		}
	}
	return s.Remote.RecordDeletions(ctx, s.DB, tombs, drop, dels[len(dels)-1].ID)
}

// itemFirst returns the hash of the first event of the run here that
// holds the state it, a run's synced state, records (its last event at
// its seq), zero when the run here does not or there is none. An event
// that does not read (which fsck names) gives zero too: it must not keep
// the store from opening.
func (s *Store) itemFirst(ctx context.Context, it remote.Item) (first cas.Hash, err error) {
	if it.Seq == 0 || it.Last.IsZero() {
		return first, nil
	}
	err = s.DB.View(ctx, func(tx *index.Tx) error {
		held, err := s.holdsState(ctx, tx, it)
		if err != nil || !held {
			return err
		}
		first, err = s.firstEvent(ctx, tx, it.ID)
		return err
	})
	if wserr.Is(err, wserr.Corrupt) {
		return cas.Hash{}, nil
	}
	return first, err
}

// holdsState reports whether the run here holds the state it, a run's
// synced state, records: its last event at its seq.
func (s *Store) holdsState(ctx context.Context, tx *index.Tx, it remote.Item) (bool, error) {
	e, ok, err := s.Journal.EventAt(ctx, tx, it.ID, it.Seq)
	return err == nil && ok && eventHash(e) == it.Last, err
}

// createdAgain reports whether the run here under the id of it, a run's
// synced state, is another run, created after that one was deleted, and
// the hash of its first event: the run here does not hold the state's
// last event at that event's seq. A state without its last event's hash
// is taken for the run here.
func (s *Store) createdAgain(ctx context.Context, it remote.Item) (first cas.Hash, again bool, err error) {
	if it.Kind != "run" || it.First.IsZero() && (it.Seq == 0 || it.Last.IsZero()) {
		return first, false, nil
	}
	err = s.DB.View(ctx, func(tx *index.Tx) error {
		if first, err = s.firstEvent(ctx, tx, it.ID); err != nil || first.IsZero() {
			return err
		}
		if !it.First.IsZero() && first != it.First {
			again = true
			return nil
		}
		if it.Seq == 0 || it.Last.IsZero() {
			return nil
		}
		held, err := s.holdsState(ctx, tx, it)
		again = !held
		return err
	})
	if again && first == it.First {
		// Another run with the very same first event (created under the
		// same id at the same instant): nothing names it apart, so the
		// deletion is published without a successor and a device holding
		// the old run names the conflict.
		first = cas.Hash{}
	}
	return first, again, err
}

// publish writes the store's segment: what changed since its last sync
// (or, when the deltas have outgrown the last base, all of it), its new
// deletions, and the change of its object set.
func (s *Store) publish(ctx context.Context, dev string, forceBase bool, rep *SyncReport) error {
	tombs, err := s.Remote.PendingTombstones(ctx, s.DB)
	if err != nil {
		return err
	}
	for _, tb := range tombs {
		rep.Tombstones = append(rep.Tombstones, tb.Kind+" "+tb.ID)
	}
	// Only the items changed since the last sync are examined, unless
	// every one must be (the first sync, or the first after a reset).
	claimed, err := s.Remote.ClaimChanges(ctx, s.DB)
	if err != nil {
		return err
	}
	// changed holds the items changed since the last sync, from disk
	// beyond a page (itemList); a run this device sent last goes from the
	// event the tier has on (from): whoever took in its segments holds the
	// run up to there. Each run's state is read before it is exported, so
	// what is recorded as synced is the segment's or an earlier state of
	// it, never a later one written meanwhile, which the next tail would
	// start from.
	changed := newItemList(ctx)
	defer func() { changed.Close() }()
	from := map[string]int64{}
	add := func(it, old remote.Item, ok bool) {
		if ok && it.Kind == "run" && old.Sent && old.Seq > 0 && it.Seq >= old.Seq {
			from[it.ID] = old.Seq
		}
	}
	if claimed.All {
		err = s.eachItem(ctx, func(tx *index.Tx, it, old remote.Item, ok bool) error {
			if ok && old.FP == it.FP {
				return nil
			}
			add(it, old, ok)
			if err := s.withEnds(ctx, tx, &it); err != nil {
				return err
			}
			it.Sent = true
			return changed.push(it, !ok)
		})
	} else {
		var synced, cur map[string]remote.Item
		if synced, err = s.Remote.ItemsNamed(ctx, s.DB, claimed.Names); err != nil {
			return err
		}
		if cur, err = s.itemsOf(ctx, claimed.Names); err != nil {
			return err
		}
		var list []remote.Item
		for name, it := range cur {
			if old, ok := synced[name]; !ok || old.FP != it.FP {
				add(it, old, ok)
				list = append(list, it)
			}
		}
		slices.SortFunc(list, func(a, b remote.Item) int { return strings.Compare(a.Name(), b.Name()) })
		if err = s.withLast(ctx, list); err != nil {
			return err
		}
		for _, it := range list {
			_, ok := synced[it.Name()]
			it.Sent = true
			if err = changed.push(it, !ok); err != nil {
				return err
			}
		}
	}
	if err != nil {
		return err
	}
	size, since, hasBase, err := remote.LastBase(ctx, s.DB)
	if err != nil {
		return err
	}
	delta, err := s.exportItems(ctx, changed, from)
	if err != nil {
		return err
	}
	defer func() { delta.Close() }()
	objs, err := s.Remote.ObjectDelta(ctx, s.DB, false)
	if err != nil {
		return err
	}
	defer func() { objs.Close() }()
	rebase, err := remote.Rebase(ctx, s.DB)
	if err != nil {
		return err
	}
	forceBase = forceBase || rebase
	if hasBase && !forceBase && delta.Size() == 0 && len(tombs) == 0 && objs.Empty() {
		return s.Remote.SettleChanges(ctx, s.DB, claimed)
	}
	at, err := remote.SegmentTime(ctx, s.DB, s.now().UTC())
	if err != nil {
		return err
	}
	prev, err := remote.LastSegment(ctx, s.DB)
	if err != nil {
		return err
	}
	h := remote.SegmentHeader{Device: dev, At: at, Tombstones: tombs, Prev: prev}
	items := changed
	base := forceBase || !hasBase || since+delta.Size() > size
	if base {
		// A base carries what this device sent last of each object:
		// what it only took in is in the sending device's segments.
		h.Base = true
		all := newItemList(ctx)
		defer all.Close()
		if err := s.eachItem(ctx, func(tx *index.Tx, it, old remote.Item, ok bool) error {
			if ok && old.FP == it.FP && !old.Sent {
				return nil
			}
			if err := s.withEnds(ctx, tx, &it); err != nil {
				return err
			}
			it.Sent = true
			return all.push(it, !ok)
		}); err != nil {
			return err
		}
		delta.Close()
		if delta, err = s.exportItems(ctx, all, nil); err != nil {
			return err
		}
		items = all
		objs.Close()
		if objs, err = s.Remote.ObjectDelta(ctx, s.DB, true); err != nil {
			return err
		}
		// Every tombstone of this device, the pending ones included, from
		// a temporary file; its pending ones are what the base publishes
		// anew (RecordPublished).
		if h.Own, err = s.Remote.OwnTombstones(ctx, s.DB, dev); err != nil {
			return err
		}
		defer h.Own.Close()
		h.Tombstones = nil
		tombs = slices.DeleteFunc(tombs, func(tb remote.Tombstone) bool { return tb.Device != dev })
	}
	replaced, err := s.replacements(ctx, changed, dev, h.At)
	if err != nil {
		return err
	}
	h.Tombstones = append(h.Tombstones, replaced...)
	// Blobs written since the first push, which the archive may name.
	more, err := s.Remote.PushInSync(ctx, s.DB)
	if err != nil {
		return err
	}
	rep.Pushed.Packs += more.Packs
	rep.Pushed.Objects += more.Objects
	rep.Pushed.Chunked += more.Chunked
	rep.Pushed.Bytes += more.Bytes
	if more.Packs+more.Chunked > 0 {
		// The pushed objects join the set this segment announces.
		objs.Close()
		if objs, err = s.Remote.ObjectDelta(ctx, s.DB, h.Base); err != nil {
			return err
		}
	}
	var idx []string
	if !h.Base {
		if idx, err = s.Remote.PendingIndexes(ctx, s.DB); err != nil {
			return err
		}
		h.Indexes = &idx
	}
	seg, err := s.Remote.PublishSegment(ctx, h, objs, delta)
	if err != nil {
		return err
	}
	rep.Published, rep.Base = seg.Key, seg.Base
	rep.SegmentBytes = seg.Size
	if err := changed.eachItem(func(it remote.Item) error {
		rep.SentCount++
		if len(rep.Sent) < MaxSentNames {
			rep.Sent = append(rep.Sent, it.Name())
		}
		return nil
	}); err != nil {
		return err
	}
	return s.Remote.RecordPublished(ctx, s.DB, remote.Published{Segment: seg, Bytes: seg.Size, EachItem: items.eachItem,
		Tombstones: append(tombs, replaced...), Objects: objs, Indexes: idx, Claimed: claimed})
}

// replacements returns, for each run in changed that is new here (not
// synced) under the id of a deletion the store knows of another run, that
// deletion again with the new run as its successor, so that a device
// still holding the deleted run (it has not read the deletion yet) puts
// the new run in its place instead of naming a conflict. The device's own
// deletions of a run it created again before publishing them name their
// successor already (collectDeletions).
func (s *Store) replacements(ctx context.Context, changed *itemList, dev string, at time.Time) ([]remote.Tombstone, error) {
	var out []remote.Tombstone
	err := changed.each(func(it remote.Item, isNew bool) error {
		if !isNew || it.Kind != "run" {
			return nil
		}
		known, err := s.Remote.FindTombstones(ctx, s.DB, "run", it.ID)
		if err != nil || len(known) == 0 {
			return err
		}
		first, err := s.runFirst(ctx, it.ID)
		if err != nil {
			return err
		}
		for _, tb := range known {
			d := tb.Run()
			if first.IsZero() || d.First.IsZero() || first == d.First || first == d.Successor {
				continue
			}
			tb.Device, tb.At = dev, at
			tb.Detail, _ = json.Marshal(remote.RunDetail{First: d.First, Successor: first})
			out = append(out, tb)
		}
		return nil
	})
	return out, err
}

// exportItems writes a metadata archive (blobs elsewhere) of items: runs
// with their chats (those in from from that journal seq on), chats no run
// of which changed, actor spaces, into a temporary file. None gives no
// archive (nil).
func (s *Store) exportItems(ctx context.Context, items *itemList, from map[string]int64) (*remote.Spool, error) {
	scope := archive.Scope{From: from}
	runChats := map[string]bool{}
	if err := items.eachItem(func(it remote.Item) error {
		if it.Kind == "run" {
			scope.Runs = append(scope.Runs, it.ID)
			runChats[it.Parent] = true
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if err := items.eachItem(func(it remote.Item) error {
		switch {
		case it.Kind == "chat" && !runChats[it.ID]:
			scope.Chats = append(scope.Chats, it.ID)
		case it.Kind == "actor":
			scope.Actors = append(scope.Actors, it.ID)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if len(scope.Runs)+len(scope.Chats)+len(scope.Actors) == 0 {
		return nil, nil
	}
	sp, err := remote.NewSpool()
	if err != nil {
		return nil, err
	}
	if _, err := s.Archive.Export(ctx, sp, scope, archive.Options{BlobsElsewhere: true}); err != nil {
		sp.Close()
		return nil, err
	}
	return sp, nil
}

// ReclaimRemote removes from the store's remote tier the packs no device
// uses and the devices' superseded segments, within opts' bounds, holding
// the tier's reclaim lease (see remote.Storage.Reclaim and
// docs/remote.md). It fails with store.invalid_options for a store
// without a remote tier, store.busy wrapping remote.ErrLocked while a
// device syncs or another reclaims, and store.busy wrapping
// remote.ErrLeaseLost when its lease could not be renewed in time (it
// removed nothing more).
func (s *Store) ReclaimRemote(ctx context.Context, opts remote.ReclaimOptions) (remote.ReclaimStats, error) {
	if s.Remote == nil {
		return remote.ReclaimStats{}, wserr.New(wserr.InvalidOptions, "reclaim remote", s.Dir, "the store has no remote blob tier (--blobs)")
	}
	dev, err := remote.Device(ctx, s.DB)
	if err != nil {
		return remote.ReclaimStats{}, err
	}
	return s.Remote.Reclaim(ctx, s.DB, dev, opts)
}

// recoverBlobs records again the blobs the archive r names that this
// store has no record of: its gc drops the records of blobs nothing here
// uses (the other side of a conflict, a run deleted here), which another
// device's archive may still name.
func (s *Store) recoverBlobs(ctx context.Context, r io.Reader) error {
	var missing []cas.Hash
	_, err := archive.ReadManifest(ctx, r, func(br archive.BlobRef) error {
		has, err := s.Blobs.Has(ctx, br.Hash)
		if !has {
			missing = append(missing, br.Hash)
		}
		return err
	})
	if err != nil {
		return err
	}
	if len(missing) == 0 {
		return nil
	}
	_, err = s.Remote.Recover(ctx, s.DB, missing)
	return err
}

// ResetDevice makes the store a sync device of its own: for a store
// restored from another device's replica (wsctl restore does it), which
// would otherwise publish as that device. What that device published is
// forgotten, so the next sync publishes a base segment of every item; the
// deletions it made since its last sync become this device's tombstones,
// published by the next sync, so what it deleted does not come back from
// its older segments. It fails with the index's errors.
func (s *Store) ResetDevice(ctx context.Context) error {
	if s.Remote != nil {
		dev, ok, err := remote.RecordedDevice(ctx, s.DB)
		if err != nil {
			return err
		}
		if ok {
			if err := s.collectDeletions(ctx, dev); err != nil {
				return err
			}
		}
	}
	return remote.ResetDevice(ctx, s.DB)
}
