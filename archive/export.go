package archive

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/wsstore/wsstore/actors"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/checkpoint"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/tempfile"
	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// scratchRoot is the top-level directory of a run that is never exported.
const scratchRoot = "scratch"

// spillAfter is how many addresses each of an export's or an import's
// sets holds in memory before it moves to a scratch database on disk
// (index.Spill): about 100 bytes an address, so a set costs at most a few
// MiB however many objects the archive holds. Tests lower it.
var spillAfter = 1 << 14

// mergeSpillAfter is how many rows each list of a merging import holds in
// memory (merge.go): rows are larger than addresses (an event's payload,
// say), so the lists move to disk sooner.
var mergeSpillAfter = 1 << 10

// plan is what an export holds, gathered in one read transaction: the
// rows, spooled to a temporary file as JSON lines, and every address they
// reach, in sets that spill to disk.
type plan struct {
	m       Manifest
	spool   *os.File
	spooled int64
	events  int64
	sets    *index.Spill
	blobs   *index.SpillMap  // blob address → size
	trees   *index.SpillMap  // tree addresses
	order   *index.SpillList // trees, children before parents
	// roots pairs a run root with the root exported for it (without
	// scratch/), 64 bytes; stripped maps the run root to its pair's
	// index, made a root exported but not stored to its pair's index.
	roots    *index.SpillList
	stripped *index.SpillMap
	made     *index.SpillMap
}

// newPlan returns an empty plan spooling its rows to spool. Close its
// sets when done.
func newPlan(ctx context.Context, spool *os.File) *plan {
	sets := index.NewSpill(ctx, spillAfter)
	return &plan{spool: spool, sets: sets, blobs: sets.NewMap(), trees: sets.NewMap(), order: sets.NewList(),
		roots: sets.NewList(), stripped: sets.NewMap(), made: sets.NewMap()}
}

// Export writes an archive of what scope selects to w, front to back. The
// rows are read in one read transaction, so the archive is one consistent
// state of them; blobs stream from the content store, so memory holds
// addresses, never contents. Rows are spooled to a temporary file while
// the blobs are written, because a tar entry states its size first.
//
// A scope that selects nothing (no flag, or SkipWorkspace leaving it
// empty), or All with runs, chats or actors named too, fails with
// workspace.invalid_argument; a run, chat or actor that
// does not exist with run.not_found or store.not_found; a write error on
// w is returned wrapped, and w then holds a truncated archive that import
// refuses.
func (a *Archiver) Export(ctx context.Context, w io.Writer, scope Scope, opt Options) (Summary, error) {
	start := a.p.Now()
	if w == nil {
		return Summary{}, wserr.New(wserr.InvalidArgument, "export", "", "nil writer")
	}
	if err := checkScope(scope); err != nil {
		return Summary{}, err
	}
	scope.Chats = chatIDs(scope.Chats)
	spool, done, err := tempfile.Create("wsstore-export-*.jsonl")
	if err != nil {
		return Summary{}, spoolError(err)
	}
	defer done()
	p := newPlan(ctx, spool)
	defer p.sets.Close()
	p.m = Manifest{Format: FormatName, Version: Version, CreatedAt: start.UTC(), Scope: scope,
		Chats: []string{}, Runs: []string{}, Actors: []string{}, BlobsElsewhere: opt.BlobsElsewhere}
	report(opt, "scan", 0, 0)
	if err := a.p.DB.View(ctx, func(tx *index.Tx) error { return a.gather(ctx, tx, p, scope) }); err != nil {
		return Summary{}, err
	}
	if len(p.m.Chats) == 0 && len(p.m.Actors) == 0 {
		return Summary{}, wserr.New(wserr.InvalidArgument, "export", "", "the scope selects nothing to export")
	}
	cw := &countingWriter{w: w}
	sum, err := a.write(ctx, cw, p, opt)
	if err != nil {
		return Summary{}, a.changedMeanwhile(ctx, p, scope, err)
	}
	sum.ArchiveBytes = cw.n
	sum.Seconds = a.p.Now().Sub(start).Seconds()
	return sum, nil
}

