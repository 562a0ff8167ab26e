package archive

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/wsstore/wsstore/actors"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/checkpoint"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/wserr"
)

// mergeRun is a run the store holds another state of, with the rows the
// archive holds for it, kept until its last row is read (Options.Merge).
type mergeRun struct {
	rec     runs.RunRecord
	cps     []checkpoint.Record
	commits []runs.CommitRow
	events  []journal.Event
	tail    *RunTail // the archive holds the run from tail.From on
	// from, for a run whose row the store holds as it is, is the store's
	// last event: only the archive's events from it on are kept, and
	// none means the archive holds nothing newer.
	from int64
}

// mergeSpace is an actor space the store holds another state of, with
// the changes the archive holds for it (Options.Merge).
type mergeSpace struct {
	rec     actors.SpaceRecord
	changes []actors.ChangeRecord
}

// mergeState is what a merging import keeps across the records: the run
// being gathered, the chats whose persist layers differ, and the persist
// base each version of each chat had, by the archive's runs.
type mergeState struct {
	run   *mergeRun
	space *mergeSpace
	chats []runs.ChatRecord
	bases map[string]map[int64]cas.Hash // chat → persist version → base
}

func (m *mergeState) noteBase(r runs.RunRecord) {
	if m.bases == nil {
		m.bases = map[string]map[int64]cas.Hash{}
	}
	if m.bases[r.ChatID] == nil {
		m.bases[r.ChatID] = map[int64]cas.Hash{}
	}
	m.bases[r.ChatID][r.PersistVersion] = r.PersistBase
}

func sameEvent(a, b journal.Event) bool {
	if a.Seq != b.Seq || a.Type != b.Type || a.Level != b.Level || !a.At.Equal(b.At) {
		return false
	}
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a.Payload) != nil || json.Compact(&cb, b.Payload) != nil {
		return bytes.Equal(a.Payload, b.Payload)
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}

// flushRun settles the gathered run: the store's journal of it a prefix
// of the archive's brings the run forward (the new checkpoints, commits
// and events appended, the checkpoints the writer pruned deleted, the row
// replaced); the archive's a prefix of the
// store's (the store is ahead, or level) leaves it; journals that part
// are a conflict: the run was written on two devices.
func (im *importer) flushRun(ctx context.Context, tx *index.Tx) error {
	mr := im.merge.run
	if mr == nil {
		return nil
	}
	im.merge.run = nil
	id := mr.rec.ID
	// A tail is compared from its anchor on: local holds the events
	// after off, as mr.events are.
	var off int64
	if mr.from > 0 {
		if len(mr.events) == 0 || mr.events[0].Seq != mr.from {
			return im.outcome("run", id, false, nil)
		}
		off = mr.from - 1
	}
	if mr.tail != nil {
		off = mr.tail.From - 1
		if len(mr.events) == 0 || mr.events[0].Seq != mr.tail.From {
			return im.outcome("run", id, false, wserr.New(wserr.Corrupt, "merge run", "",
				"run %s: the archive holds it from event %d on but starts with another", id, mr.tail.From))
		}
	}
	var local []journal.Event
	if err := im.a.p.Journal.ExportEventsAfter(ctx, tx, id, off, func(e journal.Event) error {
		local = append(local, e)
		return nil
	}); err != nil {
		return err
	}
	if mr.tail != nil && len(local) == 0 {
		return im.outcome("run", id, false, wserr.New(wserr.Conflict, "merge run", "",
			"run %s: the archive holds it from event %d on, and this store holds fewer events", id, mr.tail.From))
	}
	for i := range min(len(local), len(mr.events)) {
		if !sameEvent(local[i], mr.events[i]) {
			err := wserr.New(wserr.Conflict, "merge run", "",
				"run %s was written on two devices: the journals part at event %d", id, off+int64(i)+1)
			if off+int64(i) == 0 {
				im.sum.Conflicts = append(im.sum.Conflicts, Conflict{Kind: "run", ID: id, Reason: wserr.MessageOf(err), OtherRun: true})
				return nil
			}
			return im.outcome("run", id, false, err)
		}
	}
	if len(mr.events) <= len(local) {
		return im.outcome("run", id, false, nil)
	}
	have, err := im.a.p.Checkpoints.ExportRecords(ctx, tx, id)
	if err != nil {
		return err
	}
	var top int64
	// The new checkpoints' versions are queued as an added run's are
	// (versions.go), against the checkpoints the store holds.
	im.startRun(mr.rec)
	for _, c := range have {
		top = max(top, c.Seq)
		im.lin.roots[c.Seq] = c.Root
	}
	theirs := map[int64]bool{}
	for _, c := range mr.cps {
		theirs[c.Seq] = true
	}
	if mr.tail != nil {
		// The writer's checkpoints after the ones held here are all in
		// the tail, else this store lacks some.
		for _, seq := range mr.tail.Checkpoints {
			if seq > top && !theirs[seq] {
				return im.outcome("run", id, false, wserr.New(wserr.Conflict, "merge run", "",
					"run %s: the archive holds it from event %d on, and this store lacks its checkpoint %d", id, mr.tail.From, seq))
			}
			theirs[seq] = true
		}
	}
	if err := im.a.p.Runs.MergeRun(ctx, tx, mr.rec); err != nil {
		return err
	}
	for _, c := range mr.cps {
		if c.Seq > top {
			if err := im.a.p.Checkpoints.ImportRecord(ctx, tx, c); err != nil {
				return rowError(err)
			}
			if err := im.checkpointVersions(ctx, tx, c.Seq, c.ParentSeq, c.Root); err != nil {
				return err
			}
		}
	}
	// A checkpoint held here that the writer no longer holds was pruned
	// there (its journal, of which this store's is a prefix, says so).
	var pruned []int64
	for _, c := range have {
		if !theirs[c.Seq] {
			pruned = append(pruned, c.Seq)
		}
	}
	if len(pruned) > 0 {
		if err := im.a.p.Checkpoints.DeleteRecords(ctx, tx, id, pruned); err != nil {
			return err
		}
	}
	if err := im.endLineage(ctx, tx); err != nil {
		return err
	}
	if err := im.a.p.Runs.MergeCommits(ctx, tx, id, mr.commits); err != nil {
		return rowError(err)
	}
	for _, e := range mr.events[len(local):] {
		if err := im.a.p.Journal.ImportEvent(ctx, tx, e); err != nil {
			return rowError(err)
		}
	}
	im.sum.Updated = append(im.sum.Updated, "run "+id)
	return nil
}

