package runs

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/checkpoint"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// checkpointTx records root, the run's live tree, as the run's next
// checkpoint, descending from parent, makes it the run's head, and holds
// the run to limit, its profile's MaxCheckpoints (newCheckpoint).
func (s *Service) checkpointTx(ctx context.Context, tx *index.Tx, runID string, caps runCaps, root cas.Hash, parent int64, reason string) (checkpoint.Checkpoint, error) {
	cp, err := s.newCheckpoint(ctx, tx, runID, caps, root, parent, reason, nil)
	if err != nil {
		return checkpoint.Checkpoint{}, err
	}
	if err := s.moveHead(ctx, tx, runID, root, cp.Seq, false); err != nil {
		return checkpoint.Checkpoint{}, err
	}
	return cp, nil
}

// runCaps is what holds a run's checkpoints in check: its profile (the
// count and byte caps it sets) and its chat (whose policy may set the
// byte cap). Callers pass what they already read of the run, so a
// checkpoint reads the run's row once.
type runCaps struct {
	chatID  string
	profile *Profile
	// chatPolicy is the chat's own policy row (Valid false: none) when
	// the caller read it with the run (findRunCaps), and storePolicy the
	// store's; nil: not read.
	chatPolicy, storePolicy *sql.NullString
}

// newCheckpoint records root as the run's next checkpoint, descending
// from parent, and holds the run to its caps (capCheckpoints). The caller
// moves the run's head to it. known are stored sizes of versions read in
// tx since the blobs last changed (checkpoint.Store.Create); before are
// the change's own events, appended before the checkpoint's, two to a
// statement.
func (s *Service) newCheckpoint(ctx context.Context, tx *index.Tx, runID string, caps runCaps, root cas.Hash, parent int64, reason string, known []cas.Sized, before ...journal.Entry) (checkpoint.Checkpoint, error) {
	p, err := s.checkpoints.Plan(ctx, tx, runID, root, parent, reason, known...)
	if err != nil {
		return checkpoint.Checkpoint{}, err
	}
	evs, err := s.journal.AppendEntries(ctx, tx, runID, append(before, p.Event)...)
	if err != nil {
		return checkpoint.Checkpoint{}, err
	}
	cp, err := s.checkpoints.Insert(ctx, tx, p, evs[len(evs)-1].Seq)
	if err != nil {
		return checkpoint.Checkpoint{}, err
	}
	if err := s.capCheckpoints(ctx, tx, runID, caps, cp.Seq); err != nil {
		return checkpoint.Checkpoint{}, err
	}
	return cp, nil
}

// capCheckpoints holds the run to limit checkpoints (its profile's
// MaxCheckpoints; 0: no cap) right after checkpoint keep was created in
// tx: the oldest go, but never keep nor one a commit refers to, and a
// checkpoints_pruned event, after keep's checkpoint_created, and a
// deletion-log entry name them (the first MaxPrunedCheckpointIDs) and
// count them. Every checkpoint a run takes, explicit or automatic, passes here.
func (s *Service) capCheckpoints(ctx context.Context, tx *index.Tx, runID string, caps runCaps, keep int64) error {
	limit := caps.profile.MaxCheckpoints
	seqs, err := s.checkpoints.Prune(ctx, tx, runID, limit, keep, commitPins)
	if err != nil {
		return err
	}
	if len(seqs) > 0 {
		if _, err := s.recordPruned(ctx, tx, caps.chatID, "maxCheckpoints", int64(limit), prunedCheckpoints(runID, seqs, 0)); err != nil {
			return err
		}
	}
	return s.capBytes(ctx, tx, runID, caps, keep)
}

// commitPins is a checkpoint.Pinned: a commit row names the checkpoint its
// message was assembled from, and a host may ask for that tree again (a
// rollback of the commit, an audit), so a cap never deletes it. It reads
// the run's commits, which are few: one per commit or commit rollback.
func commitPins(ctx context.Context, tx *index.Tx, runID string) ([]int64, error) {
	var seqs []int64
	if err := tx.SelectContext(ctx, &seqs, `SELECT DISTINCT checkpoint_seq FROM commits WHERE run_id = ?`, runID); err != nil {
		return nil, index.Translate(err)
	}
	return seqs, nil
}

