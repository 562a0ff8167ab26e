package vfs

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/wserr"
)

// DefaultTreeCacheEntries bounds the entries of the decoded trees a Trees
// keeps, unless NewTreesCache sets another bound.
// A workspace write reads one tree per directory on its path and a diff
// reads the changed directories, so the trees on a few hundred paths
// cover the hot part of many workspaces. The bound is on entries, not
// trees: every write leaves a new root and a new version of each
// directory on its path, and at 4,096 trees the roots of a workspace with
// wide directories held 10 MB, all of it heap with pointers that a
// process under a soft memory limit scans at every collection. An entry
// takes about 100 bytes.
const DefaultTreeCacheEntries = 16 << 10

// Trees stores Merkle trees in the index's trees table and edits them
// copy-on-write. Methods that take a *index.Tx read and write in it, so reads
// inside a write transaction see its own writes; where a nil tx is allowed,
// reads go through the read pool. Trees is safe for concurrent use.
type Trees struct {
	db    *index.DB
	blobs *cas.Store
	now   func() time.Time
	cache treeCache

	// loads counts tree loads (from the cache or the table), so tests can
	// prove that a diff never opens an equal subtree.
	loads atomic.Int64
}

// NewTrees returns a Trees on db whose file contents (for FS) live in blobs.
// now stamps the created column for gc; nil means time.Now.
func NewTrees(db *index.DB, blobs *cas.Store, now func() time.Time) *Trees {
	return NewTreesCache(db, blobs, now, DefaultTreeCacheEntries)
}

// NewTreesCache is NewTrees keeping decoded trees of about cacheEntries
// entries in all (a tree counts one more than its entries; about 100
// bytes an entry) in memory; 0 or less means DefaultTreeCacheEntries.
func NewTreesCache(db *index.DB, blobs *cas.Store, now func() time.Time, cacheEntries int) *Trees {
	if now == nil {
		now = time.Now
	}
	if cacheEntries <= 0 {
		cacheEntries = DefaultTreeCacheEntries
	}
	return &Trees{db: db, blobs: blobs, now: now, cache: newTreeCache(cacheEntries)}
}

// Put stores the tree of entries in tx and returns its address; see
// EncodeTree for what is refused (wserr.InvalidArgument). Storing a tree
// that exists only refreshes its created time, so a concurrent gc keeps it.
// tx must be a write transaction (nil fails with wserr.Internal): a tree
// commits, or rolls back, with whatever references it. Put trusts the
// sizes of directory entries; Set keeps them right. Put stores the tree
// whole; Set and SetFiles store a new version of a directory as a patch
// against the version it replaces.
func (t *Trees) Put(ctx context.Context, tx *index.Tx, entries []Entry) (cas.Hash, error) {
	// The clone goes to the cache, so the caller keeps its slice.
	entries = slices.Clone(entries)
	slices.SortFunc(entries, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) })
	return t.putOne(ctx, tx, entries, cas.Hash{})
}

// PutNext is Put of entries as the next version of the directory that
// tree prev holds: stored as a patch against prev's history when that is
// smaller, as Set stores a directory it changes. A caller rewriting many
// versions of a directory (scratch collection rewrites every checkpoint's
// root) chains them this way among themselves, so no new row rests on a
// version being replaced.
func (t *Trees) PutNext(ctx context.Context, tx *index.Tx, entries []Entry, prev cas.Hash) (cas.Hash, error) {
	entries = slices.Clone(entries)
	slices.SortFunc(entries, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) })
	return t.putOne(ctx, tx, entries, prev)
}

// putOne is put of one tree, its refs inserted straight away.
func (t *Trees) putOne(ctx context.Context, tx *index.Tx, entries []Entry, old cas.Hash) (cas.Hash, error) {
	var rb refBatch
	h, err := t.put(ctx, tx, entries, old, &rb)
	if err != nil {
		return cas.Hash{}, err
	}
	return h, rb.flush(ctx, tx)
}

