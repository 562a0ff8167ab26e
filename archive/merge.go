package archive

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/wsstore/wsstore/actors"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/checkpoint"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/wserr"
)

// mergeRun is a run the store holds another state of, with what the
// archive holds for it, settled once its last row is read (Options.Merge).
// Its events are compared with the store's as they arrive (journalMerge),
// and the checkpoint rows it writes go to a list that moves to disk past
// mergeSpillAfter rows: what a merge holds does not grow with the run.
type mergeRun struct {
	rec     runs.RunRecord
	cps     *index.SpillList // the archive's checkpoint rows, JSON
	seqs    seqSet           // their seqs
	commits []runs.CommitRow
	tail    *RunTail // the archive holds the run from tail.From on
	// from, for a run whose row the store holds as it is, is the store's
	// last event: only the archive's events from it on are compared, and
	// none means the archive holds nothing newer.
	from  int64
	off   int64 // the store's events compared are those after off
	first int64 // the seq of the archive's first event compared
	ev    *journalMerge[journal.Event]
}

// journalMerge compares a journal the archive holds (a run's events, an
// actor space's changes) with the store's, an entry at a time as the
// archive's arrive and a page of the store's at a time, and keeps the
// archive's entries past the store's last in a list that moves to disk
// past mergeSpillAfter entries.
type journalMerge[T any] struct {
	n      int64 // the archive's entries so far
	held   int64 // how many of them the store holds too
	parted int64 // where the journals part, counted from 0; -1 if they do not
	local  *pager[T]
	same   func(a, b T) bool
	fresh  *index.SpillList // the archive's entries past the store's, JSON
}

func newJournalMerge[T any](sets *index.Spill, local *pager[T], same func(a, b T) bool) *journalMerge[T] {
	return &journalMerge[T]{parted: -1, local: local, same: same, fresh: sets.NewList()}
}

// add compares the archive's entry v with the store's at the same place
// and keeps it if the store has none there.
func (m *journalMerge[T]) add(v T) error {
	i := m.n
	m.n++
	if m.parted >= 0 {
		return nil
	}
	local, ok, err := m.local.next()
	if err != nil {
		return err
	}
	if ok {
		m.held++
		if !m.same(local, v) {
			m.parted = i
		}
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return m.fresh.Push(b)
}

// newMergeRun returns the merge of run r, held here from the archive's
// tail on (tail), or with the same row up to event from (from), or else
// with another row.
func (im *importer) newMergeRun(ctx context.Context, tx *index.Tx, r runs.RunRecord, tail *RunTail, from int64) *mergeRun {
	off := max(from-1, 0)
	if tail != nil {
		off = tail.From - 1
	}
	sets := im.mergeSets(ctx)
	local := newPager(off, func(after int64, fn func(journal.Event) error) error {
		return im.a.p.Journal.ExportEventsAfter(ctx, tx, r.ID, after, fn)
	}, func(e journal.Event) int64 { return e.Seq })
	local.size = func(e journal.Event) int { return len(e.Payload) }
	return &mergeRun{rec: r, tail: tail, from: from, off: off, cps: sets.NewList(), seqs: seqSet{sets.NewMap()},
		ev: newJournalMerge(sets, local, sameEvent)}
}

// mergeSets returns the import's sets for the rows a merge keeps.
func (im *importer) mergeSets(ctx context.Context) *index.Spill {
	if im.mergeRows == nil {
		im.mergeRows = index.NewSpill(ctx, mergeSpillAfter)
	}
	return im.mergeRows
}

// addCheckpoint keeps the archive's checkpoint row c.
func (mr *mergeRun) addCheckpoint(c checkpoint.Record) error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	if err := mr.seqs.add(c.Seq); err != nil {
		return err
	}
	return mr.cps.Push(b)
}

// addEvent compares the archive's event e with the store's.
func (mr *mergeRun) addEvent(e journal.Event) error {
	if e.Seq < mr.from {
		return nil
	}
	if mr.ev.n == 0 {
		mr.first = e.Seq
	}
	return mr.ev.add(e)
}

