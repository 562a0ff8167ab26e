package maint

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/checkpoint"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// The object graph, shared by GC, Fsck, Stats and DU.

// objKind names the kinds of stored object.
type objKind uint8

const (
	objTree objKind = iota + 1
	objBlob
	objChunk
)

func (k objKind) String() string {
	switch k {
	case objTree:
		return "tree"
	case objBlob:
		return "blob"
	case objChunk:
		return "chunk"
	}
	return fmt.Sprintf("object(%d)", int(k))
}

// object is one stored object: a tree, blob or chunk row.
type object struct {
	kind objKind
	hash cas.Hash
}

// rowMeta is what the graph needs of any row: its stored size and its
// created time.
type rowMeta struct {
	stored, created int64
}

// eachRow calls fn with every stored object and its row, read in tx a page
// at a time through the owners' inventories (blobs, chunks, then trees),
// so nothing is held across objects. For a blob, rec is its record (chunk
// list included); nil for others. fn may read through tx.
func (m *Maintainer) eachRow(ctx context.Context, tx *index.Tx, fn func(o object, r rowMeta, rec *cas.BlobRecord) error) error {
	err := m.p.Blobs.EachBlobRecord(ctx, tx, func(r cas.BlobRecord) error {
		return fn(object{objBlob, r.Hash}, rowMeta{r.Stored, r.Created}, &r)
	})
	if err != nil {
		return err
	}
	err = m.p.Blobs.EachChunkRecord(ctx, tx, func(r cas.ChunkRecord) error {
		return fn(object{objChunk, r.Hash}, rowMeta{r.Stored, r.Created}, nil)
	})
	if err != nil {
		return err
	}
	return m.p.Trees.EachTreeRecord(ctx, tx, func(r vfs.TreeRecord) error {
		return fn(object{objTree, r.Hash}, rowMeta{r.Stored, r.Created}, nil)
	})
}

// rootRef is one root: a tree some row holds on to.
type rootRef struct {
	Kind  string // "run" (live root), "base" (persist base), "records", "checkpoint", "chat" (persist root), "actor" (an actor space's version), "dict" (a listed dictionary, a blob)
	Chat  string // chat id ("" for a checkpoint whose run is gone, and for an actor)
	Actor string // actor name, for an actor space's root
	Run   string // run id ("" for a chat's persist root)
	Seq   int64  // checkpoint seq
	Hash  cas.Hash
	// owner numbers what DU counts the root's objects to: a run (its
	// live root, persist base, records and checkpoints), a chat's persist
	// layer, the checkpoints of a run that is gone, or the actor spaces
	// and dictionaries together.
	owner int64
}

// Owner numbers (rootRef.owner): the actor spaces' and dictionaries',
// then a run's that is gone, one each from spacesOwner+1, then from
// workspaceOwners the chats' and runs', one each in the order
// eachWorkspace hands them on.
const (
	spacesOwner     = 1
	workspaceOwners = 1 << 40
)

func (r rootRef) String() string {
	switch r.Kind {
	case "run":
		return "run " + r.Run + " root"
	case "base":
		return "run " + r.Run + " persist base"
	case "records":
		return "run " + r.Run + " records"
	case "checkpoint":
		return "checkpoint " + r.Run + "/" + checkpoint.ID(r.Seq)
	case "chat":
		return "chat " + r.Chat + " persist root"
	case "actor":
		return "actor " + r.Actor + " version " + strconv.FormatInt(r.Seq, 10)
	case "dict":
		return "dictionary " + strconv.FormatInt(r.Seq, 10)
	}
	return r.Kind + " " + r.Run
}

func (r *rootRef) step() step {
	if r.Kind == "dict" {
		return step{o: object{objBlob, r.Hash}, ref: ref{root: r}}
	}
	return step{o: object{objTree, r.Hash}, ref: ref{root: r}}
}

