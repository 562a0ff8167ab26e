package maint

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// Stats describes a store's size: rows, logical bytes, stored bytes and
// the ratios between them.
type Stats struct {
	Chats       int64 `json:"chats"`
	Runs        int64 `json:"runs"`
	Checkpoints int64 `json:"checkpoints"`
	Events      int64 `json:"events"`
	Blobs       int64 `json:"blobs"`
	Chunks      int64 `json:"chunks"`
	Trees       int64 `json:"trees"`
	// BlobLogicalBytes is the plain size of every distinct content, each
	// counted once (sum of blobs.size).
	BlobLogicalBytes int64 `json:"blobLogicalBytes"`
	// StoredBytes is what the rows hold: blobs.stored + chunks.stored +
	// the encoded trees.
	StoredBytes int64 `json:"storedBytes"`
	// ContentStoredBytes is the part of StoredBytes that file contents
	// take: blobs.stored + chunks.stored, what CompressionRatio divides by.
	ContentStoredBytes int64 `json:"contentStoredBytes"`
	// TreeStoredBytes is the part of StoredBytes the encoded trees take.
	TreeStoredBytes int64 `json:"treeStoredBytes"`
	// ReferencedBytes is the logical size as the workspaces see it: the
	// total size of every checkpoint's tree, every live run root's, every
	// run's records tree, every chat's persist tree, every actor space
	// and each of its versions still held, shared content counted each
	// time it is seen.
	ReferencedBytes int64 `json:"referencedBytes"`
	// DedupRatio is ReferencedBytes / BlobLogicalBytes (0 with no blobs).
	DedupRatio float64 `json:"dedupRatio"`
	// CompressionRatio is BlobLogicalBytes over the bytes blobs and chunks
	// hold (0 when they hold none).
	CompressionRatio float64 `json:"compressionRatio"`
	// FileBytes is the size of the database file plus its write-ahead log.
	FileBytes int64 `json:"fileBytes"`
	// UsedBytes is what the database's pages in use hold (its free pages
	// left out): what the store cap (maxStoreBytes) is measured against.
	// Above StoredBytes by the rows' other columns, the other tables, the
	// indexes and the pages' free space.
	UsedBytes int64 `json:"usedBytes"`
	// ByCodec counts blobs by codec name ("raw", "zstd", "chunked",
	// "delta").
	ByCodec map[string]int64 `json:"byCodec"`
	// DeltaSavedBytes is what delta encoding saved: the stored bytes the
	// delta blobs held whole, less what they hold as deltas.
	DeltaSavedBytes int64 `json:"deltaSavedBytes"`
}

