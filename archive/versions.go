package archive

import (
	"context"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// A store keeps the older versions of a run's file as deltas against newer
// ones, built as each write replaces a version (cas/delta.go); an archive
// carries every version whole, and Import stores them so. So that an
// imported history ends up stored as if it had been written here, Import
// queues, for every run it adds, one re-encoding per file that differs
// between two consecutive states, in the archive's order: a checkpoint
// against the one it was taken after, then the run's live tree against
// its head checkpoint. The jobs commit with the rows; the store's
// background step, or its Close, runs them, each bounded as a write's is,
// so the import itself holds no version in memory for them. Actor spaces
// store every uploaded version whole (a stream, never a delta), and so do
// their imports.

// reencoder is what Blobs can do beyond streaming: queue the re-encoding
// of prev as a delta against h, as a write of h over prev would;
// *cas.Store implements it. Over Blobs without it, imported versions
// stay whole.
type reencoder interface {
	QueueReencode(ctx context.Context, tx *index.Tx, h, prev cas.Hash) error
}

// lineage is the order of the states of the run being imported. It keeps
// the last checkpoint's root, the parent of the next as a rule, and reads
// any other from the checkpoint rows written so far in the import's
// transaction, so what it holds does not grow with the run.
type lineage struct {
	run      string
	live     cas.Hash // the live tree, queued against head once the checkpoints are in
	head     int64    // the head checkpoint
	lastSeq  int64
	lastRoot cas.Hash
}

// startRun begins the lineage of run r, which the import adds.
func (im *importer) startRun(r runs.RunRecord) {
	im.lin = &lineage{run: r.ID, live: r.Root, head: r.HeadCheckpoint}
}

// root returns the root of the lineage's checkpoint seq, and false if the
// run has no such checkpoint (yet).
func (im *importer) root(ctx context.Context, tx *index.Tx, seq int64) (cas.Hash, bool, error) {
	if seq < 1 {
		return cas.Hash{}, false, nil
	}
	if seq == im.lin.lastSeq {
		return im.lin.lastRoot, true, nil
	}
	c, err := im.a.p.Checkpoints.Get(ctx, tx, im.lin.run, seq)
	if wserr.Is(err, wserr.CheckpointNotFound) {
		return cas.Hash{}, false, nil
	}
	return c.Root, err == nil, err
}

// checkpointVersions queues the files checkpoint seq (root, taken after
// parent) changed.
func (im *importer) checkpointVersions(ctx context.Context, tx *index.Tx, seq, parent int64, root cas.Hash) error {
	if im.lin == nil {
		return nil
	}
	prev, ok, err := im.root(ctx, tx, parent)
	im.lin.lastSeq, im.lin.lastRoot = seq, root
	if err != nil || !ok || parent == seq {
		return err
	}
	return im.queueChanged(ctx, tx, prev, root)
}

// endLineage queues the run's live tree against its head checkpoint and
// ends the lineage.
func (im *importer) endLineage(ctx context.Context, tx *index.Tx) error {
	lin := im.lin
	if lin == nil {
		return nil
	}
	prev, ok, err := im.root(ctx, tx, lin.head)
	im.lin = nil
	if err != nil {
		return err
	}
	if !ok && lin.head != 0 {
		return corrupt("records: run %s: its head names checkpoint %d, which the archive does not hold", lin.run, lin.head)
	}
	if ok {
		return im.queueChanged(ctx, tx, prev, lin.live)
	}
	return nil
}

// queueChanged queues, for every file at the same path below both trees
// with other content in cur than in old, the re-encoding of old's version
// against cur's. Subtrees the two share are not read.
func (im *importer) queueChanged(ctx context.Context, tx *index.Tx, old, cur cas.Hash) error {
	q, ok := im.a.p.Blobs.(reencoder)
	if !ok || old.IsZero() || cur.IsZero() || old == cur {
		return nil
	}
	was, err := im.a.p.Trees.Entries(ctx, tx, old)
	if err != nil {
		return err
	}
	now, err := im.a.p.Trees.Entries(ctx, tx, cur)
	if err != nil {
		return err
	}
	byName := make(map[string]vfs.Entry, len(was))
	for _, e := range was {
		byName[e.Name] = e
	}
	for _, e := range now {
		o, ok := byName[e.Name]
		if !ok || o.Kind != e.Kind || o.Hash == e.Hash {
			continue
		}
		switch e.Kind {
		case vfs.KindFile:
			err = q.QueueReencode(ctx, tx, e.Hash, o.Hash)
		case vfs.KindDir:
			err = im.queueChanged(ctx, tx, o.Hash, e.Hash)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