// eachRoot calls fn with every root in tx, in the order gc, fsck and du
// walk them (by chat, run, kind and seq): the actor spaces' roots (by
// actor and seq) and the dictionaries (by id); the checkpoints of runs
// that are gone (by run and seq); then each chat by id, its persist root
// first, then each of its runs by id: the run's persist base, its
// checkpoints by seq, its records and its live root. The chat of a
// checkpoint is its run's. Each root is read from its owner as fn takes
// it, so nothing is held across roots: memory does not grow with them.
// fn may read through tx; its error stops the pass and is returned.
func (m *Maintainer) eachRoot(ctx context.Context, tx *index.Tx, fn func(r *rootRef) error) error {
	if m.p.Actors != nil {
		err := m.p.Actors.EachActorRoot(ctx, tx, func(actor string, seq int64, root cas.Hash) error {
			return fn(&rootRef{Kind: "actor", Actor: actor, Seq: seq, Hash: root, owner: spacesOwner})
		})
		if err != nil {
			return err
		}
	}
	if d, ok := m.p.Blobs.(DictRoots); ok {
		err := d.EachDict(ctx, tx, func(di cas.DictInfo) error {
			return fn(&rootRef{Kind: "dict", Seq: di.ID, Hash: di.Hash, owner: spacesOwner})
		})
		if err != nil {
			return err
		}
	}
	// The checkpoints are read a run at a time, in their run's place;
	// the count read from the whole table first says none was missed (a
	// damaged index or page can hide rows from a read by run): a collection
	// that missed a root would delete what it holds.
	var found int64
	checkpoints := func(chatID, runID string, owner int64) error {
		return m.p.Checkpoints.EachRootOf(ctx, tx, runID, func(seq int64, root cas.Hash) error {
			found++
			return fn(&rootRef{Kind: "checkpoint", Chat: chatID, Run: runID, Seq: seq, Hash: root, owner: owner})
		})
	}
	owner := int64(spacesOwner)
	listed, err := m.eachGoneRun(ctx, tx, func(runID string, _ int64) error {
		owner++
		return checkpoints("", runID, owner)
	})
	if err != nil {
		return err
	}
	err = m.eachWorkspace(ctx, tx, func(w workspace) error {
		if w.run == "" {
			return fn(&rootRef{Kind: "chat", Chat: w.chat, Hash: w.root, owner: w.owner})
		}
		if err := fn(&rootRef{Kind: "base", Chat: w.chat, Run: w.run, Hash: w.base, owner: w.owner}); err != nil {
			return err
		}
		if err := checkpoints(w.chat, w.run, w.owner); err != nil {
			return err
		}
		if !w.records.IsZero() {
			if err := fn(&rootRef{Kind: "records", Chat: w.chat, Run: w.run, Hash: w.records, owner: w.owner}); err != nil {
				return err
			}
		}
		return fn(&rootRef{Kind: "run", Chat: w.chat, Run: w.run, Hash: w.root, owner: w.owner})
	})
	if err != nil {
		return err
	}
	if found != listed {
		return wserr.New(wserr.Corrupt, "read roots", "", "the checkpoints table holds %d rows, its runs' reads found %d: run fsck", listed, found)
	}
	return nil
}

// eachGoneRun calls fn, by run id, with each run that has checkpoints but
// does not exist, and how many; it returns how many checkpoints there
// are, of every run.
func (m *Maintainer) eachGoneRun(ctx context.Context, tx *index.Tx, fn func(runID string, n int64) error) (int64, error) {
	var total int64
	err := m.p.Checkpoints.EachRunCount(ctx, tx, func(runID string, n int64) error {
		total += n
		ok, err := m.p.Runs.HasRun(ctx, tx, runID)
		if err != nil || ok {
			return err
		}
		return fn(runID, n)
	})
	return total, err
}

// workspace is a chat workspace's own row (run "", root its persist
// root) or a run's, with its owner number (rootRef.owner).
type workspace struct {
	chat, run           string
	root, base, records cas.Hash
	owner               int64
}

// eachWorkspace calls fn with each chat and run, by chat id then run id,
// a chat before its runs.
func (m *Maintainer) eachWorkspace(ctx context.Context, tx *index.Tx, fn func(w workspace) error) error {
	owner := int64(workspaceOwners)
	return m.p.Runs.EachWorkspaceRoot(ctx, tx, func(chatID, runID string, root, base, records cas.Hash) error {
		w := workspace{chat: chatID, run: runID, root: root, base: base, records: records, owner: owner}
		owner++
		return fn(w)
	})
}