// pager reads rows ordered by seq a page at a time, through a walk that
// calls fn with each row after a seq until fn fails.
type pager[T any] struct {
	walk  func(after int64, fn func(T) error) error
	seq   func(T) int64
	size  func(T) int // bytes a row holds; nil: rows are small
	after int64
	buf   []T
	pos   int
	done  bool
}

// pagerPage is how many rows a pager reads at a time, and pagerBytes
// how many bytes of them (size): a page of the journal's.
const (
	pagerPage  = journal.MaxLimit
	pagerBytes = journal.MaxPageBytes
)

var errPageFull = errors.New("page full")

func newPager[T any](after int64, walk func(after int64, fn func(T) error) error, seq func(T) int64) *pager[T] {
	return &pager[T]{walk: walk, seq: seq, after: after}
}

// next returns the next row, and false after the last.
func (p *pager[T]) next() (T, bool, error) {
	var zero T
	if p.pos == len(p.buf) && !p.done {
		p.buf, p.pos = p.buf[:0], 0
		bytes := 0
		err := p.walk(p.after, func(t T) error {
			p.buf = append(p.buf, t)
			if p.size != nil {
				bytes += p.size(t)
			}
			if len(p.buf) == pagerPage || bytes >= pagerBytes {
				return errPageFull
			}
			return nil
		})
		if err != nil && !errors.Is(err, errPageFull) {
			return zero, false, err
		}
		p.done = err == nil
		if len(p.buf) > 0 {
			p.after = p.seq(p.buf[len(p.buf)-1])
		}
	}
	if p.pos == len(p.buf) {
		return zero, false, nil
	}
	p.pos++
	return p.buf[p.pos-1], true, nil
}

// mergeSpace is an actor space the store holds another state of, with
// the changes the archive holds for it compared with the store's
// (Options.Merge).
type mergeSpace struct {
	rec     actors.SpaceRecord
	changes *journalMerge[actors.ChangeRecord]
}

// newMergeSpace returns the merge of actor space s.
func (im *importer) newMergeSpace(ctx context.Context, tx *index.Tx, s actors.SpaceRecord) *mergeSpace {
	local := newPager(0, func(after int64, fn func(actors.ChangeRecord) error) error {
		return im.a.p.Actors.EachExportChange(ctx, tx, s.Actor, after, fn)
	}, func(c actors.ChangeRecord) int64 { return c.Seq })
	return &mergeSpace{rec: s, changes: newJournalMerge(im.mergeSets(ctx), local, sameChange)}
}

