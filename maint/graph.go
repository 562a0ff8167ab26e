package maint

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

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
	index int // position in the list, for owners in DU
}

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

// rootSet is every root, ordered by chat, run, kind and seq, with what
// the owners said on the way about runs and checkpoints.
type rootSet struct {
	roots []rootRef
	// runChat maps each run to its chat.
	runChat map[string]string
	chats   int
	// checkpoints counts checkpoints by run, runs that are gone too.
	checkpoints map[string]int64
}

func (rs *rootSet) checkpointCount() int64 {
	var n int64
	for _, c := range rs.checkpoints {
		n += c
	}
	return n
}

// loadRoots lists every root in tx. The chat of a checkpoint is its run's.
// The roots are held in memory, about 120 bytes each: they grow with the
// checkpoints, not with the objects they reach.
func (m *Maintainer) loadRoots(ctx context.Context, tx *index.Tx) (*rootSet, error) {
	rs := &rootSet{runChat: map[string]string{}, checkpoints: map[string]int64{}}
	// A run's id comes with each of its checkpoints: one copy serves all.
	ids := map[string]string{}
	intern := func(s string) string {
		if v, ok := ids[s]; ok {
			return v
		}
		ids[s] = s
		return s
	}
	err := m.p.Runs.EachRunRoot(ctx, tx, func(runID, chatID string, root, base cas.Hash) error {
		runID, chatID = intern(runID), intern(chatID)
		rs.runChat[runID] = chatID
		rs.roots = append(rs.roots,
			rootRef{Kind: "run", Chat: chatID, Run: runID, Hash: root},
			rootRef{Kind: "base", Chat: chatID, Run: runID, Hash: base})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read roots: %w", err)
	}
	err = m.p.Runs.EachRecordsRoot(ctx, tx, func(runID string, root cas.Hash) error {
		rs.roots = append(rs.roots, rootRef{Kind: "records", Chat: rs.runChat[runID], Run: runID, Hash: root})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read roots: %w", err)
	}
	err = m.p.Checkpoints.EachRoot(ctx, tx, func(runID string, seq int64, root cas.Hash) error {
		runID = intern(runID)
		rs.checkpoints[runID]++
		rs.roots = append(rs.roots, rootRef{Kind: "checkpoint", Chat: rs.runChat[runID], Run: runID, Seq: seq, Hash: root})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read roots: %w", err)
	}
	err = m.p.Runs.EachChatRoot(ctx, tx, func(chatID string, root cas.Hash) error {
		rs.chats++
		rs.roots = append(rs.roots, rootRef{Kind: "chat", Chat: chatID, Hash: root})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read roots: %w", err)
	}
	if m.p.Actors != nil {
		err = m.p.Actors.EachActorRoot(ctx, tx, func(actor string, seq int64, root cas.Hash) error {
			rs.roots = append(rs.roots, rootRef{Kind: "actor", Actor: actor, Seq: seq, Hash: root})
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("read roots: %w", err)
		}
	}
	if d, ok := m.p.Blobs.(DictRoots); ok {
		err = d.EachDict(ctx, tx, func(di cas.DictInfo) error {
			rs.roots = append(rs.roots, rootRef{Kind: "dict", Seq: di.ID, Hash: di.Hash})
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("read roots: %w", err)
		}
	}
	slices.SortStableFunc(rs.roots, func(a, b rootRef) int {
		if c := strings.Compare(a.Chat, b.Chat); c != 0 {
			return c
		}
		if c := strings.Compare(a.Run, b.Run); c != 0 {
			return c
		}
		if c := strings.Compare(a.Kind, b.Kind); c != 0 {
			return c
		}
		if c := strings.Compare(a.Actor, b.Actor); c != 0 {
			return c
		}
		return cmp.Compare(a.Seq, b.Seq)
	})
	for i := range rs.roots {
		rs.roots[i].index = i
	}
	return rs, nil
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

// openGraph reads, in tx, what gc, fsck and du all start from: the roots,
// and a graph to walk from them. The caller closes the graph.
func (m *Maintainer) openGraph(ctx context.Context, tx *index.Tx) (*rootSet, *graph, error) {
	roots, err := m.loadRoots(ctx, tx)
	if err != nil {
		return nil, nil, err
	}
	g, err := m.newGraph(ctx, tx)
	if err != nil {
		return nil, nil, err
	}
	return roots, g, nil
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

// missingReachable walks from every root again, reading every object, and
// returns the store.corrupt error for the first reachable object that is
// missing: called when a walk that left blobs as leaves marked more blobs
// or chunks than the rows hold.
func missingReachable(g *graph, rs *rootSet, op string) error {
	w := newWork(g.ctx)
	defer w.close()
	seen := w.newMap()
	for i := range rs.roots {
		if err := g.walk([]step{rs.roots[i].step()}, seen.addNew, badIsCorrupt(op)); err != nil {
			return err
		}
	}
	return wserr.New(wserr.Corrupt, op, "", "a reachable blob or chunk is missing; run fsck")
}
