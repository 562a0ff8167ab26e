package runs

import (
	"context"
	"slices"
	"strings"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// FinishResult reports what Finish promoted.
type FinishResult struct {
	Run            Run          `json:"run"`
	PersistChanges []vfs.Change `json:"persistChanges"`
	Merged         bool         `json:"merged"` // another run promoted since this one started
	PersistVersion int64        `json:"persistVersion"`
}

// Finish completes a run and promotes its persist/ changes to the chat
// workspace: the changes are computed against the base the
// run started from and applied with a compare-and-swap on the chat's
// persist version. If another run promoted in between, changes to
// different paths merge; a path both changed differently fails with
// agent.persistent_workspace_conflict naming the paths, and then nothing
// changes (the run stays as it was, so the host can resolve and retry or
// fail it). Failed, cancelled or unfinished runs never touch the chat's
// persist layer. While this Service is committing the run (its sink may
// still fail, and only an active run can commit again), Finish fails with
// store.busy: try again once Commit has returned (the host may hold the
// commit's message before then: a protocol response is written from the
// sink). When automatic pruning is on, the chat is
// pruned after the run completes; a failure of that pass does not fail
// Finish, and is journaled on the run as a retention_failed warning.
func (s *Service) Finish(ctx context.Context, runID string) (FinishResult, error) {
	var res FinishResult
	after := s.candidatesEnd(ctx)
	err := s.update(ctx, func(tx *index.Tx) error {
		// Asked inside the write transaction: a commit takes its turn
		// before its own transaction and keeps it until its outcome is
		// recorded, so none can slip in between the check and the finish.
		if s.saves.isSaving(runID) {
			return wserr.New(wserr.Busy, "finish", "", "run %s has a commit being saved: finish it once Commit returns", runID)
		}
		run, err := findRun(ctx, tx, runID)
		if err != nil {
			return err
		}
		if !run.Status.Active() {
			return wserr.New(wserr.InvalidState, "finish", "", "run %s is %s: only running, awaiting_approval or paused runs finish", runID, run.Status)
		}
		if run.Status != Running {
			if err := s.setStatus(ctx, tx, runID, run.Status, Running, "finishing"); err != nil {
				return err
			}
		}
		ours, err := s.persistTree(ctx, tx, run.Root)
		if err != nil {
			return err
		}
		changes, err := s.trees.Diff(ctx, tx, run.PersistBase, ours)
		if err != nil {
			return err
		}
		chat, err := findChat(ctx, tx, run.ChatID)
		if err != nil {
			return err
		}
		res.PersistChanges, res.PersistVersion = changes, chat.PersistVersion
		if res.PersistChanges == nil {
			res.PersistChanges = []vfs.Change{}
		}
		if len(changes) > 0 {
			next := ours
			// In one store a version names one root; a run imported
			// beside another device's promotion of the same version
			// started from a root this chat never held, and merges too.
			if chat.PersistVersion != run.PersistVersion || chat.PersistRoot != run.PersistBase {
				res.Merged = true
				if next, err = s.mergePersist(ctx, tx, run, chat.PersistRoot, changes); err != nil {
					return err
				}
			}
			r, err := tx.ExecContext(ctx, `UPDATE chats SET persist_root = ?, persist_version = persist_version + 1, updated_at = ?
				WHERE id = ? AND persist_version = ?`, next, s.now().UnixNano(), chat.ID, chat.PersistVersion)
			if err != nil {
				return index.Translate(err)
			}
			if n, _ := r.RowsAffected(); n != 1 {
				return wserr.New(wserr.Conflict, "finish", "", "chat %s persist layer changed during promotion", chat.ID)
			}
			res.PersistVersion = chat.PersistVersion + 1
			// The runs that started from the old persist layer hold it
			// as their base; once they go, it may be garbage.
			if err := s.trees.Orphaned(ctx, tx, chat.PersistRoot); err != nil {
				return err
			}
			paths := make([]string, len(changes))
			for i, c := range changes {
				paths[i] = c.Path.String()
			}
			if _, err := s.journal.Append(ctx, tx, runID, journal.PersistentChangesCommitted, journal.Info, map[string]any{
				"workspaceId": chat.ID, "paths": paths, "merged": res.Merged, "persistVersion": res.PersistVersion, "persistRoot": next.String(),
			}); err != nil {
				return err
			}
		}
		if err := s.setStatus(ctx, tx, runID, Running, Completed, "finished"); err != nil {
			return err
		}
		res.Run, err = findRun(ctx, tx, runID)
		return err
	})
	if err != nil {
		return FinishResult{}, err
	}
	s.afterFinal(ctx, runID, res.Run.ChatID, after)
	return res, nil
}

// persistTree returns the tree of root's persist/ directory (EmptyTree if
// there is none).
func (s *Service) persistTree(ctx context.Context, tx *index.Tx, root cas.Hash) (cas.Hash, error) {
	e, err := s.trees.Lookup(ctx, tx, root, vfs.MustPath(PersistRoot))
	switch {
	case wserr.Is(err, wserr.FileNotFound):
		return s.trees.Put(ctx, tx, nil)
	case err != nil:
		return cas.Hash{}, err
	case e.Kind != vfs.KindDir:
		return cas.Hash{}, wserr.New(wserr.InvalidState, "finish", PersistRoot, "persist is a file, not a directory")
	}
	return e.Hash, nil
}

// mergePersist applies the run's changes (against its base) on top of the
// chat's current persist tree, which another run has changed since. A path
// changed on both sides to different results is a conflict.
func (s *Service) mergePersist(ctx context.Context, tx *index.Tx, run Run, theirs cas.Hash, ours []vfs.Change) (cas.Hash, error) {
	theirChanges, err := s.trees.Diff(ctx, tx, run.PersistBase, theirs)
	if err != nil {
		return cas.Hash{}, err
	}
	byPath := make(map[vfs.Path]vfs.Change, len(theirChanges))
	for _, c := range theirChanges {
		byPath[c.Path] = c
	}
	var conflicts []string
	for _, c := range ours {
		t, ok := byPath[c.Path]
		if ok && (t.Op != c.Op || t.New.Hash != c.New.Hash) {
			conflicts = append(conflicts, c.Path.String())
		}
	}
	if len(conflicts) > 0 {
		slices.Sort(conflicts)
		return cas.Hash{}, wserr.New(wserr.PersistentWorkspaceConflict, "finish", "",
			"another run changed the same persist/ files since this run started: %s", strings.Join(conflicts, ", "))
	}
	// Deletions first: where this run turned a directory into a file,
	// the directory's files must go before the file can take its place
	// (Diff lists the file first).
	ordered := slices.Clone(ours)
	slices.SortStableFunc(ordered, func(a, b vfs.Change) int {
		return cmpBool(a.Op != vfs.Deleted, b.Op != vfs.Deleted)
	})
	root := theirs
	for _, c := range ordered {
		if _, ok := byPath[c.Path]; ok {
			continue // both made the same change
		}
		var e *vfs.Entry
		if c.Op != vfs.Deleted {
			ne := c.New
			e = &ne
		}
		next, err := s.trees.Set(ctx, tx, root, c.Path, e)
		if wserr.Is(err, wserr.FileNotFound) && e == nil {
			continue
		}
		if err != nil {
			// A file on one side where the other made a directory.
			return cas.Hash{}, wserr.New(wserr.PersistentWorkspaceConflict, "finish", c.Path.String(),
				"persist/%s conflicts with a change another run made: %s", c.Path, wserr.MessageOf(err))
		}
		root = next
	}
	return root, nil
}

// cmpBool orders false before true.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}
