package runs

import (
	"context"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/checkpoint"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// TreeRef names a workspace tree of a run: checkpoint Seq, or the live
// workspace when Seq is 0.
type TreeRef struct {
	RunID string
	Seq   int64
}

// DiffRuns returns the file changes from tree from to tree to, which may
// belong to different runs, so that the runs of one chat can be compared
// (seed 000 §2.2), with unified diffs for text files within
// opts.MaxBytes. It holds every change; DiffRunsPage answers a page. It
// fails with run.not_found, checkpoint.not_found or, for a negative
// MaxBytes, workspace.invalid_argument.
func (s *Service) DiffRuns(ctx context.Context, from, to TreeRef, opts DiffOptions) ([]checkpoint.FileDiff, error) {
	out, _, err := s.DiffRunsPage(ctx, from, to, opts, vfs.ListPage{})
	return out, err
}

// DiffRunsPage returns one page of DiffRuns' files: those whose paths
// come after page.After, at most page.Limit (0: all), and whether files
// remain after it; opts.MaxBytes caps the page's text.
func (s *Service) DiffRunsPage(ctx context.Context, from, to TreeRef, opts DiffOptions, page vfs.ListPage) ([]checkpoint.FileDiff, bool, error) {
	var a, b cas.Hash
	err := s.db.View(ctx, func(tx *index.Tx) error {
		var err error
		if a, err = s.treeOf(ctx, tx, from); err != nil {
			return err
		}
		b, err = s.treeOf(ctx, tx, to)
		return err
	})
	if err != nil {
		return nil, false, err
	}
	return s.checkpoints.DiffPage(ctx, a, b, checkpoint.DiffOptions{Text: true, MaxBytes: opts.MaxBytes}, page)
}

func (s *Service) treeOf(ctx context.Context, tx *index.Tx, ref TreeRef) (cas.Hash, error) {
	run, err := findRun(ctx, tx, ref.RunID)
	if err != nil {
		return cas.Hash{}, err
	}
	if ref.Seq == 0 {
		return run.Root, nil
	}
	cp, err := s.checkpoints.Get(ctx, tx, ref.RunID, ref.Seq)
	if err != nil {
		return cas.Hash{}, err
	}
	return cp.Root, nil
}

// Materialize reads the virtual resources at paths once, now, and fixes
// their content under input/ at the same path ("chat/history.tail.md"
// lands at input/chat/history.tail.md), as CreateRequest.Materialize does
// at a run's start: one transaction writes them all with a
// workspace_file_written event each (mode "materialize") and the
// automatic checkpoint. input/ stays immutable: a path already there is
// refused. It fails with workspace.file_not_found for a path no provider
// serves, workspace.invalid_argument for an empty list, a path given
// twice or one already under input/, run.not_found, run.invalid_transition
// for a run that is not active, and workspace.size_limit_exceeded.
func (s *Service) Materialize(ctx context.Context, runID string, paths []vfs.Path) ([]vfs.FileInfo, error) {
	const op = "materialize"
	if len(paths) == 0 {
		return nil, wserr.New(wserr.InvalidArgument, op, "", "no paths")
	}
	if _, err := s.Run(ctx, runID); err != nil {
		return nil, err // the run is named before any path is served
	}
	inputs := make(map[vfs.Path][]byte, len(paths))
	targets := make([]vfs.Path, 0, len(paths))
	for _, v := range paths {
		if _, _, _, ok := s.virtual.Match(v); !ok {
			return nil, wserr.New(wserr.FileNotFound, op, v.String(), "no virtual resource is mounted there")
		}
		res, err := s.virtual.Read(ctx, v, vfs.ReadOptions{})
		if err != nil {
			return nil, err
		}
		before := len(inputs)
		if err := addInput(inputs, v, res.Content); err != nil {
			return nil, err
		}
		for p := range inputs {
			if len(inputs) > before && !containsPath(targets, p) {
				targets = append(targets, p)
			}
		}
	}
	w := s.Workspace(runID, HostScope)
	infos := make([]vfs.FileInfo, 0, len(targets))
	err := s.UpdateInRoom(ctx, func(tx *index.Tx) error {
		infos = infos[:0] // afresh when the cap's refusal runs it again
		run, caps, err := findRunCaps(ctx, tx, runID)
		if err != nil {
			return err
		}
		if !run.Status.Active() {
			return wserr.New(wserr.InvalidState, op, "", "run %s is %s: only running, awaiting_approval or paused runs take inputs", runID, run.Status)
		}
		room := s.roomCheck(ctx, tx, op, &caps)
		root := run.Root
		events := make([]event, 0, len(targets))
		for _, p := range targets {
			if _, err := s.trees.Lookup(ctx, tx, root, p); err == nil {
				return wserr.New(wserr.InvalidArgument, op, p.String(), "%s is already an input, which never changes", p)
			}
			b := inputs[p]
			if err := room.add(p, int64(len(b))); err != nil {
				return err
			}
			if root, err = s.setFile(ctx, tx, root, p, b); err != nil {
				return err
			}
			h := cas.Sum(b)
			infos = append(infos, vfs.FileInfo{Path: p, Kind: vfs.KindFile, Size: int64(len(b)), Hash: h, Resource: vfs.ResourceMaterialized})
			events = append(events, event{journal.WorkspaceFileWritten, journal.FileWritten{Path: p.String(), Hash: h.String(), Bytes: int64(len(b)), Mode: "materialize"}})
		}
		cpID, err := w.swapRoot(ctx, tx, run, caps, op, targets[0], root, "after_materialize", nil, events...)
		if err != nil {
			return err
		}
		for i := range infos {
			infos[i].Checkpoint = cpID
		}
		return room.settle(ctx, tx)
	})
	if err != nil {
		return nil, err
	}
	return infos, nil
}

func containsPath(ps []vfs.Path, p vfs.Path) bool {
	for _, q := range ps {
		if q == p {
			return true
		}
	}
	return false
}