// put is Put for entries sorted by name that the caller hands over: they
// go to the cache as they are and must not be modified afterwards. old is
// the tree these entries replace (the zero Hash for none): the new tree is
// stored as the next version of old's directory, a patch against the
// version the skip-delta numbering names (treepatch.go), when that is
// smaller than the whole encoding. What the new row names is added to rb,
// which the caller flushes before its change is done.
func (t *Trees) put(ctx context.Context, tx *index.Tx, entries []Entry, old cas.Hash, rb *refBatch) (cas.Hash, error) {
	data, err := encodeSorted(entries)
	if err != nil {
		return cas.Hash{}, err
	}
	h := TreeHash(data)
	n := node{entries: entries}
	stored := data
	var want *int // the place the base's row must hold, when only the cache has said so
	if !old.IsZero() && old != EmptyTree && old != h {
		if p, base, seq, w := t.patchFor(ctx, tx, old, entries, len(data)); p != nil && patchWorth(len(p), len(data)) {
			stored, n.base, n.seq, want = p, base, seq, w
		}
	}
	seq, base, err := t.insert(ctx, tx, h, stored, n.base, want, rb)
	if errors.Is(err, errPlaceMoved) {
		// The cache's view of the base's row was not the row's: the
		// chain is read from the rows.
		stored, n.base, n.seq = data, cas.Hash{}, 0
		if p, base, seq := t.patchFromRows(ctx, tx, old, entries); p != nil && patchWorth(len(p), len(data)) {
			stored, n.base, n.seq = p, base, seq
		}
		seq, base, err = t.insert(ctx, tx, h, stored, n.base, nil, rb)
	}
	if err != nil {
		return cas.Hash{}, err
	}
	// The decoded form is right whatever becomes of tx, because it is
	// addressed by its content; it is the row, not the cache, that a
	// rollback takes away, and Put never trusts the cache for the row.
	// The cached place in a history is the row's: a tree stored before
	// keeps its own.
	n.seq, n.base = seq, base
	t.cache.add(h, n)
	return h, nil
}

// patchFor returns the patch that would store entries as the version after
// old, with its base and number, or a nil patch if the next version is to
// be whole: the history is long enough, or old's chain does not read (a
// tree that no longer loads only means this one is stored whole), or the
// patch is no smaller than whole, the encoding's length.
//
// The new row is sound if its base's row holds number skipBase(next): its
// chain is then one longer than the base's. The base is found through the
// cache (one lookup per step); want is then that number, which the insert
// checks against the base's row (insert fails with errPlaceMoved if the
// cache disagrees with the rows: another handle on the store may have
// stored a tree of the same content in another place). If the cache has no
// chain, it is read from the rows, and want is nil.
func (t *Trees) patchFor(ctx context.Context, tx *index.Tx, old cas.Hash, entries []Entry, whole int) ([]byte, cas.Hash, int, *int) {
	o, err := t.node(ctx, tx, old)
	if err != nil {
		return nil, cas.Hash{}, 0, nil
	}
	next := o.seq + 1
	want, at := skipBase(next), old
	for o.seq > want && !o.base.IsZero() {
		at = o.base
		if o, err = t.node(ctx, tx, at); err != nil {
			break
		}
	}
	if err == nil && o.seq == want && next < maxPatchSeq {
		if p := encodePatch(o.entries, entries, next); patchWorth(len(p), whole) {
			return p, at, next, &want
		}
		return nil, cas.Hash{}, 0, nil
	}
	p, base, seq := t.patchFromRows(ctx, tx, old, entries)
	return p, base, seq, nil
}

// patchFromRows is patchFor with the chain read from the rows in tx.
func (t *Trees) patchFromRows(ctx context.Context, tx *index.Tx, old cas.Hash, entries []Entry) ([]byte, cas.Hash, int) {
	seq, base, err := t.place(ctx, tx, old)
	next := seq + 1
	if err != nil || next >= maxPatchSeq {
		return nil, cas.Hash{}, 0
	}
	want, at := skipBase(next), old
	for seq != want {
		if seq < want || base.IsZero() {
			return nil, cas.Hash{}, 0 // not a chain this package wrote
		}
		at = base
		if seq, base, err = t.place(ctx, tx, at); err != nil {
			return nil, cas.Hash{}, 0
		}
	}
	o, err := t.node(ctx, tx, at)
	if err != nil {
		return nil, cas.Hash{}, 0
	}
	return encodePatch(o.entries, entries, next), at, next
}

// place reads where the tree at h stands in its directory's history: its
// patch number (0 when stored whole) and the tree its patch is against.
func (t *Trees) place(ctx context.Context, tx *index.Tx, h cas.Hash) (int, cas.Hash, error) {
	var head, base []byte
	err := tx.QueryRowContext(ctx, `SELECT CASE WHEN base IS NULL THEN NULL ELSE substr(data, 1, ?) END, base FROM trees WHERE hash = ?`,
		placeHead, h[:]).Scan(&head, &base)
	if err != nil {
		return 0, cas.Hash{}, err
	}
	return placeOf(head, base)
}