// rootCount counts the roots, and the rows that hold them.
type rootCount struct {
	roots       int
	chats, runs int
	// checkpoints counts runs that are gone too.
	checkpoints int64
}

// countRoots counts the roots in tx, reading them as eachRoot does, but
// only counting the checkpoints: for progress, and for the reports'
// counts.
func (m *Maintainer) countRoots(ctx context.Context, tx *index.Tx) (rootCount, error) {
	var c rootCount
	if m.p.Actors != nil {
		err := m.p.Actors.EachActorRoot(ctx, tx, func(string, int64, cas.Hash) error {
			c.roots++
			return nil
		})
		if err != nil {
			return c, err
		}
	}
	if d, ok := m.p.Blobs.(DictRoots); ok {
		if err := d.EachDict(ctx, tx, func(cas.DictInfo) error { c.roots++; return nil }); err != nil {
			return c, err
		}
	}
	err := m.p.Checkpoints.EachRunCount(ctx, tx, func(_ string, n int64) error {
		c.checkpoints += n
		c.roots += int(n)
		return nil
	})
	if err != nil {
		return c, err
	}
	err = m.eachWorkspace(ctx, tx, func(w workspace) error {
		switch {
		case w.run == "":
			c.chats++
			c.roots++
		default:
			c.runs++
			c.roots += 2
			if !w.records.IsZero() {
				c.roots++
			}
		}
		return nil
	})
	return c, err
}

// ref says what refers to an object, for messages: a root, or an object
// and (for a tree) the entry's name.
type ref struct {
	root *rootRef
	from object
	name string
}

func (r ref) String() string {
	switch {
	case r.root != nil:
		return r.root.String()
	case r.from.kind == objTree:
		return fmt.Sprintf("tree %s entry %q", r.from.hash, r.name)
	case r.from.kind != 0:
		return fmt.Sprintf("%s %s (%s)", r.from.kind, r.from.hash, r.name)
	}
	return "nothing"
}

// step is an object to visit and what led to it.
type step struct {
	o   object
	ref ref
	// asBase marks a tree reached only as the base of a patch: its row
	// must stay, for its bytes, but what its entries name is not needed
	// to read the patched tree.
	asBase bool
	// done marks the step that closes tree o once everything its
	// entries (held here) lead to has been walked (graph.treeDone).
	done    bool
	entries []vfs.Entry
}

// graph reads what objects reference, inside one transaction, asking the
// owners for each object it reaches, so it sees the transaction's state
// and holds no copy of the store.
type graph struct {
	ctx  context.Context
	rows *vfs.RowReader
	recs *cas.Records
	// entriesDue holds the trees visited only as patch bases, whose
	// entries a later visit as a tree (in any walk on this graph) must
	// still follow, though the visit function has seen them.
	entriesDue map[cas.Hash]bool
	// leafBlobs makes a walk visit blobs without reading them: neither
	// whether they are stored nor what they reference. A pass over the
	// blob rows then does that for the blobs visited (see blobPass),
	// reading them in order rather than one query each.
	leafBlobs bool
	// fileEntry, if set, is called with each file entry of each tree a
	// walk follows, and the tree, in place of visiting the entry's blob:
	// fsck checks the size the entry records. Set it only with leafBlobs.
	fileEntry func(tree object, e vfs.Entry) error
	// treeDone, if set, is called with each tree a walk follows, and its
	// entries, once the walk has followed everything they name: each tree
	// an entry names was closed before, on this walk or an earlier one
	// with treeDone set (trees are acyclic, so one visited before is
	// closed already), unless it was not followed (missing, not wanted,
	// or followed by a walk without treeDone).
	treeDone func(tree object, es []vfs.Entry) error
}