// flushChats settles the chats whose persist layers differ. The archive's
// promotion started from the store's state (a run of the archive began at
// the store's version from the store's root): the store's layer moves
// forward by compare-and-swap. The store's started from the archive's:
// the store is ahead and stays. Otherwise persist/ was promoted on both
// devices since they parted: a conflict, named, and both layers stay.
func (im *importer) flushChats(ctx context.Context, tx *index.Tx) error {
	for _, c := range im.merge.chats {
		local, err := im.a.p.Runs.ExportChat(ctx, tx, c.ID)
		if err != nil {
			return err
		}
		conflict := wserr.New(wserr.Conflict, "merge chat", "", "chat workspace %s: persist/ was promoted on two devices (here version %d, there version %d)",
			c.ID, local.PersistVersion, c.PersistVersion)
		switch {
		case c.PersistVersion > local.PersistVersion:
			base, ok := im.merge.bases[c.ID][local.PersistVersion]
			if !ok || base != local.PersistRoot {
				err = conflict
				break
			}
			if err = im.a.p.Runs.MergePersist(ctx, tx, local, c); err == nil {
				im.sum.Updated = append(im.sum.Updated, "chat "+c.ID)
				continue
			}
		case c.PersistVersion < local.PersistVersion:
			ahead := false
			err = im.a.p.Runs.EachRunRecord(ctx, tx, c.ID, func(r runs.RunRecord) error {
				ahead = ahead || (r.PersistVersion == c.PersistVersion && r.PersistBase == c.PersistRoot)
				return nil
			})
			if err == nil && !ahead {
				err = conflict
			}
		default:
			err = conflict
		}
		if err := im.outcome("chat", c.ID, false, err); err != nil {
			return fmt.Errorf("merge chat %s: %w", c.ID, err)
		}
	}
	return nil
}

// sameChange compares two changes of an actor's journal; the root is left
// out, since gc prunes versions on each device on its own.
func sameChange(a, b actors.ChangeRecord) bool {
	return a.Seq == b.Seq && a.Op == b.Op && a.Path == b.Path && a.Files == b.Files && a.Bytes == b.Bytes && a.Created == b.Created
}

// flushSpace settles the gathered actor space as flushRun settles a run:
// the store's journal of it a prefix of the archive's brings it forward
// (the row moved by compare-and-swap on its version, the new changes
// appended); the archive's a prefix of the store's leaves it; journals
// that part are a conflict: the space was changed on two devices.
func (im *importer) flushSpace(ctx context.Context, tx *index.Tx) error {
	ms := im.merge.space
	if ms == nil {
		return nil
	}
	im.merge.space = nil
	actor := ms.rec.Actor
	local, err := im.a.p.Actors.ExportChanges(ctx, tx, actor)
	if err != nil {
		return err
	}
	for i := range min(len(local), len(ms.changes)) {
		if !sameChange(local[i], ms.changes[i]) {
			return im.outcome("actor", actor, false, wserr.New(wserr.Conflict, "merge actor space", "",
				"actor %s was changed on two devices: the journals part at version %d", actor, i+1))
		}
	}
	if len(ms.changes) <= len(local) {
		return im.outcome("actor", actor, false, nil)
	}
	cur, _, err := im.a.p.Actors.ExportSpace(ctx, tx, actor)
	if err != nil {
		return err
	}
	if err := im.a.p.Actors.MergeSpace(ctx, tx, cur.Seq, ms.rec); err != nil {
		return im.outcome("actor", actor, false, err)
	}
	for _, c := range ms.changes[len(local):] {
		if err := im.a.p.Actors.ImportChange(ctx, tx, c); err != nil {
			return err
		}
	}
	im.sum.Updated = append(im.sum.Updated, "actor "+actor)
	return nil
}