// CheckExport checks scope as Export does before it writes a byte, without
// gathering what it selects: in one read transaction it looks up each run,
// chat and actor named, and for All whether the store holds a chat or an
// actor space. It fails as Export would: workspace.invalid_argument for a
// scope that selects nothing, run.not_found or store.not_found for a run,
// chat or actor that does not exist. What it reads grows with the names in
// scope, not with what they hold.
func (a *Archiver) CheckExport(ctx context.Context, scope Scope) error {
	if err := checkScope(scope); err != nil {
		return err
	}
	return a.p.DB.View(ctx, func(tx *index.Tx) error {
		for _, id := range chatIDs(scope.Chats) {
			if _, err := a.p.Runs.ExportChat(ctx, tx, id); err != nil {
				return err
			}
		}
		for _, id := range scope.Runs {
			if _, err := a.p.Runs.ExportRun(ctx, tx, id); err != nil {
				return err
			}
		}
		if !scope.SkipWorkspace {
			for _, name := range scope.Actors {
				if _, ok, err := a.p.Actors.ExportSpace(ctx, tx, name); err != nil {
					return err
				} else if !ok {
					return wserr.New(wserr.NotFound, "export", "", "actor %s has no workspace", name)
				}
			}
		}
		if !scope.All {
			return nil // a name found selects its chat or its space
		}
		// The first chat, or actor space, is enough to know.
		errFound := errors.New("found")
		err := a.p.Runs.EachChatRecord(ctx, tx, func(runs.ChatRecord) error { return errFound })
		if err == nil && !scope.SkipWorkspace {
			err = a.p.Actors.EachSpaceRecord(ctx, tx, func(actors.SpaceRecord) error { return errFound })
		}
		switch {
		case errors.Is(err, errFound):
			return nil
		case err != nil:
			return err
		}
		return wserr.New(wserr.InvalidArgument, "export", "", "the scope selects nothing to export")
	})
}

// changedMeanwhile judges err, a failure to read an object the export
// planned: the objects are read after the rows' transaction, so a run
// deleted or a checkpoint pruned meanwhile, and a gc after it, can take
// one away from a sound store. What the scope selects now is gathered
// again: if the rows are gone (run.not_found) that is the answer; if they
// no longer reach every object planned, the export is store.conflict (run
// it again); if they still do, the object is missing from what the store
// holds now: store.corrupt.
func (a *Archiver) changedMeanwhile(ctx context.Context, p *plan, scope Scope, err error) error {
	if code := wserr.CodeOf(err); (code != wserr.NotFound && code != wserr.Corrupt) || ctx.Err() != nil {
		return err
	}
	spool, done, serr := tempfile.Create("wsstore-export-*.jsonl")
	if serr != nil {
		return err
	}
	defer done()
	now := newPlan(ctx, spool)
	defer now.sets.Close()
	if gerr := a.p.DB.View(ctx, func(tx *index.Tx) error { return a.gather(ctx, tx, now, scope) }); gerr != nil {
		if code := wserr.CodeOf(gerr); code == wserr.RunNotFound || code == wserr.NotFound {
			return gerr
		}
		return err
	}
	// A root exported without scratch/ is read back from the run root it
	// was made of, which is not planned itself: one the rows no longer
	// reach may be collected while another root still strips to it.
	runRootOf := func(_ []byte, i int64) ([]byte, error) {
		pair, err := p.roots.At(i)
		return pair[:min(len(pair), 32)], err
	}
	for _, c := range []struct {
		planned, now *index.SpillMap
		key          func([]byte, int64) ([]byte, error)
	}{{p.blobs, now.blobs, nil}, {p.trees, now.trees, nil}, {p.made, now.stripped, runRootOf}} {
		_, gone, aerr := firstAbsent(c.planned, c.now, c.key)
		if aerr != nil {
			return err // the scratch failed: the first error is the answer
		}
		if gone {
			return changedError(err)
		}
	}
	if wserr.CodeOf(err) == wserr.NotFound {
		// The rows reach an object the store does not hold: damage.
		return wserr.Wrap(wserr.Corrupt, "export", "", fmt.Errorf("an object the store's rows reach is missing (wsctl fsck names each): %w", err))
	}
	return err
}

