package wsstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/checkpoint"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// DefaultGCGrace is how old an unreachable row must be before GC deletes
// it when GCOptions.Grace is zero. It is far longer than any write
// transaction, so a writer that has stored a blob but not yet committed the
// tree that references it never loses the blob.
const DefaultGCGrace = 15 * time.Minute

// GCOptions configure GC. The zero value is a real collection with the
// default grace on the wall clock.
type GCOptions struct {
	// DryRun computes the report and deletes nothing.
	DryRun bool
	// Grace keeps unreachable rows younger than this (by their created
	// time, which writers refresh whenever they re-use a row). Zero means
	// DefaultGCGrace; negative means no grace, for tests and for a store
	// nothing else writes to.
	Grace time.Duration
	// Now is the clock the grace is measured on; default the store's
	// clock (Options.Now, else time.Now).
	Now func() time.Time
	// Progress, if not nil, is called as work proceeds with the phase
	// ("mark", then "sweep" unless DryRun), the work done and the total.
	// The first call of each phase (done 0) is made before that phase's
	// transaction begins; later calls are made inside it, so Progress must
	// not write to the store.
	Progress func(phase string, done, total int)
}

// ObjectCounts counts stored objects by kind.
type ObjectCounts struct {
	Blobs  int `json:"blobs"`
	Chunks int `json:"chunks"`
	Trees  int `json:"trees"`
}

func (c *ObjectCounts) add(k objKind) {
	switch k {
	case objBlob:
		c.Blobs++
	case objChunk:
		c.Chunks++
	case objTree:
		c.Trees++
	}
}

// GCReport says what GC found and what it deleted (or, in a dry run, would
// delete).
type GCReport struct {
	DryRun bool `json:"dryRun"`
	// Reachable counts the stored objects reachable from a root.
	Reachable ObjectCounts `json:"reachable"`
	// Freed counts the rows deleted.
	Freed ObjectCounts `json:"freed"`
	// FreedBytes is the stored size of the deleted rows: blobs.stored,
	// chunks.stored and the length of trees.data.
	FreedBytes int64 `json:"freedBytes"`
	// Kept counts unreachable rows kept because they are younger than the
	// grace, or referenced by such a row (a young tree keeps its children,
	// so no surviving row ever names a deleted one).
	Kept ObjectCounts `json:"keptYoung"`
}

// GC deletes the blobs, chunks and trees that no root reaches: mark and
// sweep. The roots are every run's live root and persist base, every
// checkpoint's root and every chat's persist root. Mark reads one consistent
// snapshot; sweep runs in one write transaction, so a GC either deletes
// everything it reports or nothing.
//
// GC never deletes what a concurrent writer needs: sweep deletes only rows
// unreachable in the snapshot, older than the grace, and still unreachable
// from the roots as they are once sweep holds the write lock (whatever the
// writers' clocks say); every row it keeps keeps what it references. The
// grace covers rows a writer committed on their own and will reference
// later (a large Put streams its chunks in transactions of their own), so
// with no grace GC is safe only while nothing writes that way.
//
// GC fails with store.corrupt, deleting nothing, if an object reachable
// from a root is missing or a reachable tree does not decode: the walk
// could not know what lies below it. Fsck names every such problem.
func (s *Store) GC(ctx context.Context, opt GCOptions) (GCReport, error) {
	now := opt.Now
	if now == nil {
		now = s.now
	}
	grace := opt.Grace
	switch {
	case grace == 0:
		grace = DefaultGCGrace
	case grace < 0:
		grace = 0
	}
	progress := opt.Progress
	if progress == nil {
		progress = func(string, int, int) {}
	}
	cutoff := now().Add(-grace).UnixNano()

	progress("mark", 0, 0)
	var plan *gcPlan
	err := s.DB.View(ctx, func(tx *index.Tx) error {
		var err error
		plan, err = markGC(ctx, tx, cutoff, progress)
		return err
	})
	if err != nil {
		return GCReport{}, fmt.Errorf("gc: mark: %w", err)
	}
	if opt.DryRun {
		return plan.dryRun(), nil
	}
	var rep GCReport
	progress("sweep", 0, plan.candidates())
	err = s.DB.Update(ctx, func(tx *index.Tx) error {
		var err error
		rep, err = plan.sweep(ctx, tx, progress)
		return err
	})
	if err != nil {
		return GCReport{}, fmt.Errorf("gc: sweep: %w", err)
	}
	return rep, nil
}