// Stats counts the store's rows and bytes. ReferencedBytes reads only the
// top tree of each root (a directory entry carries the total size below
// it), so Stats costs one small read per distinct root, not a walk. It
// fails with store.corrupt if a root tree is missing or does not decode.
func (m *Maintainer) Stats(ctx context.Context) (Stats, error) {
	st := Stats{ByCodec: map[string]int64{}}
	err := m.p.DB.View(ctx, func(tx *index.Tx) error {
		var err error
		if st.UsedBytes, err = tx.UsedBytes(ctx); err != nil {
			return err
		}
		err = m.p.Events.EachRunEvents(ctx, tx, func(_ string, n int64) error {
			st.Events += n
			return nil
		})
		if err != nil {
			return err
		}
		var treesStored int64
		if st.Trees, treesStored, err = m.p.Trees.TreeUsage(ctx, tx); err != nil {
			return err
		}
		u, err := m.p.Blobs.Usage(ctx, tx)
		if err != nil {
			return err
		}
		var blobsStored int64
		for _, c := range u.ByCodec {
			st.DeltaSavedBytes += c.Saved
			st.ByCodec[c.Codec.String()] = c.Blobs
			st.Blobs += c.Blobs
			st.BlobLogicalBytes += c.Size
			blobsStored += c.Stored
		}
		st.Chunks = u.Chunks
		st.ContentStoredBytes, st.TreeStoredBytes = blobsStored+u.ChunksStored, treesStored
		st.StoredBytes = st.ContentStoredBytes + st.TreeStoredBytes
		if st.ContentStoredBytes > 0 {
			st.CompressionRatio = float64(st.BlobLogicalBytes) / float64(st.ContentStoredBytes)
		}

		g, err := m.newGraph(ctx, tx)
		if err != nil {
			return err
		}
		defer g.close()
		sizes := map[cas.Hash]int64{}
		// Every root a view of files reads: checkpoints, live runs, their
		// records, chats' persist trees, actor space versions. The error
		// is for the first of them, in that order of kinds, that is
		// missing or does not decode: one kept for each kind as the roots
		// come.
		kinds := []string{"checkpoint", "run", "records", "chat", "actor"}
		failed := make([]error, len(kinds))
		err = m.eachRoot(ctx, tx, func(r *rootRef) error {
			switch r.Kind {
			case "chat":
				st.Chats++
			case "run":
				st.Runs++
			case "checkpoint":
				st.Checkpoints++
			}
			k := slices.Index(kinds, r.Kind)
			if k < 0 {
				return nil
			}
			n, ok := sizes[r.Hash]
			if !ok {
				if len(sizes) >= memoMax {
					clear(sizes) // a memo, bounded: a re-read costs a row
				}
				es, _, found, err := g.entries(r.Hash)
				if err == nil && !found {
					err = wserr.New(wserr.Corrupt, "stats", "", "root tree %s is missing: run fsck", r.Hash)
				}
				if wserr.Is(err, wserr.Corrupt) {
					if failed[k] == nil {
						failed[k] = err
					}
					return nil
				}
				if err != nil {
					return err
				}
				for _, e := range es {
					n += e.Size
				}
				sizes[r.Hash] = n
			}
			st.ReferencedBytes += n
			return nil
		})
		if err != nil {
			return err
		}
		for _, err := range failed {
			if err != nil {
				return err
			}
		}
		if st.BlobLogicalBytes > 0 {
			st.DedupRatio = float64(st.ReferencedBytes) / float64(st.BlobLogicalBytes)
		}
		return nil
	})
	if err != nil {
		return Stats{}, fmt.Errorf("stats: %w", err)
	}
	if st.FileBytes, err = m.p.DB.FileBytes(); err != nil {
		return Stats{}, fmt.Errorf("stats: %w", err)
	}
	return st, nil
}

// Usage is the space one run, or one chat's persist layer, takes.
type Usage struct {
	ChatID string `json:"workspaceId"`
	// RunID is empty on a chat's own row, which describes its persist
	// layer.
	RunID string `json:"runId,omitempty"`
	// Files and LogicalBytes describe the live workspace (for a chat's
	// row, the persist layer): files and their total plain size.
	Files        int64 `json:"files"`
	LogicalBytes int64 `json:"logicalBytes"`
	Checkpoints  int64 `json:"checkpoints"`
	// UniqueStoredBytes is the stored size of the blobs, chunks and trees
	// that only this run's roots reach (live root, checkpoints, persist
	// base) — what deleting the run and collecting garbage would free. On
	// a chat's row, what only the persist layer reaches.
	UniqueStoredBytes int64 `json:"uniqueStoredBytes"`
}

// DU reports space by chat workspace and run, handing fn each row as it
// is counted, in one read transaction: for each chat, ordered by chat id,
// a row for its persist layer (RunID "") followed by one row per run,
// ordered by run id. It holds no list of the rows, so a caller that prints
// them as they come holds one. It walks every root's objects once or
// twice, so it costs about as much as GC's mark. It fails with
// store.corrupt if a reachable object is missing or a tree does not
// decode, and with fn's error, which ends it.
func (m *Maintainer) DU(ctx context.Context, fn func(Usage) error) error {
	err := m.p.DB.View(ctx, func(tx *index.Tx) error {
		_, err := m.du(ctx, tx, UsageKey{}, -1, fn)
		return err
	})
	if err != nil {
		return fmt.Errorf("du: %w", err)
	}
	return nil
}