// checkCheckpoint fails with store.corrupt if run r's checkpoint row c
// breaks what an import checks: its parent an earlier checkpoint of the
// run, one of held, the seqs before it. (The run's head must be one of
// them too; gather checks it after the rows.) A damaged store then fails
// its export, rather than write an archive no import takes.
func checkCheckpoint(r runs.RunRecord, c checkpoint.Record, held *seqSet) error {
	ok := c.Seq >= 1 && c.ParentSeq < c.Seq
	if ok && c.ParentSeq != 0 {
		var err error
		if ok, err = held.has(c.ParentSeq); err != nil {
			return err
		}
	}
	if !ok {
		return wserr.New(wserr.Corrupt, "export", "", "run %s: checkpoint %d names parent %d, which is not an earlier checkpoint of the run (wsctl fsck)", r.ID, c.Seq, c.ParentSeq)
	}
	return nil
}

// seqSet is a set of checkpoint seqs in a spilling set.
type seqSet struct{ m *index.SpillMap }

func seqKey(seq int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(seq)) }

func (s *seqSet) add(seq int64) error { _, err := s.m.Add(seqKey(seq), 0); return err }

func (s *seqSet) has(seq int64) (bool, error) {
	_, ok, err := s.m.Get(seqKey(seq))
	return ok, err
}

func changedError(err error) error {
	return wserr.Wrap(wserr.Conflict, "export", "", fmt.Errorf("what the export selects changed while it was written (a run deleted or ended, or a checkpoint pruned, and objects only it held collected); export again: %w", err))
}

// chatIDs returns the workspace ids of chats named by id (chat_…, which
// holds no ':') or by their stable key, KIND:STABLE_CHAT_ID, as rm-chat
// and chat.delete name them.
func chatIDs(chats []string) []string {
	if !slices.ContainsFunc(chats, func(c string) bool { return strings.Contains(c, ":") }) {
		return chats
	}
	out := make([]string, len(chats))
	for i, c := range chats {
		out[i] = c
		if kind, id, ok := strings.Cut(c, ":"); ok {
			out[i] = runs.ChatWorkspaceID(runs.ChatKey{Kind: kind, StableChatID: id})
		}
	}
	return out
}

func checkScope(s Scope) error {
	const op = "export"
	for _, c := range s.Chats {
		if kind, id, ok := strings.Cut(c, ":"); ok && (kind == "" || id == "") {
			return wserr.New(wserr.InvalidArgument, op, "", "chat %q: name a chat workspace id (chat_…) or KIND:STABLE_CHAT_ID", c)
		}
	}
	if !s.All && len(s.Runs) == 0 && len(s.Chats) == 0 && len(s.Actors) == 0 {
		return wserr.New(wserr.InvalidArgument, op, "", "nothing selected: name runs, chats or actors, or all")
	}
	if s.All && len(s.Runs)+len(s.Chats)+len(s.Actors) > 0 {
		return wserr.New(wserr.InvalidArgument, op, "", "all selects the whole store: name runs, chats or actors, or all, not both")
	}
	if s.SkipWorkspace && !s.All && len(s.Runs) == 0 && len(s.Chats) == 0 {
		return wserr.New(wserr.InvalidArgument, op, "", "skipping the workspace leaves nothing of the actors selected")
	}
	for id, from := range s.From {
		if from < 0 {
			return wserr.New(wserr.InvalidArgument, op, "", "from %d for run %s: journal seqs count from 1 (0: the whole run)", from, id)
		}
	}
	return nil
}

func report(opt Options, phase string, done, total int64) {
	if opt.Progress != nil {
		opt.Progress(Progress{Phase: phase, Done: done, Total: total})
	}
}

// spoolError codes a failure of the temporary file the rows are spooled
// to (in os.TempDir: TMPDIR on Unix) as wserr.FromFS does.
func spoolError(err error) error {
	return wserr.FromFS("export", os.TempDir(), fmt.Errorf("spool the rows to a temporary file: %w", err))
}