// gcPlan is what mark found: what to keep and what to delete.
type gcPlan struct {
	cutoff int64
	inv    *inventory
	// marked is everything reachable from the roots in the snapshot; kept
	// is everything unreachable but young, with what it references.
	marked, kept objSet
	// garbage lists the unreachable old objects, in delete order: blobs,
	// chunks, trees.
	garbage   []object
	reachable ObjectCounts
	keptCount ObjectCounts
	// due holds the trees marked only as patch bases: their entries were
	// not followed, and must be if a root or a young row turns out to
	// need the tree itself.
	due map[cas.Hash]bool
	// gens holds each garbage blob's number in its version history as
	// the snapshot saw it.
	gens map[cas.Hash]int64
}

func markGC(ctx context.Context, tx *index.Tx, cutoff int64, progress func(string, int, int)) (*gcPlan, error) {
	inv, roots, g, err := openGraph(ctx, tx)
	if err != nil {
		return nil, err
	}
	defer g.close()

	p := &gcPlan{cutoff: cutoff, inv: inv, marked: objSet{}, kept: objSet{}, gens: map[cas.Hash]int64{}}
	for i, r := range roots {
		if err := g.walk([]step{r.step()}, p.marked.addNew, badIsCorrupt("gc")); err != nil {
			return nil, err
		}
		progress("mark", i+1, len(roots))
	}
	for o := range p.marked {
		if inv.has(o) {
			p.reachable.add(o.kind)
		}
	}

	// Unreachable rows younger than the cutoff stay, and so does all they
	// reference: a writer may be about to reference them, and a surviving
	// tree or blob must never name a deleted row.
	created, err := newCreatedReader(ctx, tx)
	if err != nil {
		return nil, err
	}
	defer created.close()
	var young, old []step
	for o := range inv.all() {
		if p.marked.has(o) {
			continue
		}
		c, ok, err := created.get(o)
		if err != nil {
			return nil, err
		}
		switch {
		case !ok:
		case c >= cutoff:
			young = append(young, step{o: o})
		default:
			old = append(old, step{o: o})
			if o.kind == objBlob {
				if p.gens[o.hash], err = created.blobGen(o.hash); err != nil {
					return nil, err
				}
			}
		}
	}
	// A tree marked only as a patch base but written again since the
	// cutoff may be about to be referenced as a tree: what it names stays.
	due, err := youngDue(g, created, cutoff)
	if err != nil {
		return nil, err
	}
	visitKept := func(o object) bool { return !p.marked.has(o) && p.kept.addNew(o) }
	if err := g.walk(append(young, due...), visitKept, skipBad); err != nil {
		return nil, err
	}
	p.due = maps.Clone(g.entriesDue)
	for o := range p.kept {
		if inv.has(o) {
			p.keptCount.add(o.kind)
		}
	}
	for _, st := range old {
		if !p.kept.has(st.o) {
			p.garbage = append(p.garbage, st.o)
		}
	}
	sortForSweep(p.garbage)
	return p, nil
}

// sortForSweep orders objects blobs first, then chunks, then trees: a blob
// row's deletion cascades to its blob_chunks rows, which must be gone before
// the chunks they name can go.
func sortForSweep(objs []object) {
	rank := map[objKind]int{objBlob: 0, objChunk: 1, objTree: 2}
	slices.SortFunc(objs, func(a, b object) int {
		if r := rank[a.kind] - rank[b.kind]; r != 0 {
			return r
		}
		return slices.Compare(a.hash[:], b.hash[:])
	})
}

func (p *gcPlan) candidates() int { return len(p.garbage) }

func (p *gcPlan) dryRun() GCReport {
	rep := GCReport{DryRun: true, Reachable: p.reachable, Kept: p.keptCount}
	for _, o := range p.garbage {
		rep.Freed.add(o.kind)
		rep.FreedBytes += p.inv.stored(o)
	}
	return rep
}