// Checkpoint records the run's live workspace as a new checkpoint: one
// checkpoint row and one checkpoint_created event, whatever the workspace's
// size. If that takes the run past its profile's MaxCheckpoints, the
// oldest checkpoints no commit refers to are deleted in the same
// transaction and a checkpoints_pruned event names them (the first
// MaxPrunedCheckpointIDs) and counts them. It fails with
// run.not_found, or run.invalid_transition for a run that has finished.
func (s *Service) Checkpoint(ctx context.Context, runID, reason string) (checkpoint.Checkpoint, error) {
	var cp checkpoint.Checkpoint
	err := s.UpdateInRoom(ctx, func(tx *index.Tx) error {
		run, caps, err := findRunCaps(ctx, tx, runID)
		if err != nil {
			return err
		}
		if run.Status.Final() {
			return wserr.New(wserr.InvalidState, "checkpoint", "", "run %s is %s", runID, run.Status)
		}
		room := s.roomCheck(ctx, tx, "checkpoint", &caps)
		room.grow()
		if cp, err = s.checkpointTx(ctx, tx, runID, caps, run.Root, run.HeadCheckpoint, reason); err != nil {
			return err
		}
		return room.settle(ctx, tx)
	})
	return cp, err
}

// RollbackOptions shape a rollback.
type RollbackOptions struct {
	// Pause moves a running run to paused; otherwise the
	// status stays as it is.
	Pause bool
}

// Rollback makes checkpoint seq's tree the run's live workspace: one
// pointer swap on the run's row and a workspace_rolled_back event, whatever
// the workspace's size. Nothing is deleted: later checkpoints stay
// readable (a run's MaxCheckpoints prunes them before seq and its
// ancestors), and the next checkpoint records seq as its parent, so
// history forks. The chat is not touched. It fails with checkpoint.not_found, or
// run.invalid_transition unless the run is running, awaiting approval or
// paused.
func (s *Service) Rollback(ctx context.Context, runID string, seq int64, opt RollbackOptions) (Run, error) {
	var out Run
	err := s.update(ctx, func(tx *index.Tx) error {
		run, err := findRun(ctx, tx, runID)
		if err != nil {
			return err
		}
		if !run.Status.Active() {
			return wserr.New(wserr.InvalidState, "rollback", "", "run %s is %s: only running, awaiting_approval or paused runs roll back", runID, run.Status)
		}
		cp, err := s.checkpoints.Get(ctx, tx, runID, seq)
		if err != nil {
			return err
		}
		if err := s.moveHead(ctx, tx, runID, cp.Root, cp.Seq, true); err != nil {
			return err
		}
		// The tree left behind is garbage unless a checkpoint holds it; a
		// rollback to the workspace as it is leaves none behind.
		if run.Root != cp.Root {
			if err := s.trees.Orphaned(ctx, tx, run.Root); err != nil {
				return err
			}
		}
		if _, err := s.journal.Append(ctx, tx, runID, journal.WorkspaceRolledBack, journal.Info,
			journal.RolledBack{CheckpointID: cp.ID, Root: cp.Root.String(), PrevRoot: run.Root.String()}); err != nil {
			return err
		}
		if opt.Pause && run.Status != Paused {
			if err := s.setStatus(ctx, tx, runID, run.Status, Paused, "rollback to "+cp.ID); err != nil {
				return err
			}
		}
		out, err = findRun(ctx, tx, runID)
		return err
	})
	return out, err
}

// Live names the live workspace where a checkpoint sequence number is
// expected (Diff's from and to): checkpoints are numbered from 1.
const Live int64 = 0

// DiffOptions bound what Service.Diff returns.
type DiffOptions struct {
	// MaxBytes caps the unified text of the response (0:
	// checkpoint.DefaultDiffMaxBytes); what it leaves out is marked with
	// FileDiff.Truncated.
	MaxBytes int
}

// Diff returns the file changes from checkpoint from to checkpoint to
// (either Live: the live workspace), with unified diffs for text files
// within opts.MaxBytes. It holds every change; DiffPage and DiffFunc
// answer a diff of any size in bounded memory. It fails with
// checkpoint.not_found, run.not_found or, for a negative seq or
// MaxBytes, workspace.invalid_argument; with store.corrupt when a file's
// content or a tree the diff reads is missing from the store, and with
// store.conflict when the live workspace changed while it was read and a
// gc collected what it had (diff again).
func (s *Service) Diff(ctx context.Context, runID string, from, to int64, opts DiffOptions) ([]checkpoint.FileDiff, error) {
	out, _, err := s.DiffPage(ctx, runID, from, to, opts, vfs.ListPage{})
	return out, err
}