// placeHead is how many leading bytes of a patch hold its number.
const placeHead = 1 + binary.MaxVarintLen64

// placeOf parses a row's place from its base and the first bytes of its
// data.
func placeOf(head, base []byte) (int, cas.Hash, error) {
	if base == nil {
		return 0, cas.Hash{}, nil
	}
	if len(base) != hashLen {
		return 0, cas.Hash{}, wserr.New(wserr.Corrupt, "read tree", "", "bad patch base")
	}
	seq, _, err := patchSeq(head)
	return seq, cas.Hash(base), err
}

// requireStored fails with wserr.Corrupt unless the tree at h has a row.
// The cache may still hold a tree that gc collected since, and perhaps
// the trees below it too: a graft must not make a root name it. A row that
// exists is left as it is, however wide: once this transaction commits,
// gc finds the tree through what references it.
func (t *Trees) requireStored(ctx context.Context, tx *index.Tx, h cas.Hash) error {
	var one int
	err := tx.QueryRowContext(ctx, `SELECT 1 FROM trees WHERE hash = ?`, h[:]).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return wserr.New(wserr.Corrupt, "read tree", "", "tree missing: %s (collected by gc?)", h)
	}
	return index.Translate(err)
}

// errPlaceMoved is insert's answer when the base's row does not hold the
// place the caller expected.
var errPlaceMoved = errors.New("patch base moved")

// insert writes one stored tree (data a patch against base, or the whole
// encoding when base is zero). It always executes, even for a tree seen
// before: that tree may have come from a transaction that rolled back. It
// returns the place in a history the row now holds: this one, or that of
// a tree stored before, which keeps its own form and only has its created
// time refreshed. With want set, the same statement checks that base's
// row holds place *want (0: stored whole), and writes nothing, failing
// with errPlaceMoved, if it does not. What the row names goes to rb.
func (t *Trees) insert(ctx context.Context, tx *index.Tx, h cas.Hash, data []byte, base cas.Hash, want *int, rb *refBatch) (int, cas.Hash, error) {
	if tx == nil {
		return 0, cas.Hash{}, wserr.New(wserr.Internal, "put tree", "", "no transaction: trees are written inside the transaction that references them")
	}
	var b []byte
	if !base.IsZero() {
		b = base[:]
	}
	var head, kept []byte
	var err error
	if want == nil || b == nil {
		err = tx.QueryRowContext(ctx, `INSERT INTO trees (hash, data, base, created) VALUES (?, ?, ?, ?)
		ON CONFLICT (hash) DO UPDATE SET created = max(created, excluded.created)
		RETURNING substr(data, 1, ?), base`,
			h[:], data, b, t.now().UnixNano(), placeHead).Scan(&head, &kept)
	} else {
		// The base's place, as place reads it: whole (no base), or a
		// patch whose leading version byte and number are these.
		var prefix any // NULL for a whole base
		if *want > 0 {
			prefix = binary.AppendUvarint([]byte{patchVersion}, uint64(*want))
		}
		err = tx.QueryRowContext(ctx, `INSERT INTO trees (hash, data, base, created)
		SELECT ?1, ?2, ?3, ?4 WHERE EXISTS (SELECT 1 FROM trees WHERE hash = ?3 AND CASE WHEN ?6 IS NULL THEN base IS NULL
			ELSE length(base) = 32 AND substr(data, 1, length(?6)) = ?6 END)
		ON CONFLICT (hash) DO UPDATE SET created = max(created, excluded.created)
		RETURNING substr(data, 1, ?5), base`,
			h[:], data, b, t.now().UnixNano(), placeHead, prefix).Scan(&head, &kept)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, cas.Hash{}, errPlaceMoved
		}
	}
	if err != nil {
		return 0, cas.Hash{}, fmt.Errorf("put tree %s: %w", h.Short(), index.Translate(err))
	}
	seq, kb, err := placeOf(head, kept)
	if err != nil {
		return 0, cas.Hash{}, fmt.Errorf("put tree %s: %w", h.Short(), err)
	}
	// A row stored before in another form listed what it names then.
	if bytes.Equal(kept, b) {
		if err := rb.add(ctx, tx, h, data, b); err != nil {
			return 0, cas.Hash{}, fmt.Errorf("put tree: %w", err)
		}
	}
	return seq, kb, nil
}