// sweep deletes the garbage in tx, the write transaction, after checking
// it against the store as it is now: writers may have committed since the
// snapshot. Everything reachable from the current roots, and everything a
// refreshed row references, is kept.
func (p *gcPlan) sweep(ctx context.Context, tx *index.Tx, progress func(string, int, int)) (GCReport, error) {
	rep := GCReport{Reachable: p.reachable, Kept: p.keptCount}
	g, err := newGraph(ctx, tx, nil)
	if err != nil {
		return rep, err
	}
	defer g.close()
	g.entriesDue = maps.Clone(p.due)
	// reached is what the current roots reach beyond the snapshot's
	// marks; young is what rows re-used since the snapshot reference.
	reached, young := objSet{}, objSet{}
	protect := func(set objSet) func(o object) bool {
		return func(o object) bool {
			return !p.marked.has(o) && !p.kept.has(o) && !reached.has(o) && set.addNew(o)
		}
	}
	roots, err := loadRoots(ctx, tx)
	if err != nil {
		return rep, err
	}
	for _, r := range roots {
		if err := g.walk([]step{r.step()}, protect(reached), badIsCorrupt("gc")); err != nil {
			return rep, err
		}
	}

	// A row re-used since the snapshot is young again: keep it and what it
	// references.
	created, err := newCreatedReader(ctx, tx)
	if err != nil {
		return rep, err
	}
	defer created.close()
	var refreshed []step
	for _, o := range p.garbage {
		if reached.has(o) {
			continue
		}
		c, ok, err := created.get(o)
		if err != nil {
			return rep, err
		}
		if ok && c >= p.cutoff {
			refreshed = append(refreshed, step{o: o})
			continue
		}
		// A blob stored before may have become the newest version of a
		// history since (cas: PutVersion), and the versions it replaced,
		// reachable or not, may now be deltas against it. Its number is
		// what says so, whatever the writer's clock.
		if ok && o.kind == objBlob {
			gen, err := created.blobGen(o.hash)
			if err != nil {
				return rep, err
			}
			if gen != p.gens[o.hash] {
				refreshed = append(refreshed, step{o: o})
			}
		}
	}
	due, err := youngDue(g, created, p.cutoff)
	if err != nil {
		return rep, err
	}
	refreshed = append(refreshed, due...)
	if err := g.walk(refreshed, protect(young), skipBad); err != nil {
		return rep, err
	}

	del, err := newDeleter(ctx, tx)
	if err != nil {
		return rep, err
	}
	defer del.close()
	for i, o := range p.garbage {
		switch {
		case reached.has(o):
			rep.Reachable.add(o.kind)
		case young.has(o):
			rep.Kept.add(o.kind)
		default:
			// The statements check age and, for chunks, references
			// again; a row they keep was refreshed or is listed by a
			// blob written since the snapshot.
			n, ok, err := del.delete(o, p.cutoff)
			if err != nil {
				return rep, err
			}
			if ok {
				rep.Freed.add(o.kind)
				rep.FreedBytes += n
			} else {
				rep.Kept.add(o.kind)
			}
		}
		progress("sweep", i+1, len(p.garbage))
	}
	return rep, nil
}

// deleter holds the sweep's prepared delete statements.
type deleter struct {
	ctx                  context.Context
	blobs, chunks, trees *sqlx.Stmt
}

func newDeleter(ctx context.Context, tx *index.Tx) (*deleter, error) {
	d := &deleter{ctx: ctx}
	var err error
	if d.blobs, err = prepare(ctx, tx, `DELETE FROM blobs WHERE hash = ? AND created < ? RETURNING stored`); err != nil {
		return nil, err
	}
	if d.chunks, err = prepare(ctx, tx, `DELETE FROM chunks WHERE hash = ?1 AND created < ?2
		AND NOT EXISTS (SELECT 1 FROM blob_chunks WHERE chunk = ?1) RETURNING stored`); err != nil {
		d.close()
		return nil, err
	}
	if d.trees, err = prepare(ctx, tx, `DELETE FROM trees WHERE hash = ? AND created < ? RETURNING length(data)`); err != nil {
		d.close()
		return nil, err
	}
	return d, nil
}

// delete deletes o if it is older than cutoff (and, for a chunk, listed by
// no blob) and returns its stored size and whether it was deleted.
func (d *deleter) delete(o object, cutoff int64) (int64, bool, error) {
	stmt := map[objKind]*sqlx.Stmt{objBlob: d.blobs, objChunk: d.chunks, objTree: d.trees}[o.kind]
	var n int64
	err := stmt.QueryRowContext(d.ctx, o.hash, cutoff).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("delete %s %s: %w", o.kind, o.hash.Short(), index.Translate(err))
	}
	return n, true, nil
}