// DiffPage returns one page of Diff's files: those whose paths come after
// page.After, at most page.Limit (0: all), and whether files remain after
// it; opts.MaxBytes caps the page's text. It fails as Diff does.
func (s *Service) DiffPage(ctx context.Context, runID string, from, to int64, opts DiffOptions, page vfs.ListPage) ([]checkpoint.FileDiff, bool, error) {
	a, b, err := s.diffRoots(ctx, runID, from, to)
	if err != nil {
		return nil, false, err
	}
	out, more, err := s.checkpoints.DiffPage(ctx, a, b, checkpoint.DiffOptions{Text: true, MaxBytes: opts.MaxBytes}, page)
	if err != nil {
		return nil, false, s.diffMissing(ctx, runID, from, to, a, b, err)
	}
	return out, more, nil
}

// DiffFunc calls fn with each of Diff's files in path order, holding none
// of them; opts.MaxBytes caps the text of them all. fn returning
// fs.SkipAll ends the diff (nil); its other errors end it and are
// returned. It fails as Diff does.
func (s *Service) DiffFunc(ctx context.Context, runID string, from, to int64, opts DiffOptions, fn func(checkpoint.FileDiff) error) error {
	a, b, err := s.diffRoots(ctx, runID, from, to)
	if err != nil {
		return err
	}
	var fnErr error
	err = s.checkpoints.DiffFunc(ctx, a, b, checkpoint.DiffOptions{Text: true, MaxBytes: opts.MaxBytes}, vfs.Path{}, func(d checkpoint.FileDiff) error {
		fnErr = fn(d)
		return fnErr
	})
	if err == nil || (fnErr != nil && errors.Is(err, fnErr)) {
		return err
	}
	return s.diffMissing(ctx, runID, from, to, a, b, err)
}

// diffMissing judges err, from diffing trees a and b, the roots of run
// runID's from and to: something not found in the store is lost from it
// (store.corrupt) while from and to still have those roots; if the run or
// a checkpoint went meanwhile, their own not-found error; if the live
// workspace moved on (and a gc collected what it had), store.conflict.
// Other errors are returned as they are.
func (s *Service) diffMissing(ctx context.Context, runID string, from, to int64, a, b cas.Hash, err error) error {
	if wserr.CodeOf(err) != wserr.NotFound {
		return err
	}
	na, nb, rerr := s.diffRoots(context.WithoutCancel(ctx), runID, from, to)
	switch {
	case wserr.Is(rerr, wserr.RunNotFound) || wserr.Is(rerr, wserr.CheckpointNotFound):
		return wserr.New(wserr.CodeOf(rerr), "diff", "", "%s, deleted while it was being diffed", wserr.MessageOf(rerr))
	case rerr != nil:
		return rerr
	case na == a && nb == b:
		return wserr.Wrap(wserr.Corrupt, "diff", "", fmt.Errorf("content the diff reads is missing from the store (wsctl fsck names each missing object): %w", err))
	}
	return wserr.New(wserr.Conflict, "diff", "", "the live workspace changed while it was being diffed, and a gc collected what it had: diff again")
}

// diffRoots returns the trees of run runID's checkpoints from and to
// (Live: the live workspace).
func (s *Service) diffRoots(ctx context.Context, runID string, from, to int64) (a, b cas.Hash, err error) {
	err = s.db.View(ctx, func(tx *index.Tx) error {
		run, err := findRun(ctx, tx, runID)
		if err != nil {
			return err
		}
		root := func(seq int64) (cas.Hash, error) {
			if seq == Live {
				return run.Root, nil
			}
			cp, err := s.checkpoints.Get(ctx, tx, runID, seq)
			return cp.Root, err
		}
		if a, err = root(from); err != nil {
			return err
		}
		b, err = root(to)
		return err
	})
	return a, b, err
}

// caps returns what holds the run's checkpoints in check.
func (r *Run) caps() runCaps { return runCaps{chatID: r.ChatID, profile: &r.Profile} }