// eachKept calls fn with each row of list l, decoded.
func eachKept[T any](l *index.SpillList, fn func(T) error) error {
	for i := range l.Len() {
		b, err := l.At(i)
		if err != nil {
			return err
		}
		var v T
		if err := json.Unmarshal(b, &v); err != nil {
			return err
		}
		if err := fn(v); err != nil {
			return err
		}
	}
	return nil
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
	id, ev := mr.rec.ID, mr.ev
	if mr.from > 0 && (ev.n == 0 || mr.first != mr.from) {
		return im.outcome("run", id, false, nil)
	}
	if mr.tail != nil {
		if ev.n == 0 || mr.first != mr.tail.From {
			return im.outcome("run", id, false, wserr.New(wserr.Corrupt, "merge run", "",
				"run %s: the archive holds it from event %d on but starts with another", id, mr.tail.From))
		}
		if ev.held == 0 {
			return im.outcome("run", id, false, wserr.New(wserr.Conflict, "merge run", "",
				"run %s: the archive holds it from event %d on, and this store holds fewer events", id, mr.tail.From))
		}
	}
	if ev.parted >= 0 {
		err := wserr.New(wserr.Conflict, "merge run", "",
			"run %s was written on two devices: the journals part at event %d", id, mr.off+ev.parted+1)
		if mr.off+ev.parted == 0 {
			return im.note(Conflicted, "run "+id, Conflict{Kind: "run", ID: id, Reason: wserr.MessageOf(err), OtherRun: true})
		}
		return im.outcome("run", id, false, err)
	}
	if ev.fresh.Len() == 0 {
		return im.outcome("run", id, false, nil)
	}
	var top int64
	if err := im.a.p.Checkpoints.EachExportRecord(ctx, tx, id, func(c checkpoint.Record) error {
		top = max(top, c.Seq)
		return nil
	}); err != nil {
		return err
	}
	if mr.tail != nil {
		// The writer's checkpoints after the ones held here are all in
		// the tail, else this store lacks some.
		for _, seq := range mr.tail.Checkpoints {
			theirs, err := mr.seqs.has(seq)
			if err != nil {
				return err
			}
			if seq > top && !theirs {
				return im.outcome("run", id, false, wserr.New(wserr.Conflict, "merge run", "",
					"run %s: the archive holds it from event %d on, and this store lacks its checkpoint %d", id, mr.tail.From, seq))
			}
			if err := mr.seqs.add(seq); err != nil {
				return err
			}
		}
	}
	if err := im.a.p.Runs.MergeRun(ctx, tx, mr.rec); err != nil {
		return err
	}
	// The new checkpoints' versions are queued as an added run's are
	// (versions.go), against the checkpoints the store holds.
	im.startRun(mr.rec)
	if err := eachKept(mr.cps, func(c checkpoint.Record) error {
		if c.Seq <= top {
			return nil
		}
		if err := im.a.p.Checkpoints.ImportRecord(ctx, tx, c); err != nil {
			return rowError(err)
		}
		return im.checkpointVersions(ctx, tx, c.Seq, c.ParentSeq, c.Root)
	}); err != nil {
		return err
	}
	// A checkpoint held here that the writer no longer holds was pruned
	// there (its journal, of which this store's is a prefix, says so).
	var pruned []int64
	prune := func() error {
		if len(pruned) == 0 {
			return nil
		}
		err := im.a.p.Checkpoints.DeleteRecords(ctx, tx, id, pruned)
		pruned = pruned[:0]
		return err
	}
	if err := im.a.p.Checkpoints.EachExportRecord(ctx, tx, id, func(c checkpoint.Record) error {
		if c.Seq > top {
			return nil
		}
		theirs, err := mr.seqs.has(c.Seq)
		if err != nil || theirs {
			return err
		}
		if pruned = append(pruned, c.Seq); len(pruned) == pagerPage {
			return prune()
		}
		return nil
	}); err != nil {
		return err
	}
	if err := prune(); err != nil {
		return err
	}
	if err := im.endLineage(ctx, tx); err != nil {
		return err
	}
	if err := im.a.p.Runs.MergeCommits(ctx, tx, id, mr.commits); err != nil {
		return rowError(err)
	}
	if err := eachKept(ev.fresh, func(e journal.Event) error {
		return rowError(im.a.p.Journal.ImportEvent(ctx, tx, e))
	}); err != nil {
		return err
	}
	return im.note(Updated, "run "+id, Conflict{})
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
				if err := im.note(Updated, "chat "+c.ID, Conflict{}); err != nil {
					return err
				}
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
	actor, changes := ms.rec.Actor, ms.changes
	if changes.parted >= 0 {
		return im.outcome("actor", actor, false, wserr.New(wserr.Conflict, "merge actor space", "",
			"actor %s was changed on two devices: the journals part at version %d", actor, changes.parted+1))
	}
	if changes.fresh.Len() == 0 {
		return im.outcome("actor", actor, false, nil)
	}
	cur, _, err := im.a.p.Actors.ExportSpace(ctx, tx, actor)
	if err != nil {
		return err
	}
	if err := im.a.p.Actors.MergeSpace(ctx, tx, cur.Seq, ms.rec); err != nil {
		return im.outcome("actor", actor, false, err)
	}
	if err := eachKept(changes.fresh, func(c actors.ChangeRecord) error {
		return im.a.p.Actors.ImportChange(ctx, tx, c)
	}); err != nil {
		return err
	}
	return im.note(Updated, "actor "+actor, Conflict{})
}