// Entries returns the entries of the tree at h, sorted by name, as a copy
// the caller may modify. tx nil reads through the read pool. EmptyTree
// always has no entries, stored or not. A tree that is not stored, or whose
// bytes do not decode or hash to h, fails with wserr.Corrupt: a referenced
// tree must exist. Decoded trees are cached by address (they are immutable),
// so a cached tree is returned without reading its row again.
func (t *Trees) Entries(ctx context.Context, tx *index.Tx, h cas.Hash) ([]Entry, error) {
	es, err := t.load(ctx, tx, h)
	if err != nil || len(es) == 0 {
		return nil, err
	}
	return slices.Clone(es), nil
}

// node is a decoded tree and its place in its directory's history: the
// version number of its patch (0 for a whole tree) and the tree the patch
// is against.
type node struct {
	entries []Entry
	seq     int
	base    cas.Hash
}

// load returns the entries at h, shared with the cache: callers must not
// modify the slice.
func (t *Trees) load(ctx context.Context, tx *index.Tx, h cas.Hash) ([]Entry, error) {
	t.loads.Add(1)
	n, err := t.node(ctx, tx, h)
	return n.entries, err
}

// node returns the decoded tree at h from the cache or its row, following
// the row's patch chain to a whole tree. A missing or damaged tree, on the
// chain or at h, fails with wserr.Corrupt naming it.
func (t *Trees) node(ctx context.Context, tx *index.Tx, h cas.Hash) (node, error) {
	if tx == nil {
		// The cache outlives the store's Close: a read outside a
		// transaction fails after it, as one of the table does.
		if err := t.db.CheckOpen("read tree"); err != nil {
			return node{}, err
		}
	}
	if h == EmptyTree {
		return node{}, nil
	}
	if n, ok := t.cache.get(h); ok {
		return n, nil
	}
	if tx == nil {
		// One read transaction for the whole chain.
		var n node
		err := t.db.View(ctx, func(tx *index.Tx) error {
			var err error
			n, err = t.node(ctx, tx, h)
			return err
		})
		return n, err
	}
	// Read the chain down to a whole tree in one query (a cold read needs
	// all of it; it is at most maxPatchDepth patches), keep it down to the
	// first tree the cache holds, then decode back up.
	type row struct {
		Hash cas.Hash `db:"hash"`
		Data []byte   `db:"data"`
		Base []byte   `db:"base"`
	}
	var rows []row
	err := tx.SelectContext(ctx, &rows, `
		WITH RECURSIVE chain (hash, data, base, n) AS (
			SELECT hash, data, base, 0 FROM trees WHERE hash = ?
			UNION ALL
			SELECT t.hash, t.data, t.base, c.n + 1 FROM trees t JOIN chain c ON t.hash = c.base
			WHERE c.n < ?
		)
		SELECT hash, data, base FROM chain ORDER BY n`, h[:], maxPatchChain)
	if err != nil {
		return node{}, fmt.Errorf("read tree %s: %w", h.Short(), index.Translate(err))
	}
	if len(rows) == 0 {
		return node{}, wserr.New(wserr.Corrupt, "read tree", "", "tree missing: %s", h)
	}
	var chain []row
	var below node
	for k, r := range rows {
		chain = append(chain, r)
		if r.Base == nil {
			break
		}
		if len(r.Base) != hashLen {
			return node{}, wserr.New(wserr.Corrupt, "read tree", "", "tree %s: bad patch base", r.Hash)
		}
		next := cas.Hash(r.Base)
		if n, ok := t.cache.get(next); ok {
			below = n
			break
		}
		if k == len(rows)-1 {
			if len(rows) > maxPatchChain {
				return node{}, wserr.New(wserr.Corrupt, "read tree", "", "tree %s: patch chain longer than any store writes (%d): a cycle", h, maxPatchChain)
			}
			return node{}, wserr.New(wserr.Corrupt, "read tree", "", "tree %s: patch base %s is missing", h, next)
		}
	}
	// The number of the tree the chain rests on comes from its row, also
	// when the cache supplies its entries: numbers must rise along a chain.
	baseSeq := 0
	if last := len(chain) - 1; chain[last].Base != nil && last+1 < len(rows) && rows[last+1].Base != nil {
		if baseSeq, err = PatchNumber(rows[last+1].Data); err != nil {
			return node{}, treeErr(h, rows[last+1].Hash, err)
		}
	}
	for i := len(chain) - 1; i >= 0; i-- {
		r := chain[i]
		es, seq, err := decodeTreeRow(r.Hash, r.Data, r.Base != nil, below.entries, baseSeq)
		if err != nil {
			return node{}, treeErr(h, r.Hash, err)
		}
		n := node{entries: es, seq: seq}
		if r.Base != nil {
			n.base = cas.Hash(r.Base)
		}
		t.cache.add(r.Hash, n)
		below, baseSeq = n, seq
	}
	return below, nil
}