// gather reads the rows scope selects, spools them, and collects every
// tree and blob they reach.
func (a *Archiver) gather(ctx context.Context, tx *index.Tx, p *plan, scope Scope) error {
	bw := bufio.NewWriter(p.spool)
	var row bytes.Buffer
	enc := json.NewEncoder(&row)
	enc.SetEscapeHTML(false)
	put := func(r Record) error {
		row.Reset()
		if err := enc.Encode(r); err != nil {
			return fmt.Errorf("export: spool: %w", err)
		}
		if n := row.Len() - 1; n > maxRowBytes {
			// An archive no import would read back: refused here, before
			// anything is written where it was asked for.
			return wserr.New(wserr.SizeLimitExceeded, "export", "", "a row of %d bytes (%s), past the %d an import reads", n, r.name(), int64(maxRowBytes))
		}
		if _, err := bw.Write(row.Bytes()); err != nil {
			return spoolError(err)
		}
		return nil
	}

	// A run's rows and what they reach; exported in id order.
	exportRun := func(r runs.RunRecord) error {
		var err error
		if r.Root, err = a.runRoot(ctx, tx, p, r.Root); err != nil {
			return err
		}
		if err := a.reach(ctx, tx, p, r.PersistBase); err != nil {
			return err
		}
		if !r.Records.IsZero() {
			if err := a.reach(ctx, tx, p, r.Records); err != nil {
				return err
			}
		}
		if err := r.Check("export"); err != nil {
			return err
		}
		// The checkpoints are read a page at a time, twice for a tail
		// (which lists every seq first); the seqs go to a spilling set.
		from := scope.From[r.ID]
		if from > 0 {
			t := RunTail{RunID: r.ID, From: from, Checkpoints: []int64{}}
			if err := a.p.Checkpoints.EachExportRecord(ctx, tx, r.ID, func(c checkpoint.Record) error {
				t.Checkpoints = append(t.Checkpoints, c.Seq)
				return nil
			}); err != nil {
				return err
			}
			if err := put(Record{Tail: &t}); err != nil {
				return err
			}
		}
		if err := put(Record{Run: &r}); err != nil {
			return err
		}
		p.m.Runs = append(p.m.Runs, r.ID)
		held := &seqSet{p.sets.NewMap()}
		if err := a.p.Checkpoints.EachExportRecord(ctx, tx, r.ID, func(c checkpoint.Record) error {
			if err := checkCheckpoint(r, c, held); err != nil {
				return err
			}
			if err := held.add(c.Seq); err != nil {
				return err
			}
			if c.EventSeq < from {
				return nil
			}
			var err error
			if c.Root, err = a.runRoot(ctx, tx, p, c.Root); err != nil {
				return err
			}
			return put(Record{Checkpoint: &c})
		}); err != nil {
			return err
		}
		if ok, err := held.has(r.HeadCheckpoint); err != nil {
			return err
		} else if r.HeadCheckpoint != 0 && !ok {
			return wserr.New(wserr.Corrupt, "export", "", "run %s: its head names checkpoint %d, which the run does not hold (wsctl fsck)", r.ID, r.HeadCheckpoint)
		}
		if err := a.p.Runs.EachCommitRow(ctx, tx, r.ID, func(c runs.CommitRow) error {
			ok, err := held.has(c.CheckpointSeq)
			if err != nil {
				return err
			}
			if c.CheckpointSeq != 0 && !ok { // 0: none
				return wserr.New(wserr.Corrupt, "export", "", "run %s: commit %s names checkpoint %d, which the run does not hold (wsctl fsck)", r.ID, c.ID, c.CheckpointSeq)
			}
			return put(Record{Commit: &c})
		}); err != nil {
			return err
		}
		err = a.p.Journal.ExportEventsAfter(ctx, tx, r.ID, max(from-1, 0), func(e journal.Event) error {
			p.events++
			return put(Record{Event: &e})
		})
		if err != nil {
			return err
		}
		return nil
	}
	exportChat := func(c runs.ChatRecord) error {
		if err := a.reach(ctx, tx, p, c.PersistRoot); err != nil {
			return err
		}
		if err := put(Record{Chat: &c}); err != nil {
			return err
		}
		p.m.Chats = append(p.m.Chats, c.ID)
		return nil
	}
	if scope.All {
		// Every chat, then every run, each in id order as it is read:
		// the store's runs are never held together.
		if err := a.p.Runs.EachChatRecord(ctx, tx, exportChat); err != nil {
			return err
		}
		if err := a.p.Runs.EachRunRecord(ctx, tx, "", exportRun); err != nil {
			return err
		}
	}

	// The runs named, by chat: a run brings its chat, a chat its runs.
	// Their ids are held, and each row read again as it is exported.
	var rs []string
	chats := map[string]bool{}
	seenRun := map[string]bool{}
	addRun := func(r runs.RunRecord) error {
		if !seenRun[r.ID] {
			seenRun[r.ID] = true
			chats[r.ChatID] = true
			rs = append(rs, r.ID)
		}
		return nil
	}
	for _, id := range scope.Chats {
		if _, err := a.p.Runs.ExportChat(ctx, tx, id); err != nil {
			return err
		}
		chats[id] = true
		if err := a.p.Runs.EachRunRecord(ctx, tx, id, addRun); err != nil {
			return err
		}
	}
	for _, id := range scope.Runs {
		r, err := a.p.Runs.ExportRun(ctx, tx, id)
		if err != nil {
			return err
		}
		addRun(r)
	}
	slices.Sort(rs)
	for _, id := range slices.Sorted(maps.Keys(chats)) {
		c, err := a.p.Runs.ExportChat(ctx, tx, id)
		if err != nil {
			return err
		}
		if err := exportChat(c); err != nil {
			return err
		}
	}
	for _, id := range rs {
		r, err := a.p.Runs.ExportRun(ctx, tx, id)
		if err != nil {
			return err
		}
		if err := exportRun(r); err != nil {
			return err
		}
	}

	// Actor spaces, unless the workspace is skipped: with All every one
	// as it is read, a page at a time, else those named (All names none).
	if !scope.SkipWorkspace {
		exportSpace := func(s actors.SpaceRecord) error {
			if err := a.reach(ctx, tx, p, s.Root); err != nil {
				return err
			}
			if err := put(Record{Space: &s}); err != nil {
				return err
			}
			p.m.Actors = append(p.m.Actors, s.Actor)
			return a.p.Actors.EachExportChange(ctx, tx, s.Actor, 0, func(c actors.ChangeRecord) error {
				if !c.Root.IsZero() {
					if err := a.reach(ctx, tx, p, c.Root); err != nil {
						return err
					}
				}
				return put(Record{Change: &c})
			})
		}
		if scope.All {
			if err := a.p.Actors.EachSpaceRecord(ctx, tx, exportSpace); err != nil {
				return err
			}
		}
		var named []actors.SpaceRecord // once each
		for _, name := range scope.Actors {
			s, ok, err := a.p.Actors.ExportSpace(ctx, tx, name)
			if err != nil {
				return err
			}
			if !ok {
				return wserr.New(wserr.NotFound, "export", "", "actor %s has no workspace", name)
			}
			if !slices.ContainsFunc(named, func(x actors.SpaceRecord) bool { return x.Actor == s.Actor }) {
				named = append(named, s)
			}
		}
		for _, s := range named {
			if err := exportSpace(s); err != nil {
				return err
			}
		}
	}
	if err := bw.Flush(); err != nil {
		return spoolError(err)
	}
	off, err := p.spool.Seek(0, io.SeekCurrent)
	if err != nil {
		return spoolError(err)
	}
	p.spooled = off
	return nil
}