// UsageKey names a row of DU: its chat and run ("" for the chat's persist
// row). Rows come in the order of their keys, by chat id, then run id.
type UsageKey struct {
	ChatID string `json:"workspaceId"`
	RunID  string `json:"runId,omitempty"`
}

// DefaultUsagePage and MaxUsagePage are the default and the largest
// limit of a DUPage, those of a page of runs.
const (
	DefaultUsagePage = 1000
	MaxUsagePage     = 10000
)

// DUPage is DU a page at a time: the first limit rows (0:
// DefaultUsagePage) whose key comes after after (the last row of the page
// before; the zero UsageKey: from the first row), and whether rows follow
// them. A key no row has any more (a run deleted since) is no error: the
// page starts where it stood. Each page walks the store as DU does (its
// unique bytes need every root), but counts files only for its own rows
// and holds no more rows than it returns. It fails as DU does, and with
// workspace.invalid_argument for a limit past MaxUsagePage or negative.
func (m *Maintainer) DUPage(ctx context.Context, after UsageKey, limit int) ([]Usage, bool, error) {
	if limit < 0 || limit > MaxUsagePage {
		return nil, false, wserr.New(wserr.InvalidArgument, "du", "", "limit must be in 0..%d (0: %d), not %d", MaxUsagePage, DefaultUsagePage, limit)
	}
	if limit == 0 {
		limit = DefaultUsagePage
	}
	page := make([]Usage, 0, min(limit, 64))
	var more bool
	err := m.p.DB.View(ctx, func(tx *index.Tx) error {
		page = page[:0]
		var err error
		more, err = m.du(ctx, tx, after, limit, func(u Usage) error {
			page = append(page, u)
			return nil
		})
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("du: %w", err)
	}
	return page, more, nil
}

// shared marks an object reached from more than one owner in DU.
const shared = -1

// memoMax bounds the memos Stats and DU keep of what they read of a tree
// (its size, its file count), so their memory does not grow with the
// store; past it a memo starts again, which costs re-reads, never
// correctness.
const memoMax = 1 << 14

// du hands fn the rows whose key comes after after, at most limit of them
// (negative: every one), and reports whether rows follow those.
func (m *Maintainer) du(ctx context.Context, tx *index.Tx, after UsageKey, limit int, fn func(Usage) error) (bool, error) {
	g, err := m.newGraph(ctx, tx)
	if err != nil {
		return false, err
	}
	defer g.close()
	w := newWork(ctx)
	defer w.close()

	// An owner is a run (its live root, checkpoints and persist base) or
	// a chat's persist layer, numbered as the roots come (rootRef.owner).
	// Each object ends labelled with its only owner or with shared. A walk
	// stops at an object already labelled with its own owner or shared,
	// and goes on through one labelled with another owner, relabelling it
	// and all below it shared; so each object is visited at most twice.
	label := w.newMap()
	labelled := ObjectCounts{}
	// merge labels o with owner l, or shared if another owner labelled it,
	// and reports whether its label changed.
	merge := func(o object, l int64) (bool, error) {
		switch old, ok, err := label.get(o); {
		case err != nil:
			return false, err
		case !ok:
			labelled.add(o.kind)
			return true, label.set(o, l)
		case old == l || old == shared:
			return false, nil
		default:
			return true, label.set(o, shared)
		}
	}
	// Trees are read as the walks reach them; blobs in the pass over
	// their rows below, which hands each blob's label to its delta base
	// and chunks.
	g.leafBlobs = true
	err = m.eachRoot(ctx, tx, func(r *rootRef) error {
		visit := func(o object) (bool, error) { return merge(o, r.owner) }
		return g.walk([]step{r.step()}, visit, badIsCorrupt("du"))
	})
	if err != nil {
		return false, err
	}
	g.leafBlobs = false
	// spread hands blob h's label l to what it references; a base of a
	// later hash gets it from the pass in its turn, one passed already
	// from here.
	var spread func(h, base cas.Hash, chunks []cas.Hash, l int64) error
	spread = func(h, base cas.Hash, chunks []cas.Hash, l int64) error {
		for _, c := range chunks {
			if _, err := merge(object{objChunk, c}, l); err != nil {
				return err
			}
		}
		if base.IsZero() {
			return nil
		}
		changed, err := merge(object{objBlob, base}, l)
		if err != nil || !changed || bytes.Compare(base[:], h[:]) > 0 {
			return err
		}
		nl, _, err := label.get(object{objBlob, base})
		if err != nil {
			return err
		}
		_, bb, bc, ok, err := g.blobRefs(base)
		if err != nil || !ok {
			return err // a missing base fails the count below
		}
		return spread(base, bb, bc, nl)
	}
	err = m.p.Blobs.EachBlobRecord(ctx, tx, func(r cas.BlobRecord) error {
		l, ok, err := label.get(object{objBlob, r.Hash})
		if err != nil || !ok {
			return err
		}
		return spread(r.Hash, r.Base, r.Chunks, l)
	})
	if err != nil {
		return false, err
	}
	// unique holds the stored bytes only one owner reaches, by owner.
	unique := w.sets.NewMap()
	var stored ObjectCounts
	err = m.eachRow(ctx, tx, func(o object, r rowMeta, _ *cas.BlobRecord) error {
		l, ok, err := label.get(o)
		if err != nil || !ok {
			return err
		}
		stored.add(o.kind)
		if l == shared {
			return nil
		}
		n, _, err := unique.Get(ownerKey(l))
		if err != nil {
			return err
		}
		return unique.Set(ownerKey(l), n+r.stored)
	})
	if err != nil {
		return false, err
	}
	// A labelled blob or chunk the rows did not hold is missing.
	if stored.Blobs != labelled.Blobs || stored.Chunks != labelled.Chunks {
		return false, m.missingReachable(ctx, tx, g, "du")
	}

	// Files and size of each live root (a chat's persist root for its
	// row), counted per path: a subtree that appears twice counts twice.
	files := map[cas.Hash]int64{}
	var count func(h cas.Hash) (int64, error)
	count = func(h cas.Hash) (int64, error) {
		if n, ok := files[h]; ok {
			return n, nil
		}
		if len(files) >= memoMax {
			clear(files) // a memo, bounded: a re-read costs a row
		}
		es, _, _, err := g.entries(h)
		if err != nil {
			return 0, err
		}
		var n int64
		for _, e := range es {
			if e.Kind != vfs.KindDir {
				n++
				continue
			}
			m, err := count(e.Hash)
			if err != nil {
				return 0, err
			}
			n += m
		}
		files[h] = n
		return n, nil
	}
	// Workspaces come ordered by chat and run, and a chat's row has run
	// "": the rows come in their order, and those up to after are passed
	// by uncounted.
	n, more := 0, false
	err = m.eachWorkspace(ctx, tx, func(ws workspace) error {
		if c := strings.Compare(ws.chat, after.ChatID); c < 0 || c == 0 && ws.run <= after.RunID {
			return nil
		}
		if limit >= 0 && n == limit {
			more = true
			return errPageFull
		}
		u := Usage{ChatID: ws.chat, RunID: ws.run}
		var err error
		if ws.run != "" {
			if u.Checkpoints, err = m.p.Checkpoints.Count(ctx, tx, ws.run); err != nil {
				return err
			}
		}
		if u.UniqueStoredBytes, _, err = unique.Get(ownerKey(ws.owner)); err != nil {
			return err
		}
		es, _, _, err := g.entries(ws.root)
		if err != nil {
			return err
		}
		for _, e := range es {
			u.LogicalBytes += e.Size
		}
		if u.Files, err = count(ws.root); err != nil {
			return err
		}
		if err := fn(u); err != nil {
			return err
		}
		n++
		return nil
	})
	if err != nil && !errors.Is(err, errPageFull) {
		return false, err
	}
	return more, nil
}

// errPageFull ends a pass over the workspaces once a page of DU holds
// its rows.
var errPageFull = errors.New("page full")

// ownerKey is owner l as a key of a work set.
func ownerKey(l int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(l)) }