// treeErr is the error for a tree h that does not read because the row of
// tree bad, h itself or a base of its patch chain, does not decode.
func treeErr(h, bad cas.Hash, err error) error {
	if bad == h {
		return fmt.Errorf("read tree %s: %w", h.Short(), err)
	}
	return wserr.New(wserr.Corrupt, "read tree", "", "tree %s: patch base %s: %s", h, bad, wserr.MessageOf(err))
}

// find returns the index of name in sorted entries and whether it is there.
func find(entries []Entry, name string) (int, bool) {
	return slices.BinarySearchFunc(entries, name, func(e Entry, name string) int {
		return strings.Compare(e.Name, name)
	})
}

// totalSize returns the bytes of all files below a tree with entries es.
func totalSize(es []Entry) (int64, error) {
	var n int64
	for _, e := range es {
		if n+e.Size < n {
			return 0, wserr.New(wserr.Corrupt, "tree size", "", "sizes overflow at %q", e.Name)
		}
		n += e.Size
	}
	return n, nil
}

// notFound is the error for a path that names nothing in a tree.
func notFound(op string, p Path) error {
	return wserr.New(wserr.FileNotFound, op, p.String(), "no such file or directory")
}

// Lookup returns the entry at p in the tree root. For the root itself it is
// a directory entry with no name, Hash root and the total size. It fails with
// wserr.FileNotFound (Path p) if p does not exist, also when a segment above
// it is a file.
func (t *Trees) Lookup(ctx context.Context, tx *index.Tx, root cas.Hash, p Path) (Entry, error) {
	return t.lookup(ctx, tx, "lookup", root, p)
}

func (t *Trees) lookup(ctx context.Context, tx *index.Tx, op string, root cas.Hash, p Path) (Entry, error) {
	es, err := t.load(ctx, tx, root)
	if err != nil {
		return Entry{}, err
	}
	if p.IsRoot() {
		size, err := totalSize(es)
		if err != nil {
			return Entry{}, err
		}
		return Entry{Kind: KindDir, Hash: root, Size: size}, nil
	}
	segs := p.Segments()
	for i, name := range segs {
		j, ok := find(es, name)
		if !ok {
			return Entry{}, notFound(op, p)
		}
		e := es[j]
		if i == len(segs)-1 {
			return e, nil
		}
		if e.Kind != KindDir {
			return Entry{}, notFound(op, p)
		}
		if es, err = t.load(ctx, tx, e.Hash); err != nil {
			return Entry{}, err
		}
	}
	panic("unreachable")
}