// runRoot returns the root exported for a run's root: the same tree
// without its top-level scratch/ entry, which is never exported; the tree
// itself when it has none. Either way what it reaches joins the plan.
func (a *Archiver) runRoot(ctx context.Context, tx *index.Tx, p *plan, root cas.Hash) (cas.Hash, error) {
	if i, ok, err := p.stripped.Get(root[:]); err != nil || ok {
		if err != nil {
			return cas.Hash{}, err
		}
		pair, err := p.roots.At(i)
		return cas.Hash(pair[32:]), err
	}
	es, err := a.p.Trees.Entries(ctx, tx, root)
	if err != nil {
		return cas.Hash{}, err
	}
	es, cut := withoutScratch(es)
	h := root
	if cut {
		b, err := vfs.EncodeTree(es)
		if err != nil {
			return cas.Hash{}, err
		}
		h = vfs.TreeHash(b)
	}
	i := p.roots.Len()
	if err := p.roots.Push(slices.Concat(root[:], h[:])); err != nil {
		return cas.Hash{}, err
	}
	if err := p.stripped.Set(root[:], i); err != nil {
		return cas.Hash{}, err
	}
	if !cut {
		return root, a.reach(ctx, tx, p, root)
	}
	if _, ok, err := p.trees.Get(h[:]); err != nil {
		return cas.Hash{}, err
	} else if ok {
		return h, nil
	}
	// Not stored: write reads root again and leaves scratch/ out.
	if err := p.made.Set(h[:], i); err != nil {
		return cas.Hash{}, err
	}
	for _, e := range es {
		if err := a.reachEntry(ctx, tx, p, e); err != nil {
			return cas.Hash{}, err
		}
	}
	return h, p.planTree(h)
}

