package runs

import (
	"context"
	"slices"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// ScratchRoot is the run's scratch domain: writable and checkpointed
// while the run is active (when the profile makes it writable), never
// exported by a checkout, never committed, and collected when the run
// ends unless the profile keeps it.
const ScratchRoot = "scratch"

// KeepScratch says, per final status, whether an ended run keeps its
// scratch/. A nil field takes the default of seed 000 §11: a completed
// run's scratch is collected, a failed or cancelled run's is kept for
// debugging.
type KeepScratch struct {
	Completed *bool `json:"completed,omitempty"` // default false
	Failed    *bool `json:"failed,omitempty"`    // default true
	Cancelled *bool `json:"cancelled,omitempty"` // default true
}

// keepsScratch reports whether a run ending in status to keeps scratch/.
func (p Profile) keepsScratch(to Status) bool {
	var k KeepScratch
	if p.KeepScratch != nil {
		k = *p.KeepScratch
	}
	pick := func(b *bool, def bool) bool {
		if b == nil {
			return def
		}
		return *b
	}
	switch to {
	case Completed:
		return pick(k.Completed, false)
	case Failed:
		return pick(k.Failed, true)
	case Cancelled:
		return pick(k.Cancelled, true)
	}
	return true
}

var scratchPath = vfs.MustPath(ScratchRoot)

// collectScratch removes scratch/ from the ended run's live workspace and
// from every one of its checkpoints, in tx (the one that records the
// final status), unless the profile keeps it, and journals
// scratch_collected with what the live scratch/ held. Rewriting the
// checkpoints' roots is what lets gc free the bytes: a checkpoint root
// that still named the scratch trees would keep them reachable. So a
// checkpoint of an ended run reads scratch/ as it reads a root that never
// held a file: empty, when the profile shows it. The cost is one tree update and one row update per distinct
// checkpoint root, bounded by the run's checkpoints. Nothing is recorded
// when no root held scratch/.
func (s *Service) collectScratch(ctx context.Context, tx *index.Tx, runID string, to Status) error {
	run, err := findRun(ctx, tx, runID)
	if err != nil {
		return err
	}
	if run.Profile.keepsScratch(to) {
		return nil
	}
	// A root without scratch/ is stored as the next version of the root
	// rewritten before it (the first whole), never as a patch against the
	// root with scratch/: that would keep the old root, and so the
	// scratch tree, named by a stored row.
	var prev cas.Hash
	without := func(root cas.Hash) (cas.Hash, bool, error) {
		es, err := s.trees.Entries(ctx, tx, root)
		if err != nil {
			return cas.Hash{}, false, err
		}
		i := slices.IndexFunc(es, func(e vfs.Entry) bool { return e.Name == ScratchRoot })
		if i < 0 {
			return root, false, nil
		}
		es = slices.Delete(es, i, i+1)
		var next cas.Hash
		if prev.IsZero() {
			next, err = s.trees.Put(ctx, tx, es)
		} else {
			next, err = s.trees.PutNext(ctx, tx, es, prev)
		}
		if err == nil {
			prev = next
		}
		return next, true, err
	}
	var payload journal.Collected
	payload.Status = string(to)
	if e, err := s.trees.Lookup(ctx, tx, run.Root, scratchPath); err == nil {
		payload.Bytes = e.Size
		if e.Kind == vfs.KindDir {
			err = s.trees.Walk(ctx, tx, e.Hash, func(_ vfs.Path, e vfs.Entry) error {
				if e.Kind == vfs.KindFile {
					payload.Files++
				}
				return nil
			})
		} else {
			payload.Files = 1
		}
		if err != nil {
			return err
		}
	} else if !wserr.Is(err, wserr.FileNotFound) {
		return err
	}
	root, live, err := without(run.Root)
	if err != nil {
		return err
	}
	n, err := s.checkpoints.RewriteRoots(ctx, tx, runID, func(r cas.Hash) (cas.Hash, error) {
		next, _, err := without(r)
		return next, err
	})
	if err != nil {
		return err
	}
	if !live && n == 0 {
		return nil
	}
	payload.Checkpoints, payload.Root, payload.PrevRoot = n, root.String(), run.Root.String()
	if err := s.moveHead(ctx, tx, runID, root, run.HeadCheckpoint, false); err != nil {
		return err
	}
	if live {
		if err := s.trees.Orphaned(ctx, tx, run.Root); err != nil {
			return err
		}
	}
	if _, err = s.journal.Append(ctx, tx, runID, journal.ScratchCollected, journal.Info, payload); err != nil {
		return err
	}
	_, err = s.logDeletion(ctx, tx, DeletedScratch, run.ChatID, runID, "scratch collected at "+string(to),
		map[string]any{"files": payload.Files, "bytes": payload.Bytes, "checkpoints": n}, 0)
	return err
}