// Set writes e at p in the tree root, copy-on-write, and returns the new
// root; root itself is never changed. It reads the trees on p's path and
// writes one new tree per directory on it (root included), so its cost
// depends on p's depth and the sizes of those directories, never on the
// size of the workspace. e.Name is ignored: the name is p.Base().
//
//   - A file entry (Hash a blob, Size its bytes) creates or replaces the file
//     and creates the directories above it. The blob is not looked up:
//     storing it first, in the same transaction, is the caller's part of the
//     write order (blobs, then trees, then rows).
//   - A directory entry (Hash a stored tree) grafts that tree at p, sharing
//     it without copying; its Size is taken from the tree. Grafting EmptyTree
//     removes p, if present, since trees keep no empty directories.
//   - e nil deletes p, a whole subtree if p is a directory; directories left
//     empty are removed too, except the root.
//
// If nothing changes (the same entry, or EmptyTree grafted where nothing
// is), Set writes nothing and returns root. tx must be a write transaction
// (nil fails with wserr.Internal). Errors: wserr.InvalidPath if p is the
// root; wserr.NotADirectory if a file is
// where a directory must go (above p, or at p for a graft);
// wserr.PathIsDirectory if e is a file and p is a directory;
// wserr.FileNotFound if e is nil and p does not exist; wserr.InvalidArgument
// for an entry of unknown kind or negative size; wserr.Corrupt if a tree
// to read (or to graft) is missing.
func (t *Trees) Set(ctx context.Context, tx *index.Tx, root cas.Hash, p Path, e *Entry) (cas.Hash, error) {
	const op = "set"
	if tx == nil {
		return cas.Hash{}, wserr.New(wserr.Internal, op, p.String(), "no transaction: trees are written inside the transaction that references them")
	}
	if p.IsRoot() {
		return cas.Hash{}, wserr.New(wserr.InvalidPath, op, p.String(), "the workspace root cannot be set; name a path inside it")
	}
	ne := Entry{Name: p.Base()}
	del := e == nil
	if !del {
		ne = *e
		ne.Name = p.Base()
		if err := checkEntry(ne); err != nil {
			return cas.Hash{}, wserr.Wrap(wserr.InvalidArgument, op, p.String(), err)
		}
		if ne.Kind == KindDir {
			sub, err := t.load(ctx, tx, ne.Hash)
			if err != nil {
				return cas.Hash{}, fmt.Errorf("%s %s: graft: %w", op, p, err)
			}
			if len(sub) == 0 {
				del = true
			} else if ne.Size, err = totalSize(sub); err != nil {
				return cas.Hash{}, err
			} else if err := t.requireStored(ctx, tx, ne.Hash); err != nil {
				return cas.Hash{}, fmt.Errorf("%s %s: graft: %w", op, p, err)
			}
		}
	}

	// Read down: levels[i] holds the entries of the directory at the first
	// i segments of p; a directory that does not exist yet reads as empty.
	segs := p.Segments()
	levels := make([][]Entry, len(segs))
	olds := make([]cas.Hash, len(segs)) // the stored tree of each level, if any
	olds[0] = root
	es, err := t.load(ctx, tx, root)
	if err != nil {
		return cas.Hash{}, err
	}
	// graftEmpty is a delete that finds nothing to delete without error.
	graftEmpty := del && e != nil
	for i, name := range segs[:len(segs)-1] {
		levels[i] = es
		j, ok := find(es, name)
		switch {
		case !ok && graftEmpty:
			return root, nil
		case (!ok || es[j].Kind != KindDir) && e == nil:
			return cas.Hash{}, notFound(op, p)
		case !ok:
			es = nil
		case es[j].Kind != KindDir:
			above := Path{s: strings.Join(segs[:i+1], "/")}
			return cas.Hash{}, wserr.New(wserr.NotADirectory, op, p.String(), "%s is a file, not a directory", above)
		default:
			olds[i+1] = es[j].Hash
			if es, err = t.load(ctx, tx, es[j].Hash); err != nil {
				return cas.Hash{}, err
			}
		}
	}
	last := len(segs) - 1
	levels[last] = es

	// Change the leaf directory.
	j, exists := find(es, ne.Name)
	switch {
	case !exists && graftEmpty:
		return root, nil
	case !exists && del:
		return cas.Hash{}, notFound(op, p)
	case graftEmpty && es[j].Kind == KindFile:
		return cas.Hash{}, wserr.New(wserr.NotADirectory, op, p.String(), "is a file; remove it first to place a directory there")
	case del:
		es = slices.Delete(slices.Clone(es), j, j+1)
	case !exists:
		es = slices.Insert(slices.Clone(es), j, ne)
	case es[j] == ne:
		return root, nil
	case ne.Kind == KindFile && es[j].Kind == KindDir:
		return cas.Hash{}, wserr.New(wserr.PathIsDirectory, op, p.String(), "is a directory; remove it first to write a file there")
	case ne.Kind == KindDir && es[j].Kind == KindFile:
		return cas.Hash{}, wserr.New(wserr.NotADirectory, op, p.String(), "is a file; remove it first to place a directory there")
	default:
		es = slices.Clone(es)
		es[j] = ne
	}

	// Write up: each level gets its changed child; an emptied directory
	// disappears from its parent instead of being stored. What the new
	// rows name is listed in one statement at the end.
	var rb refBatch
	for i := last; ; i-- {
		if i == 0 {
			h, err := t.put(ctx, tx, es, olds[0], &rb)
			if err != nil {
				return cas.Hash{}, err
			}
			return h, rb.flush(ctx, tx)
		}
		parent := levels[i-1]
		name := segs[i-1]
		k, ok := find(parent, name)
		if len(es) == 0 {
			// Only reachable by deleting, so the directory exists.
			es = slices.Delete(slices.Clone(parent), k, k+1)
			continue
		}
		h, err := t.put(ctx, tx, es, olds[i], &rb)
		if err != nil {
			return cas.Hash{}, err
		}
		size, err := totalSize(es)
		if err != nil {
			return cas.Hash{}, err
		}
		dir := Entry{Name: name, Kind: KindDir, Hash: h, Size: size}
		if ok {
			es = slices.Clone(parent)
			es[k] = dir
		} else {
			es = slices.Insert(slices.Clone(parent), k, dir)
		}
	}
}