// withoutScratch returns es without its scratch/ entry, and whether it
// had one.
func withoutScratch(es []vfs.Entry) ([]vfs.Entry, bool) {
	i := slices.IndexFunc(es, func(e vfs.Entry) bool { return e.Name == scratchRoot })
	if i < 0 {
		return es, false
	}
	return slices.Delete(es, i, i+1), true
}

// planTree adds tree h to the plan once everything below it is there.
func (p *plan) planTree(h cas.Hash) error {
	if added, err := p.trees.Add(h[:], 0); err != nil || !added {
		return err
	}
	return p.order.Push(h[:])
}

// reach adds tree h and everything below it to the plan, children first.
func (a *Archiver) reach(ctx context.Context, tx *index.Tx, p *plan, h cas.Hash) error {
	if _, ok, err := p.trees.Get(h[:]); err != nil || ok {
		return err
	}
	es, err := a.p.Trees.Entries(ctx, tx, h)
	if err != nil {
		return err
	}
	for _, e := range es {
		if err := a.reachEntry(ctx, tx, p, e); err != nil {
			return err
		}
	}
	return p.planTree(h)
}

func (a *Archiver) reachEntry(ctx context.Context, tx *index.Tx, p *plan, e vfs.Entry) error {
	if e.Kind == vfs.KindDir {
		return a.reach(ctx, tx, p, e.Hash)
	}
	added, err := p.blobs.Add(e.Hash[:], e.Size)
	if added {
		p.m.Bytes += e.Size
	}
	return err
}

// write writes the planned archive to w.
func (a *Archiver) write(ctx context.Context, w io.Writer, p *plan, opt Options) (Summary, error) {
	d := newDigest()
	tw := tar.NewWriter(w)
	entry := func(name string, size int64) (io.Writer, error) {
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: name, Size: size, Mode: 0o644, ModTime: p.m.CreatedAt, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("export: write %s: %w", name, err)
		}
		d.entry(name, size)
		return io.MultiWriter(tw, d), nil
	}
	whole := func(name string, b []byte) error {
		ew, err := entry(name, int64(len(b)))
		if err != nil {
			return err
		}
		if _, err := ew.Write(b); err != nil {
			return fmt.Errorf("export: write %s: %w", name, err)
		}
		return nil
	}

	// The manifest is written twice, first only to count its bytes for
	// the entry's header: its lists are read from the plan's sets, never
	// held whole.
	size := countingWriter{w: io.Discard}
	if err := p.writeManifest(&size); err != nil {
		return Summary{}, err
	}
	mw, err := entry(manifestName, size.n)
	if err != nil {
		return Summary{}, err
	}
	if err := p.writeManifest(mw); err != nil {
		return Summary{}, err
	}
	var done int64
	if !p.m.BlobsElsewhere {
		err := p.blobs.Each(func(k []byte, size int64) error {
			if err := ctx.Err(); err != nil {
				return index.Translate(err)
			}
			if err := a.writeBlob(ctx, entry, BlobRef{Hash: cas.Hash(k), Size: size}); err != nil {
				return err
			}
			done += size
			report(opt, "blobs", done, p.m.Bytes)
			return nil
		})
		if err != nil {
			return Summary{}, err
		}
	}
	nt := p.order.Len()
	for i := range nt {
		k, err := p.order.At(i)
		if err != nil {
			return Summary{}, err
		}
		h := cas.Hash(k)
		at := h // the tree whose entries h has
		i, made, err := p.made.Get(h[:])
		if err != nil {
			return Summary{}, err
		}
		if made {
			pair, err := p.roots.At(i)
			if err != nil {
				return Summary{}, err
			}
			at = cas.Hash(pair[:32])
		}
		es, err := a.p.Trees.Entries(ctx, nil, at)
		if err != nil {
			return Summary{}, err
		}
		if made {
			es, _ = withoutScratch(es)
		}
		b, err := vfs.EncodeTree(es)
		if err != nil {
			return Summary{}, err
		}
		if vfs.TreeHash(b) != h {
			return Summary{}, wserr.New(wserr.Corrupt, "export", "", "tree %s does not encode to its address", h.Short())
		}
		if err := whole(treePrefix+h.String(), b); err != nil {
			return Summary{}, err
		}
		report(opt, "trees", i+1, nt)
	}
	if _, err := p.spool.Seek(0, io.SeekStart); err != nil {
		return Summary{}, spoolError(err)
	}
	ew, err := entry(recordsName, p.spooled)
	if err != nil {
		return Summary{}, err
	}
	if n, err := io.Copy(ew, io.LimitReader(p.spool, p.spooled)); err != nil || n != p.spooled {
		return Summary{}, fmt.Errorf("export: write records: %d of %d bytes: %v", n, p.spooled, err)
	}
	eb, err := json.Marshal(End{Entries: d.entries, Digest: d.sum()})
	if err != nil {
		return Summary{}, err
	}
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: endName, Size: int64(len(eb)), Mode: 0o644, ModTime: p.m.CreatedAt, Format: tar.FormatPAX}
	if err := tw.WriteHeader(hdr); err != nil {
		return Summary{}, fmt.Errorf("export: write end: %w", err)
	}
	if _, err := tw.Write(eb); err != nil {
		return Summary{}, fmt.Errorf("export: write end: %w", err)
	}
	if err := tw.Close(); err != nil {
		return Summary{}, fmt.Errorf("export: %w", err)
	}
	nb, err := p.blobs.Len()
	if err != nil {
		return Summary{}, err
	}
	return Summary{Objects: nb + nt, Blobs: nb, Trees: nt, Bytes: p.m.Bytes, Chats: len(p.m.Chats),
		Runs: len(p.m.Runs), Actors: len(p.m.Actors), Events: p.events}, nil
}