func (d *deleter) close() { closeStmts(d.blobs, d.chunks, d.trees) }

// createdReader reads the created time of single rows, and a blob's
// number in its version history.
type createdReader struct {
	ctx                       context.Context
	blobs, chunks, trees, gen *sqlx.Stmt
}

func newCreatedReader(ctx context.Context, tx *index.Tx) (*createdReader, error) {
	r := &createdReader{ctx: ctx}
	var err error
	if r.blobs, err = prepare(ctx, tx, `SELECT created FROM blobs WHERE hash = ?`); err != nil {
		return nil, err
	}
	if r.chunks, err = prepare(ctx, tx, `SELECT created FROM chunks WHERE hash = ?`); err != nil {
		r.close()
		return nil, err
	}
	if r.trees, err = prepare(ctx, tx, `SELECT created FROM trees WHERE hash = ?`); err != nil {
		r.close()
		return nil, err
	}
	if r.gen, err = prepare(ctx, tx, `SELECT gen FROM blobs WHERE hash = ?`); err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

// get returns o's created time and whether o is stored.
func (r *createdReader) get(o object) (int64, bool, error) {
	stmt := map[objKind]*sqlx.Stmt{objBlob: r.blobs, objChunk: r.chunks, objTree: r.trees}[o.kind]
	var c int64
	err := stmt.QueryRowContext(r.ctx, o.hash).Scan(&c)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("read %s %s: %w", o.kind, o.hash.Short(), index.Translate(err))
	}
	return c, true, nil
}

// blobGen returns blob h's number in its version history (0 for none, or
// when h is not stored).
func (r *createdReader) blobGen(h cas.Hash) (int64, error) {
	var g int64
	err := r.gen.QueryRowContext(r.ctx, h).Scan(&g)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("read blob %s: %w", h.Short(), index.Translate(err))
	}
	return g, nil
}

func (r *createdReader) close() { closeStmts(r.blobs, r.chunks, r.trees, r.gen) }

// youngDue returns, as steps to walk as trees, the trees g has reached only
// as patch bases that were written at or after cutoff.
func youngDue(g *graph, created *createdReader, cutoff int64) ([]step, error) {
	var out []step
	for h := range g.entriesDue {
		o := object{objTree, h}
		c, ok, err := created.get(o)
		if err != nil {
			return nil, err
		}
		if ok && c >= cutoff {
			out = append(out, step{o: o})
		}
	}
	return out, nil
}

func prepare(ctx context.Context, tx *index.Tx, query string) (*sqlx.Stmt, error) {
	st, err := tx.PreparexContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("prepare: %w", index.Translate(err))
	}
	return st, nil
}

func closeStmts(stmts ...*sqlx.Stmt) {
	for _, st := range stmts {
		if st != nil {
			_ = st.Close()
		}
	}
}

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

type objSet map[object]struct{}

func (s objSet) has(o object) bool { _, ok := s[o]; return ok }

// addNew adds o and reports whether it was not there yet.
func (s objSet) addNew(o object) bool {
	if _, ok := s[o]; ok {
		return false
	}
	s[o] = struct{}{}
	return true
}

// blobMeta is what the graph needs of a blob row.
type blobMeta struct {
	stored int64
	codec  cas.Codec
	base   cas.Hash // delta base; zero for none
}

// inventory lists every stored object, read in one transaction. It reads
// no column that follows a row's data, so loading it never reads the
// stored bytes themselves.
type inventory struct {
	blobs      map[cas.Hash]blobMeta
	chunks     map[cas.Hash]int64 // stored bytes
	trees      map[cas.Hash]int64 // encoded bytes
	blobChunks map[cas.Hash][]cas.Hash
}