// Listed is an entry with its full path, as List returns it.
type Listed struct {
	Path Path `json:"path"`
	Entry
}

// List returns the entries below the directory p in the tree root, down to
// depth levels (1, or any depth <= 0, means the direct children), in
// depth-first pre-order with each directory's entries sorted by name; that
// is the order of paths compared segment by segment. If p is a file, List
// returns that file alone. It fails with wserr.FileNotFound if p does not
// exist.
func (t *Trees) List(ctx context.Context, tx *index.Tx, root cas.Hash, p Path, depth int) ([]Listed, error) {
	if depth <= 0 {
		depth = 1
	}
	e, err := t.lookup(ctx, tx, "list", root, p)
	if err != nil {
		return nil, err
	}
	if e.Kind != KindDir {
		return []Listed{{Path: p, Entry: e}}, nil
	}
	var out []Listed
	err = t.walk(ctx, tx, p, e.Hash, depth, Path{}, func(q Path, e Entry) error {
		out = append(out, Listed{Path: q, Entry: e})
		return nil
	})
	return out, err
}

// ListFunc calls fn, in List's order, for each entry List would return
// that comes after the path after (the zero Path: every one); fn
// returning fs.SkipAll ends the listing, and ListFunc then returns nil.
// Subtrees that lie wholly before after are not read. If p is a file,
// fn is called for it alone, when it comes after after.
func (t *Trees) ListFunc(ctx context.Context, tx *index.Tx, root cas.Hash, p Path, depth int, after Path, fn func(Listed) error) error {
	if depth <= 0 {
		depth = 1
	}
	e, err := t.lookup(ctx, tx, "list", root, p)
	if err != nil {
		return err
	}
	if e.Kind != KindDir {
		if cursorOf(p, after) == pastCursor {
			err = fn(Listed{Path: p, Entry: e})
		}
	} else {
		err = t.walk(ctx, tx, p, e.Hash, depth, after, func(q Path, e Entry) error { return fn(Listed{Path: q, Entry: e}) })
	}
	if errors.Is(err, fs.SkipAll) {
		return nil
	}
	return err
}

// ListPage returns one page of List's entries, and whether entries
// remain after it. A negative page.Limit is wserr.InvalidArgument.
func (t *Trees) ListPage(ctx context.Context, tx *index.Tx, root cas.Hash, p Path, depth int, page ListPage) ([]Listed, bool, error) {
	if err := page.Check("list", p); err != nil {
		return nil, false, err
	}
	var out []Listed
	more := false
	err := t.ListFunc(ctx, tx, root, p, depth, page.After, func(l Listed) error {
		if page.Limit > 0 && len(out) == page.Limit {
			more = true
			return fs.SkipAll
		}
		out = append(out, l)
		return nil
	})
	return out, more, err
}

// Walk calls fn for every entry of the tree root, depth-first in pre-order
// with each directory's entries sorted by name. As in fs.WalkDir, fn
// returning fs.SkipDir for a directory skips its contents, for a file skips
// the rest of the file's directory, and fs.SkipAll ends the walk; Walk then
// returns nil. Any other error from fn ends the walk and is returned.
func (t *Trees) Walk(ctx context.Context, tx *index.Tx, root cas.Hash, fn func(p Path, e Entry) error) error {
	err := t.walk(ctx, tx, Root(), root, -1, Path{}, fn)
	if errors.Is(err, fs.SkipAll) {
		return nil
	}
	return err
}