// writeManifest writes the manifest's JSON to w: its fields, then the
// blobs and trees of the plan's sets, one at a time.
func (p *plan) writeManifest(w io.Writer) error {
	head, err := json.Marshal(p.m)
	if err != nil {
		return fmt.Errorf("export: manifest: %w", err)
	}
	bw := bufio.NewWriter(w)
	bw.Write(head[:len(head)-1]) // without its closing brace
	bw.WriteString(`,"blobs":[`)
	first := true
	err = p.blobs.Each(func(k []byte, size int64) error {
		if !first {
			bw.WriteByte(',')
		}
		first = false
		b, err := json.Marshal(BlobRef{Hash: cas.Hash(k), Size: size})
		bw.Write(b)
		return err
	})
	if err != nil {
		return fmt.Errorf("export: manifest: %w", err)
	}
	bw.WriteString(`],"trees":[`)
	for i := range p.order.Len() {
		k, err := p.order.At(i)
		if err != nil {
			return fmt.Errorf("export: manifest: %w", err)
		}
		if i > 0 {
			bw.WriteByte(',')
		}
		bw.WriteByte('"')
		bw.WriteString(cas.Hash(k).String())
		bw.WriteByte('"')
	}
	bw.WriteByte(']')
	if p.m.BlobsElsewhere {
		bw.WriteString(`,"blobsElsewhere":true`)
	}
	bw.WriteByte('}')
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("export: write %s: %w", manifestName, err)
	}
	return nil
}

func (a *Archiver) writeBlob(ctx context.Context, entry func(string, int64) (io.Writer, error), b BlobRef) error {
	rc, err := a.p.Blobs.Get(ctx, b.Hash)
	if err != nil {
		return fmt.Errorf("export: blob %s: %w", b.Hash.Short(), err)
	}
	defer rc.Close()
	ew, err := entry(blobPrefix+b.Hash.String(), b.Size)
	if err != nil {
		return err
	}
	n, err := io.Copy(ew, io.LimitReader(rc, b.Size+1))
	if err != nil {
		return fmt.Errorf("export: blob %s: %w", b.Hash.Short(), err)
	}
	if n != b.Size {
		return wserr.New(wserr.Corrupt, "export", "", "blob %s holds %d bytes, its tree says %d", b.Hash.Short(), n, b.Size)
	}
	return nil
}