func loadInventory(ctx context.Context, tx *index.Tx) (*inventory, error) {
	inv := &inventory{
		blobs:      map[cas.Hash]blobMeta{},
		chunks:     map[cas.Hash]int64{},
		trees:      map[cas.Hash]int64{},
		blobChunks: map[cas.Hash][]cas.Hash{},
	}
	err := scanRows(ctx, tx, `SELECT hash, stored, codec, base FROM blobs`, func(rows *sqlx.Rows) error {
		var h, base cas.Hash
		var m blobMeta
		if err := rows.Scan(&h, &m.stored, &m.codec, &base); err != nil {
			return err
		}
		m.base = base
		inv.blobs[h] = m
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = scanRows(ctx, tx, `SELECT hash, stored FROM chunks`, func(rows *sqlx.Rows) error {
		var h cas.Hash
		var n int64
		if err := rows.Scan(&h, &n); err != nil {
			return err
		}
		inv.chunks[h] = n
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = scanRows(ctx, tx, `SELECT hash, length(data) FROM trees`, func(rows *sqlx.Rows) error {
		var h cas.Hash
		var n int64
		if err := rows.Scan(&h, &n); err != nil {
			return err
		}
		inv.trees[h] = n
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = scanRows(ctx, tx, `SELECT blob, chunk FROM blob_chunks ORDER BY blob, idx`, func(rows *sqlx.Rows) error {
		var b, c cas.Hash
		if err := rows.Scan(&b, &c); err != nil {
			return err
		}
		inv.blobChunks[b] = append(inv.blobChunks[b], c)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return inv, nil
}

// has reports whether o is stored.
func (inv *inventory) has(o object) bool {
	switch o.kind {
	case objBlob:
		_, ok := inv.blobs[o.hash]
		return ok
	case objChunk:
		_, ok := inv.chunks[o.hash]
		return ok
	case objTree:
		_, ok := inv.trees[o.hash]
		return ok
	}
	return false
}

// stored returns o's stored bytes (0 if it is not stored).
func (inv *inventory) stored(o object) int64 {
	switch o.kind {
	case objBlob:
		return inv.blobs[o.hash].stored
	case objChunk:
		return inv.chunks[o.hash]
	case objTree:
		return inv.trees[o.hash]
	}
	return 0
}

// all yields every stored object.
func (inv *inventory) all() func(yield func(object) bool) {
	return func(yield func(object) bool) {
		for h := range inv.blobs {
			if !yield(object{objBlob, h}) {
				return
			}
		}
		for h := range inv.chunks {
			if !yield(object{objChunk, h}) {
				return
			}
		}
		for h := range inv.trees {
			if !yield(object{objTree, h}) {
				return
			}
		}
	}
}

func scanRows(ctx context.Context, tx *index.Tx, query string, fn func(rows *sqlx.Rows) error, args ...any) error {
	rows, err := tx.QueryxContext(ctx, query, args...)
	if err != nil {
		return index.Translate(err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return index.Translate(err)
		}
	}
	return index.Translate(rows.Err())
}

// rootRef is one root: a tree some row holds on to.
type rootRef struct {
	Kind  string // "run" (live root), "base" (persist base), "checkpoint", "chat" (persist root)
	Chat  string // chat id ("" for a checkpoint whose run is gone)
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
	case "checkpoint":
		return "checkpoint " + r.Run + "/" + checkpoint.ID(r.Seq)
	case "chat":
		return "chat " + r.Chat + " persist root"
	}
	return r.Kind + " " + r.Run
}

func (r *rootRef) step() step {
	return step{o: object{objTree, r.Hash}, ref: ref{root: r}}
}

// loadRoots lists every root, ordered by chat, run and kind.
func loadRoots(ctx context.Context, tx *index.Tx) ([]rootRef, error) {
	var roots []rootRef
	err := scanRows(ctx, tx, `
		SELECT 'run', chat_id, id, 0, root FROM runs
		UNION ALL SELECT 'base', chat_id, id, 0, persist_base FROM runs
		UNION ALL SELECT 'checkpoint', coalesce(r.chat_id, ''), c.run_id, c.seq, c.root
			FROM checkpoints c LEFT JOIN runs r ON r.id = c.run_id
		UNION ALL SELECT 'chat', id, '', 0, persist_root FROM chats
		ORDER BY 2, 3, 1, 4`, func(rows *sqlx.Rows) error {
		var r rootRef
		if err := rows.Scan(&r.Kind, &r.Chat, &r.Run, &r.Seq, &r.Hash); err != nil {
			return err
		}
		r.index = len(roots)
		roots = append(roots, r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read roots: %w", err)
	}
	return roots, nil
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
}

// graph reads what objects reference, inside one transaction. With an
// inventory it answers questions about blobs and chunks from memory;
// without one it queries, so it sees the transaction's latest state.
type graph struct {
	ctx                    context.Context
	inv                    *inventory
	tree, blob, bc, hasChk *sqlx.Stmt
	// decoded keeps the trees read so far that patches rest on, so a walk
	// through a patch chain decodes each tree once.
	decoded map[cas.Hash]decodedTree
	// entriesDue holds the trees visited only as patch bases, whose
	// entries a later visit as a tree (in any walk on this graph) must
	// still follow, though the visit function has seen them.
	entriesDue map[cas.Hash]bool
}

// openGraph reads, in tx, what gc, fsck and du all start from: the
// inventory of objects, the roots, and a graph to walk from them. The
// caller closes the graph.
func openGraph(ctx context.Context, tx *index.Tx) (*inventory, []rootRef, *graph, error) {
	inv, err := loadInventory(ctx, tx)
	if err != nil {
		return nil, nil, nil, err
	}
	roots, err := loadRoots(ctx, tx)
	if err != nil {
		return nil, nil, nil, err
	}
	g, err := newGraph(ctx, tx, inv)
	if err != nil {
		return nil, nil, nil, err
	}
	return inv, roots, g, nil
}

func newGraph(ctx context.Context, tx *index.Tx, inv *inventory) (*graph, error) {
	g := &graph{ctx: ctx, inv: inv, decoded: make(map[cas.Hash]decodedTree), entriesDue: make(map[cas.Hash]bool)}
	var err error
	if g.tree, err = prepare(ctx, tx, `SELECT data, base FROM trees WHERE hash = ?`); err != nil {
		return nil, err
	}
	if inv != nil {
		return g, nil
	}
	if g.blob, err = prepare(ctx, tx, `SELECT codec, base FROM blobs WHERE hash = ?`); err != nil {
		g.close()
		return nil, err
	}
	if g.bc, err = prepare(ctx, tx, `SELECT chunk FROM blob_chunks WHERE blob = ? ORDER BY idx`); err != nil {
		g.close()
		return nil, err
	}
	if g.hasChk, err = prepare(ctx, tx, `SELECT count(*) FROM chunks WHERE hash = ?`); err != nil {
		g.close()
		return nil, err
	}
	return g, nil
}

func (g *graph) close() { closeStmts(g.tree, g.blob, g.bc, g.hasChk) }

// entries returns the entries of tree h, the tree its row is a patch
// against (the zero Hash for a whole tree) and whether it is stored.
// EmptyTree is always there, with or without a row. A tree that does not
// decode, or whose patch chain does not, fails with store.corrupt.
func (g *graph) entries(h cas.Hash) ([]vfs.Entry, cas.Hash, bool, error) {
	t, ok, err := g.treeAt(h, 0)
	return t.entries, t.base, ok, err
}

// decodedMax bounds graph.decoded; past it the map starts again, which
// costs re-reads, never correctness.
const decodedMax = 4096

// decodedTree is a tree read through its patch chain: its entries, the
// tree its patch is against and its patch number (0 when stored whole).
type decodedTree struct {
	entries []vfs.Entry
	base    cas.Hash
	seq     int
}

func (g *graph) treeAt(h cas.Hash, level int) (decodedTree, bool, error) {
	var data, base []byte
	err := g.tree.QueryRowContext(g.ctx, h).Scan(&data, &base)
	if errors.Is(err, sql.ErrNoRows) {
		return decodedTree{}, h == vfs.EmptyTree, nil
	}
	if err != nil {
		return decodedTree{}, false, fmt.Errorf("read tree %s: %w", h.Short(), index.Translate(err))
	}
	if base == nil {
		es, _, err := vfs.DecodeTreeRow(h, data, false, nil, 0)
		if err != nil {
			return decodedTree{}, true, fmt.Errorf("tree %s: %w", h, err)
		}
		return decodedTree{entries: es}, true, nil
	}
	if len(base) != len(cas.Hash{}) {
		return decodedTree{}, true, wserr.New(wserr.Corrupt, "read tree", "", "tree %s: bad patch base", h)
	}
	t := decodedTree{base: cas.Hash(base)}
	under, ok := g.decoded[t.base]
	if !ok {
		if level >= vfs.MaxPatchChain {
			return t, true, wserr.New(wserr.Corrupt, "read tree", "", "tree %s: patch chain longer than any store writes: a cycle", h)
		}
		var stored bool
		under, stored, err = g.treeAt(t.base, level+1)
		switch {
		case err != nil && !wserr.Is(err, wserr.Corrupt):
			// Not the store's doing (a cancelled ctx, a failed read): say
			// so rather than call the tree corrupt.
			return t, true, fmt.Errorf("read tree %s: patch base %s: %w", h.Short(), t.base.Short(), err)
		case err != nil:
			return t, true, wserr.New(wserr.Corrupt, "read tree", "", "tree %s: patch base %s: %s", h, t.base, wserr.MessageOf(err))
		case !stored:
			return t, true, wserr.New(wserr.Corrupt, "read tree", "", "tree %s: patch base %s is missing", h, t.base)
		}
		if len(g.decoded) >= decodedMax {
			clear(g.decoded)
		}
		g.decoded[t.base] = under
	}
	if t.entries, t.seq, err = vfs.DecodeTreeRow(h, data, true, under.entries, under.seq); err != nil {
		return t, true, fmt.Errorf("tree %s: %w", h, err)
	}
	return t, true, nil
}

// blobRefs returns what blob h references (its chunks, its delta base) and
// whether it is stored.
func (g *graph) blobRefs(h cas.Hash) (m blobMeta, chunks []cas.Hash, ok bool, err error) {
	if g.inv != nil {
		m, ok = g.inv.blobs[h]
		return m, g.inv.blobChunks[h], ok, nil
	}
	var base cas.Hash
	err = g.blob.QueryRowContext(g.ctx, h).Scan(&m.codec, &base)
	if errors.Is(err, sql.ErrNoRows) {
		return m, nil, false, nil
	}
	if err != nil {
		return m, nil, false, fmt.Errorf("read blob %s: %w", h.Short(), index.Translate(err))
	}
	m.base = base
	if m.codec == cas.CodecChunked {
		if err := g.bc.SelectContext(g.ctx, &chunks, h); err != nil {
			return m, nil, false, fmt.Errorf("read blob %s chunks: %w", h.Short(), index.Translate(err))
		}
	}
	return m, chunks, true, nil
}

func (g *graph) hasChunk(h cas.Hash) (bool, error) {
	if g.inv != nil {
		_, ok := g.inv.chunks[h]
		return ok, nil
	}
	var n int
	if err := g.hasChk.QueryRowContext(g.ctx, h).Scan(&n); err != nil {
		return false, fmt.Errorf("read chunk %s: %w", h.Short(), index.Translate(err))
	}
	return n > 0, nil
}

// walk visits, depth first, every object reachable from starts. visit is
// called for each object reached and returns whether to follow its
// references (false: seen before, or not wanted). A tree a patch rests on
// is reached as a patch base: its row is needed and so is its own base,
// but not what its entries name, which are followed only if some walk on
// this graph reaches the tree as a tree. bad is called, with what
// referred to it, for a followed object that is not stored (err nil) or is
// a tree that does not decode (err says why); it returns nil to go on
// without following the object, or an error to stop the walk.
func (g *graph) walk(starts []step, visit func(o object) bool, bad func(o object, r ref, err error) error) error {
	stack := slices.Clone(starts)
	slices.Reverse(stack)
	for n := 0; len(stack) > 0; n++ {
		if n%1024 == 0 {
			if err := g.ctx.Err(); err != nil {
				return err
			}
		}
		st := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		first := visit(st.o)
		// A tree seen before only as a patch base has its entries to
		// follow once it is reached as a tree.
		due := !first && st.o.kind == objTree && !st.asBase && g.entriesDue[st.o.hash]
		if !first && !due {
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
			for i := len(es) - 1; i >= 0; i-- {
				k := objBlob
				if es[i].Kind == vfs.KindDir {
					k = objTree
				}
				stack = append(stack, step{o: object{k, es[i].Hash}, ref: ref{from: st.o, name: es[i].Name}})
			}
		case objBlob:
			m, chunks, ok, err := g.blobRefs(st.o.hash)
			if err != nil {
				return err
			}
			found = ok
			if !m.base.IsZero() {
				stack = append(stack, step{o: object{objBlob, m.base}, ref: ref{from: st.o, name: "delta base"}})
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