// walk visits the tree h at dir to depth levels (negative: all), passing
// over what comes no later than after (the zero Path: nothing), and
// returning fs.SkipAll unchanged for Walk to swallow.
func (t *Trees) walk(ctx context.Context, tx *index.Tx, dir Path, h cas.Hash, depth int, after Path, fn func(p Path, e Entry) error) error {
	if err := ctx.Err(); err != nil {
		return index.Translate(err)
	}
	es, err := t.load(ctx, tx, h)
	if err != nil {
		return err
	}
	if !after.IsRoot() && after.HasPrefix(dir) && after != dir {
		// The entries are sorted by name: start at the one the cursor
		// names at this level.
		seg, _, _ := strings.Cut(relativeTo(after, dir).s, "/")
		i, _ := slices.BinarySearchFunc(es, seg, func(e Entry, name string) int { return strings.Compare(e.Name, name) })
		es = es[i:]
	}
	for _, e := range es {
		p := childPath(dir, e.Name)
		switch cursorOf(p, after) {
		case beforeCursor:
			continue
		case intoCursor:
			if e.Kind == KindDir && depth != 1 {
				if err := t.walk(ctx, tx, p, e.Hash, depth-1, after, fn); err != nil {
					return err
				}
			}
			continue
		}
		after = Path{} // what follows comes after the cursor
		err := fn(p, e)
		switch {
		case errors.Is(err, fs.SkipDir) && e.Kind == KindDir:
			continue
		case errors.Is(err, fs.SkipDir):
			return nil
		case err != nil:
			return err
		}
		if e.Kind == KindDir && depth != 1 {
			if err := t.walk(ctx, tx, p, e.Hash, depth-1, Path{}, fn); err != nil {
				return err
			}
		}
	}
	return nil
}

// childPath joins a name read from a stored tree to p. Stored names passed
// checkEntry, so they need no second validation.
func childPath(p Path, name string) Path {
	if p.s == "" {
		return Path{s: name}
	}
	return Path{s: p.s + "/" + name}
}

// treeCache keeps decoded trees by address, up to about max entries in
// all (a tree counts one more than its entries). Trees are immutable, so
// a cached tree is never stale. It is two generations of maps rather than
// an exact LRU: a hit in the old generation moves the tree to the new one,
// and when the new one is full the old one is dropped, so trees used since
// the last turnover survive at a map lookup per hit.
type treeCache struct {
	mu       sync.Mutex
	half     int
	cur, old map[cas.Hash]node
	// size is what cur holds, in entries.
	size int
}

func newTreeCache(max int) treeCache {
	return treeCache{half: max / 2, cur: make(map[cas.Hash]node)}
}

func (c *treeCache) get(h cas.Hash) (node, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n, ok := c.cur[h]; ok {
		return n, true
	}
	n, ok := c.old[h]
	if ok {
		c.addLocked(h, n)
	}
	return n, ok
}

func (c *treeCache) add(h cas.Hash, n node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.addLocked(h, n)
}

func (c *treeCache) addLocked(h cas.Hash, n node) {
	if _, ok := c.cur[h]; ok {
		return
	}
	w := len(n.entries) + 1
	if c.size+w > c.half && c.size > 0 {
		c.old, c.cur, c.size = c.cur, make(map[cas.Hash]node, len(c.cur)), 0
	}
	c.cur[h] = n
	c.size += w
}

// FileTarget returns the hash of the file at p (zero when nothing is
// there), looked up by lookup (Trees.Lookup in one tree), for a change
// that would write a file at p, and refuses what Trees.Set would refuse
// of it: p a directory (wserr.PathIsDirectory) or below a file
// (wserr.NotADirectory). A change checks it before it reads content it
// would then have to refuse.
func FileTarget(op string, p Path, lookup func(Path) (Entry, error)) (cas.Hash, error) {
	if p.IsRoot() {
		return cas.Hash{}, wserr.New(wserr.PathIsDirectory, op, p.String(), "is the root; name a file below it")
	}
	switch e, err := lookup(p); {
	case err == nil && e.Kind == KindDir:
		return cas.Hash{}, wserr.New(wserr.PathIsDirectory, op, p.String(), "is a directory; remove it first to write a file there")
	case err == nil:
		return e.Hash, nil
	case !wserr.Is(err, wserr.FileNotFound):
		return cas.Hash{}, err
	}
	// Nothing there: the nearest of p's directories that exists must be
	// one.
	for q := p.Dir(); !q.IsRoot(); q = q.Dir() {
		e, err := lookup(q)
		switch {
		case wserr.Is(err, wserr.FileNotFound):
			continue
		case err != nil:
			return cas.Hash{}, err
		case e.Kind != KindDir:
			return cas.Hash{}, wserr.New(wserr.NotADirectory, op, p.String(), "%s is a file, not a directory", q)
		}
		break
	}
	return cas.Hash{}, nil
}