func (m *Maintainer) newGraph(ctx context.Context, tx *index.Tx) (*graph, error) {
	g := &graph{ctx: ctx, entriesDue: make(map[cas.Hash]bool)}
	var err error
	if g.rows, err = m.p.Trees.OpenRowReader(ctx, tx); err != nil {
		return nil, err
	}
	if g.recs, err = m.p.Blobs.OpenRecords(ctx, tx); err != nil {
		g.close()
		return nil, err
	}
	return g, nil
}

func (g *graph) close() {
	if g.rows != nil {
		g.rows.Close()
	}
	if g.recs != nil {
		g.recs.Close()
	}
}

// entries returns the entries of tree h, the tree its row is a patch
// against (the zero Hash for a whole tree) and whether it is stored.
// EmptyTree is always there, with or without a row. A tree that does not
// decode, or whose patch chain does not, fails with store.corrupt.
func (g *graph) entries(h cas.Hash) ([]vfs.Entry, cas.Hash, bool, error) {
	return g.rows.Refs(h)
}

// created returns o's created time and whether o is stored.
func (g *graph) created(o object) (int64, bool, error) {
	switch o.kind {
	case objTree:
		return g.rows.Created(o.hash)
	case objBlob:
		b, ok, err := g.recs.Blob(o.hash)
		return b.Created, ok, err
	case objChunk:
		c, ok, err := g.recs.Chunk(o.hash)
		return c.Created, ok, err
	}
	return 0, false, nil
}

// blobGen returns blob h's number in its version history (0 for none, or
// when h is not stored).
func (g *graph) blobGen(h cas.Hash) (int64, error) {
	return g.recs.Gen(h)
}

// blobRefs returns what blob h references (its chunks, its delta base or
// dictionary) with its codec, and whether it is stored.
func (g *graph) blobRefs(h cas.Hash) (codec cas.Codec, base cas.Hash, chunks []cas.Hash, ok bool, err error) {
	b, ok, err := g.recs.Blob(h)
	return b.Codec, b.Base, b.Chunks, ok, err
}

func (g *graph) hasChunk(h cas.Hash) (bool, error) {
	_, ok, err := g.recs.Chunk(h)
	return ok, err
}

// walk visits, depth first, every object reachable from starts. visit is
// called for each object reached and returns whether to follow its
// references (false: seen before, or not wanted), or an error that stops
// the walk. A tree a patch rests on
// is reached as a patch base: its row is needed and so is its own base,
// but not what its entries name, which are followed only if some walk on
// this graph reaches the tree as a tree. bad is called, with what
// referred to it, for a followed object that is not stored (err nil) or is
// a tree that does not decode (err says why); it returns nil to go on
// without following the object, or an error to stop the walk.
func (g *graph) walk(starts []step, visit func(o object) (bool, error), bad func(o object, r ref, err error) error) error {
	stack := slices.Clone(starts)
	slices.Reverse(stack)
	for n := 0; len(stack) > 0; n++ {
		if n%1024 == 0 {
			if err := g.ctx.Err(); err != nil {
				return err
			}
		}
		st := stack[len(stack)-1]
		// Cleared, so the array keeps no entries a done step held.
		stack[len(stack)-1] = step{}
		stack = stack[:len(stack)-1]
		if st.done {
			if err := g.treeDone(st.o, st.entries); err != nil {
				return err
			}
			continue
		}
		first, err := visit(st.o)
		if err != nil {
			return err
		}
		// A tree seen before only as a patch base has its entries to
		// follow once it is reached as a tree.
		due := !first && st.o.kind == objTree && !st.asBase && g.entriesDue[st.o.hash]
		if !first && !due {
			continue
		}
		if st.o.kind == objBlob && g.leafBlobs {
			continue
		}
		var found bool
		switch st.o.kind {
		case objTree:
			es, base, ok, err := g.entries(st.o.hash)
			if wserr.Is(err, wserr.Corrupt) {
				if err := bad(st.o, st.ref, err); err != nil {
					return err
				}
				continue
			}
			if err != nil {
				return err
			}
			found = ok
			if first && !base.IsZero() {
				stack = append(stack, step{o: object{objTree, base}, ref: ref{from: st.o, name: "patch base"}, asBase: true})
			}
			if st.asBase {
				g.entriesDue[st.o.hash] = true
				break
			}
			delete(g.entriesDue, st.o.hash)
			if g.treeDone != nil && ok {
				stack = append(stack, step{o: st.o, done: true, entries: es})
			}
			if g.fileEntry != nil {
				for _, e := range es {
					if e.Kind == vfs.KindFile {
						if err := g.fileEntry(st.o, e); err != nil {
							return err
						}
					}
				}
			}
			for i := len(es) - 1; i >= 0; i-- {
				k := objBlob
				if es[i].Kind == vfs.KindDir {
					k = objTree
				} else if g.fileEntry != nil {
					continue
				}
				stack = append(stack, step{o: object{k, es[i].Hash}, ref: ref{from: st.o, name: es[i].Name}})
			}
		case objBlob:
			codec, base, chunks, ok, err := g.blobRefs(st.o.hash)
			if err != nil {
				return err
			}
			found = ok
			if !base.IsZero() {
				name := "delta base"
				if codec == cas.CodecZstd {
					name = "dictionary"
				}
				stack = append(stack, step{o: object{objBlob, base}, ref: ref{from: st.o, name: name}})
			}
			for i := len(chunks) - 1; i >= 0; i-- {
				stack = append(stack, step{o: object{objChunk, chunks[i]}, ref: ref{from: st.o, name: fmt.Sprintf("chunk %d", i)}})
			}
		case objChunk:
			ok, err := g.hasChunk(st.o.hash)
			if err != nil {
				return err
			}
			found = ok
		}
		if !found {
			if err := bad(st.o, st.ref, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// badIsCorrupt stops a walk from the roots at a missing or undecodable
// object: what lies below it is unknown, so nothing may be deleted.
func badIsCorrupt(op string) func(o object, r ref, err error) error {
	return func(o object, r ref, err error) error {
		if err != nil {
			return wserr.New(wserr.Corrupt, op, "", "%s %s (referenced by %s) does not decode: %s; run fsck", o.kind, o.hash, r, wserr.MessageOf(err))
		}
		return wserr.New(wserr.Corrupt, op, "", "%s %s is missing (referenced by %s); run fsck", o.kind, o.hash, r)
	}
}

// skipBad ignores a missing or undecodable object: below garbage, it is
// no problem.
func skipBad(object, ref, error) error { return nil }

// followBlob does for blob rec, visited by a walk that left blobs as
// leaves, what the walk would have done next: it visits rec's delta base
// or dictionary and its chunks. A pass over the blob rows in hash order
// meets a base of a later hash in its turn; one it has passed already is
// walked from here, reading its row.
func followBlob(g *graph, rec *cas.BlobRecord, visit func(o object) (bool, error), bad func(o object, r ref, err error) error) error {
	from := object{objBlob, rec.Hash}
	for _, c := range rec.Chunks {
		if _, err := visit(object{objChunk, c}); err != nil {
			return err
		}
	}
	if rec.Base.IsZero() {
		return nil
	}
	base := object{objBlob, rec.Base}
	if bytes.Compare(rec.Base[:], rec.Hash[:]) > 0 {
		_, err := visit(base)
		return err
	}
	name := "delta base"
	if rec.Codec == cas.CodecZstd {
		name = "dictionary"
	}
	return g.walk([]step{{o: base, ref: ref{from: from, name: name}}}, visit, bad)
}

// missingReachable walks from every root in tx again, reading every
// object, and returns the store.corrupt error for the first reachable
// object that is missing: called when a walk that left blobs as leaves
// marked more blobs or chunks than the rows hold.
func (m *Maintainer) missingReachable(ctx context.Context, tx *index.Tx, g *graph, op string) error {
	w := newWork(g.ctx)
	defer w.close()
	seen := w.newMap()
	err := m.eachRoot(ctx, tx, func(r *rootRef) error {
		return g.walk([]step{r.step()}, seen.addNew, badIsCorrupt(op))
	})
	if err != nil {
		return err
	}
	return wserr.New(wserr.Corrupt, op, "", "a reachable blob or chunk is missing; run fsck")
}
