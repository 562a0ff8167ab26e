package runs

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"math"
	"slices"
	"time"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/checkpoint"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/wserr"
)

// Deletion kinds in the deletion log.
const (
	DeletedRun         = "run"
	DeletedChat        = "chat"
	DeletedCheckpoints = "checkpoints"
	// DeletedScratch records an ended run's scratch/ leaving its
	// workspace and checkpoints (collectScratch); the reclaim after it
	// records the bytes.
	DeletedScratch = "scratch"
	// Reclaimed records the collection that followed deletions: the
	// stored bytes it freed.
	Reclaimed = "reclaim"
	// RetentionFailed records an automatic retention pass that failed
	// after it had deleted the run whose end started it (see Finish).
	RetentionFailed = "retention_failed"
	// ReclaimFailed records the collection after a deletion (DeleteChats,
	// DeleteRun, Prune) failing once the deletion had committed: the deletion
	// stands, its garbage waits for the next reclaim or gc, and the
	// detail names the error and its code.
	ReclaimFailed = "reclaim_failed"
)

// Deletion is one entry of the store's deletion log. It outlives what it
// names: deleting a run deletes its journal, never its entries here.
type Deletion struct {
	ID     int64     `json:"id"`
	At     time.Time `json:"at"`
	Kind   string    `json:"kind"`
	ChatID string    `json:"workspaceId,omitempty"`
	RunID  string    `json:"runId,omitempty"`
	// Reason is why: the retention setting that named it
	// ("keepCompletedRuns", "maxCheckpointBytesPerRun", …), "requested"
	// or "forced" for a host's deletion, "after deletions" for a reclaim.
	Reason string          `json:"reason"`
	Detail json.RawMessage `json:"detail"`
	// BytesFreed is the stored bytes given back: for a reclaim, what its
	// collection swept; for pruned checkpoints, what they held beyond
	// the ones kept (checkpoint.Store.Retained).
	BytesFreed int64 `json:"bytesFreed"`
}

type deletionRow struct {
	ID     int64  `db:"id"`
	At     int64  `db:"at"`
	Kind   string `db:"kind"`
	ChatID string `db:"chat_id"`
	RunID  string `db:"run_id"`
	Reason string `db:"reason"`
	Detail string `db:"detail"`
	Bytes  int64  `db:"bytes_freed"`
}

func (s *Service) logDeletion(ctx context.Context, tx *index.Tx, kind, chatID, runID, reason string, detail any, bytes int64) (int64, error) {
	b, err := json.Marshal(detail)
	if err != nil {
		return 0, fmt.Errorf("log deletion: %w", err)
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO deletions (at, kind, chat_id, run_id, reason, detail, bytes_freed) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		s.now().UnixNano(), kind, chatID, runID, reason, string(b), bytes)
	if err != nil {
		return 0, index.Translate(err)
	}
	return res.LastInsertId()
}

// The deletion-log entries a page holds.
const (
	DefaultDeletionPage = 1000
	MaxDeletionPage     = 10000
	// MaxDeletionPageBytes bounds the details and reasons a page holds: a
	// page ends before the entry that would take them past it (a page
	// holds one entry at least).
	MaxDeletionPageBytes = 4 << 20
)

// Deletions lists the deletion log, oldest first, after entry afterID
// (0: from the start), a page of at most limit entries (0:
// DefaultDeletionPage), fewer if their details and reasons would pass
// MaxDeletionPageBytes; more says whether entries follow the page (ask
// again with afterID the page's last entry). A page reads the entries it
// returns, a row at a time, from the log's id index. A negative afterID
// or a limit outside 0..MaxDeletionPage is workspace.invalid_argument.
func (s *Service) Deletions(ctx context.Context, afterID int64, limit int) (page []Deletion, more bool, err error) {
	if limit == 0 {
		limit = DefaultDeletionPage
	}
	if afterID < 0 || limit < 1 || limit > MaxDeletionPage {
		return nil, false, wserr.New(wserr.InvalidArgument, "list deletions", "", "afterId %d must not be negative and limit %d must be in 0..%d (0: %d)", afterID, limit, MaxDeletionPage, DefaultDeletionPage)
	}
	err = s.db.View(ctx, func(tx *index.Tx) error {
		page, more = []Deletion{}, false
		// One entry past the page says whether more follow.
		rows, err := tx.QueryxContext(ctx, `SELECT id, at, kind, chat_id, run_id, reason, detail, bytes_freed
			FROM deletions WHERE id > ? ORDER BY id LIMIT ?`, afterID, limit+1)
		if err != nil {
			return err
		}
		more, err = readPage(rows, limit, MaxDeletionPageBytes, func(r *deletionRow) int { return len(r.Detail) + len(r.Reason) }, func(r *deletionRow) error {
			page = append(page, Deletion{ID: r.ID, At: time.Unix(0, r.At).UTC(), Kind: r.Kind, ChatID: r.ChatID, RunID: r.RunID,
				Reason: r.Reason, Detail: json.RawMessage(r.Detail), BytesFreed: r.Bytes})
			return nil
		})
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("list deletions: %w", index.Translate(err))
	}
	return page, more, nil
}

// candidatesEnd returns where the queue of gc candidates ends before an
// operation that reclaims after it changes anything: what the operation
// records comes after it. A queue that cannot be read leaves the
// operation no candidates of its own (math.MaxInt64): its reclaim takes
// only the bounded share of the backlog, and gc the rest.
func (s *Service) candidatesEnd(ctx context.Context) int64 {
	if s.reclaim == nil {
		return 0
	}
	end, err := s.reclaim.CandidatesEnd(ctx)
	if err != nil {
		return math.MaxInt64
	}
	return end
}

// reclaimAfter runs the Reclaimer, if any, after the n deletions logged
// committed, over the candidates recorded after place after, and logs
// what it freed, naming ids, the first of those deletions' log entries
// (every one when n is len(ids)), even when ctx ended as the collection
// returned (the bytes are freed). Its failure leaves the garbage for the
// next reclaim or gc and is returned (with 0 bytes); a failure of the log
// alone is returned with the bytes freed.
func (s *Service) reclaimAfter(ctx context.Context, after int64, ids []int64, n int) (int64, error) {
	if s.reclaim == nil || n == 0 {
		return 0, nil
	}
	freed, err := s.reclaim.Reclaim(ctx, after)
	if err != nil {
		return 0, err
	}
	return freed, s.logReclaim(context.WithoutCancel(ctx), ids, n, freed)
}

// reclaimAfterDeletion is reclaimAfter for deletions that have
// committed (n of them, the first of whose log entries ids names): a
// failure (the caller's context ending during the collection, a busy or
// full disk) does not fail the call, which would say the deletion did not
// happen. It is recorded in the deletion log as a reclaim_failed entry of
// chatID and runID, written even when ctx has ended; the garbage waits for
// the next reclaim or gc.
func (s *Service) reclaimAfterDeletion(ctx context.Context, chatID, runID string, after int64, ids []int64, n int) int64 {
	freed, err := s.reclaimAfter(ctx, after, ids, n)
	if err == nil || freed > 0 {
		return freed // freed > 0: only the log of it failed
	}
	wctx := context.WithoutCancel(ctx)
	detail := map[string]any{"deletions": ids, "code": string(wserr.CodeOf(err)), "error": err.Error()}
	if n > len(ids) {
		detail["deletionCount"] = n
	}
	_ = s.update(wctx, func(tx *index.Tx) error {
		_, err := s.logDeletion(wctx, tx, ReclaimFailed, chatID, runID, "after deletions", detail, 0)
		return err
	})
	return 0
}

// UpdateInRoom runs fn in one write transaction, for a change the store's
// cap may refuse: when the store's cap refuses the change
// (wserr.IsStoreFull) and collecting the queue of gc candidates frees
// anything (reclaimForRoom), fn runs once more, in a new transaction, and
// its error is the call's. Another workspace.size_limit_exceeded (the
// run's cap, an event's size) collects nothing: no garbage of the store's
// makes room under those. Every change the cap holds in its transaction
// goes through it (workspace writes, new runs, records, manifests,
// checkpoints, inputs, and the actor spaces' uploads through their Cap),
// so all of them get the room a deletion left once its grace has passed.
// fn must change nothing outside tx (its results it sets afresh on each
// run), so that it can run again.
func (s *Service) UpdateInRoom(ctx context.Context, fn func(tx *index.Tx) error) error {
	err := s.update(ctx, fn)
	if wserr.IsStoreFull(err) && s.reclaimForRoom(ctx) {
		err = s.update(ctx, fn)
	}
	return err
}

// reclaimForRoom is for a change the store's cap refused: it collects what
// deletions recorded as garbage and left waiting because it was younger
// than the reclaim grace then (nothing else runs a reclaim while a host
// only writes), or that reclaims after other operations left for later,
// the whole queue, and reports whether that freed anything, so the change
// may be tried once more (UpdateInRoom).
func (s *Service) reclaimForRoom(ctx context.Context) bool {
	if s.reclaim == nil {
		return false
	}
	freed, err := s.reclaimCandidates(ctx, -1)
	return err == nil && freed > 0
}

// reclaimCandidates collects what the operations before it recorded as
// candidates after place after (a run's collected scratch/; after < 0:
// the whole queue), when the Reclaimer can without marking the store, and
// logs what it freed, if anything.
func (s *Service) reclaimCandidates(ctx context.Context, after int64) (int64, error) {
	cr, ok := s.reclaim.(CandidateReclaimer)
	if !ok {
		return 0, nil
	}
	freed, ok, err := cr.ReclaimCandidates(ctx, after)
	if err != nil || !ok || freed == 0 {
		return 0, err
	}
	return freed, s.logReclaim(ctx, []int64{}, 0, freed)
}

// logReclaim logs a reclaim that freed freed bytes after n deletions,
// naming ids, the first of their log entries, and n when ids leave some
// out.
func (s *Service) logReclaim(ctx context.Context, ids []int64, n int, freed int64) error {
	detail := map[string]any{"deletions": ids}
	if n > len(ids) {
		detail["deletionCount"] = n
	}
	return s.update(ctx, func(tx *index.Tx) error {
		_, err := s.logDeletion(ctx, tx, Reclaimed, "", "", "after deletions", detail, freed)
		return err
	})
}

// capBytes holds run, of chat chatID and with profile JSON prof, to its
// checkpoint byte cap (its profile's MaxCheckpointBytes, else its chat's
// maxCheckpointBytesPerRun) right after checkpoint keep was created in
// tx, and logs what it pruned.
func (s *Service) capBytes(ctx context.Context, tx *index.Tx, runID string, caps runCaps, keep int64) error {
	chatID := caps.chatID
	limit, reason := caps.profile.MaxCheckpointBytes, "maxCheckpointBytes"
	if limit <= 0 {
		pol, err := s.capsPolicy(ctx, tx, caps)
		if err != nil {
			return err
		}
		if pol.MaxCheckpointBytesPerRun == nil {
			return nil
		}
		limit, reason = *pol.MaxCheckpointBytesPerRun, "maxCheckpointBytesPerRun"
	}
	pruned, freed, err := s.checkpoints.PruneBytes(ctx, tx, runID, limit, keep, commitPins)
	if err != nil || len(pruned) == 0 {
		return err
	}
	_, err = s.recordPruned(ctx, tx, chatID, reason, limit, prunedCheckpoints(runID, pruned, freed))
	return err
}

// MaxPrunedCheckpointIDs bounds the checkpoints a prune of one run's
// checkpoints names, in its checkpoints_pruned event, its deletion-log
// entry and a PruneReport: the first of them, oldest first, with a count
// of every one, so a prune of any number of checkpoints is recorded and
// answered in bounded bytes.
const MaxPrunedCheckpointIDs = 1000

// prunedCheckpointIDs is MaxPrunedCheckpointIDs, lowered by tests.
var prunedCheckpointIDs = MaxPrunedCheckpointIDs

// prunedCheckpoints names the first prunedCheckpointIDs of seqs, the
// checkpoints of run runID a cap deleted (oldest first), and counts them
// all.
func prunedCheckpoints(runID string, seqs []int64, freed int64) PrunedCheckpoints {
	ids := make([]string, min(len(seqs), prunedCheckpointIDs))
	for i := range ids {
		ids[i] = checkpoint.ID(seqs[i])
	}
	return PrunedCheckpoints{RunID: runID, CheckpointIDs: ids, CheckpointCount: len(seqs), Bytes: freed}
}

// recordPruned records, in tx, the checkpoints pc of run pc.RunID of chat
// chatID that the cap setting reason, at limit (checkpoints for
// "maxCheckpoints", else bytes), deleted: a checkpoints_pruned event, right
// after the checkpoint_created event of the checkpoint that took the run
// past the cap, and a deletion-log entry, whose id it returns. Both name
// what pc names and count every one.
func (s *Service) recordPruned(ctx context.Context, tx *index.Tx, chatID, reason string, limit int64, pc PrunedCheckpoints) (int64, error) {
	ev := journal.Pruned{CheckpointIDs: pc.CheckpointIDs, CheckpointCount: pc.CheckpointCount}
	if reason == "maxCheckpoints" {
		ev.MaxCheckpoints = int(limit)
	} else {
		ev.MaxCheckpointBytes, ev.FreedBytes = limit, pc.Bytes
	}
	if _, err := s.journal.Append(ctx, tx, pc.RunID, journal.CheckpointsPruned, journal.Info, ev); err != nil {
		return 0, fmt.Errorf("prune checkpoints: %w", err)
	}
	detail := map[string]any{"checkpointIds": pc.CheckpointIDs, "checkpointCount": pc.CheckpointCount, "limit": limit}
	return s.logDeletion(ctx, tx, DeletedCheckpoints, chatID, pc.RunID, reason, detail, pc.Bytes)
}

// ChatDeletion says what DeleteChats did with one chat. Runs and Cancelled
// name the first MaxChatDeletionRuns of them, oldest first; RunCount and
// CancelledCount count every one.
type ChatDeletion struct {
	Chat           ChatKey  `json:"chat"`
	WorkspaceID    string   `json:"workspaceId"`
	Found          bool     `json:"found"`
	Runs           []string `json:"runs"`
	RunCount       int      `json:"runCount"`
	Cancelled      []string `json:"cancelled"`
	CancelledCount int      `json:"cancelledCount"`
	LogID          int64    `json:"logId,omitempty"`
}

// MaxChatDeletionRuns bounds the runs a ChatDeletion, and the chat's
// entry in the deletion log, name: a chat of any number of runs answers
// with its first runs and counts every one. Each run past them has a run
// entry of its own in the log, before the chat's.
const MaxChatDeletionRuns = 1000

// chatDeletionRuns is MaxChatDeletionRuns, lowered by tests.
var chatDeletionRuns = MaxChatDeletionRuns

// DeleteChatsResult is what DeleteChats deleted and the bytes the reclaim
// after it freed.
type DeleteChatsResult struct {
	Chats      []ChatDeletion `json:"chats"`
	BytesFreed int64          `json:"bytesFreed"`
}

// DeleteChats deletes the chat workspaces of keys (one chat, or every chat
// of a character or group being deleted) with all their runs, journals,
// checkpoints, commits, persist layers and policies, in one transaction,
// and records each in the deletion log; then the store reclaims the space
// (Deps.Reclaim). Each chat's answer and log entry name its first
// MaxChatDeletionRuns runs and count every one; the runs past them are
// logged as run entries of their own. A reclaim that fails once the
// deletion has committed (the context ending during it included) does not
// fail the call: it is logged as a reclaim_failed entry, BytesFreed is 0
// and the space waits for the next gc. A key with no workspace (an old
// chat the store never saw) is reported as not found and is no error.
// While any run of those chats is active the whole call fails with
// chat.active_run and changes nothing, unless force: then those runs are
// cancelled first (journaled, and named in the log entry) and deleted with
// the rest. It fails with workspace.invalid_argument for an invalid key.
func (s *Service) DeleteChats(ctx context.Context, keys []ChatKey, force bool) (DeleteChatsResult, error) {
	var res DeleteChatsResult
	for _, k := range keys {
		if err := k.validate(); err != nil {
			return res, err
		}
	}
	after := s.candidatesEnd(ctx)
	var ids []int64
	err := s.update(ctx, func(tx *index.Tx) error {
		res.Chats, ids = nil, nil
		for _, k := range keys {
			d := ChatDeletion{Chat: k, WorkspaceID: ChatWorkspaceID(k), Runs: []string{}, Cancelled: []string{}}
			if _, err := findChat(ctx, tx, d.WorkspaceID); wserr.Is(err, wserr.NotFound) {
				res.Chats = append(res.Chats, d)
				continue
			} else if err != nil {
				return err
			}
			d.Found = true
			if err := s.deleteChatRuns(ctx, tx, &d, force); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `DELETE FROM policies WHERE scope = ?`, d.WorkspaceID); err != nil {
				return index.Translate(err)
			}
			var persist cas.Hash
			var version int64
			if err := tx.QueryRowContext(ctx, `DELETE FROM chats WHERE id = ? RETURNING persist_root, persist_version`, d.WorkspaceID).Scan(&persist, &version); err != nil {
				return index.Translate(err)
			}
			if err := s.trees.Orphaned(ctx, tx, persist); err != nil {
				return err
			}
			reason := "requested"
			if d.CancelledCount > 0 {
				reason = "forced"
			}
			id, err := s.logDeletion(ctx, tx, DeletedChat, d.WorkspaceID, "", reason,
				map[string]any{"kind": k.Kind, "stableChatId": k.StableChatID, "runs": d.Runs, "runCount": d.RunCount,
					"cancelled": d.Cancelled, "cancelledCount": d.CancelledCount,
					"persistRoot": persist, "persistVersion": version}, 0)
			if err != nil {
				return err
			}
			d.LogID = id
			ids = append(ids, id)
			res.Chats = append(res.Chats, d)
		}
		return nil
	})
	if err != nil {
		return DeleteChatsResult{}, err
	}
	chatID := ""
	if len(res.Chats) == 1 {
		chatID = res.Chats[0].WorkspaceID
	}
	res.BytesFreed = s.reclaimAfterDeletion(ctx, chatID, "", after, ids, len(ids))
	return res, nil
}

// deleteChatRuns deletes the runs of chat d in tx, oldest first, reading
// chatDeletionRuns of them at a time, cancelling the active ones when
// force (else failing with chat.active_run before deleting any). d names
// the first chatDeletionRuns runs and cancelled runs and counts all; each
// run past the first chatDeletionRuns is logged as a run entry of its
// own (reason "requested", "forced" for one cancelled), so the log names
// every run deleted, a page of entries at a time.
func (s *Service) deleteChatRuns(ctx context.Context, tx *index.Tx, d *ChatDeletion, force bool) error {
	type runRow struct {
		ID     string `db:"id"`
		Status string `db:"status"`
	}
	if !force {
		var active []runRow
		if err := tx.SelectContext(ctx, &active, `SELECT id, status FROM runs WHERE chat_id = ? AND status NOT IN (?, ?, ?)
			ORDER BY created_at, id LIMIT 1`, d.WorkspaceID, Completed, Failed, Cancelled); err != nil {
			return index.Translate(err)
		}
		if len(active) > 0 {
			r := active[0]
			return wserr.New(wserr.ChatActiveRun, "delete chat", "", "chat %s has run %s %s: cancel it first, or force the deletion", d.WorkspaceID, r.ID, r.Status)
		}
	}
	for {
		// The page before is deleted: each read starts at the oldest run left.
		var rows []runRow
		if err := tx.SelectContext(ctx, &rows, `SELECT id, status FROM runs WHERE chat_id = ? ORDER BY created_at, id LIMIT ?`,
			d.WorkspaceID, chatDeletionRuns); err != nil {
			return index.Translate(err)
		}
		for _, r := range rows {
			st, reason := Status(r.Status), "requested"
			if !st.Final() {
				if err := s.setStatus(ctx, tx, r.ID, st, Cancelled, "chat deleted"); err != nil {
					return err
				}
				st, reason = Cancelled, "forced"
				if d.CancelledCount++; len(d.Cancelled) < chatDeletionRuns {
					d.Cancelled = append(d.Cancelled, r.ID)
				}
			}
			if err := s.deleteRunTx(ctx, tx, r.ID); err != nil {
				return err
			}
			if d.RunCount++; len(d.Runs) < chatDeletionRuns {
				d.Runs = append(d.Runs, r.ID)
				continue
			}
			if _, err := s.logDeletion(ctx, tx, DeletedRun, d.WorkspaceID, r.ID, reason, map[string]any{"status": st}, 0); err != nil {
				return err
			}
		}
		if len(rows) < chatDeletionRuns {
			return nil
		}
	}
}

// deleteRunTx deletes a run's rows: checkpoints, journal, commits (by
// cascade) and the run.
func (s *Service) deleteRunTx(ctx context.Context, tx *index.Tx, runID string) error {
	if _, err := s.checkpoints.DeleteRun(ctx, tx, runID); err != nil {
		return err
	}
	if _, err := s.journal.DeleteRun(ctx, tx, runID); err != nil {
		return err
	}
	var root, base, records cas.Hash
	err := tx.QueryRowContext(ctx, `DELETE FROM runs WHERE id = ? RETURNING root, persist_base, records`, runID).Scan(&root, &base, &records)
	if err != nil {
		return index.Translate(err)
	}
	return s.trees.Orphaned(ctx, tx, root, base, records)
}

// PruneOptions shape a Prune.
type PruneOptions struct {
	// DryRun reports what would be deleted and deletes nothing.
	DryRun bool
	// ChatID limits the pass to one chat workspace; empty: every chat.
	ChatID string
}

// PrunedRun is one run a retention pass deleted, or would delete.
type PrunedRun struct {
	RunID  string `json:"runId"`
	ChatID string `json:"workspaceId"`
	Status Status `json:"status"`
	// Reason is the setting that named it.
	Reason string `json:"reason"`
	LogID  int64  `json:"logId,omitempty"`
}

// PrunedCheckpoints is the checkpoints of one run a pass deleted:
// CheckpointIDs names the first MaxPrunedCheckpointIDs, oldest first, and
// CheckpointCount counts every one.
type PrunedCheckpoints struct {
	RunID           string   `json:"runId"`
	CheckpointIDs   []string `json:"checkpointIds"`
	CheckpointCount int      `json:"checkpointCount"`
	Bytes           int64    `json:"bytes"`
}

// MaxPruneReportEntries bounds each list of a PruneReport (Runs,
// Checkpoints, Held): a pass over a store of any size lists its first
// entries and counts every one.
const MaxPruneReportEntries = 1000

// pruneReportEntries is MaxPruneReportEntries, lowered by tests.
var pruneReportEntries = MaxPruneReportEntries

// PruneReport is what a retention pass did (or, dry, would do). Each list
// holds the pass's first MaxPruneReportEntries entries (chats in id
// order, a chat's runs oldest first); the counts and bytes beside them
// are of every entry, and Truncated says a list left some out.
type PruneReport struct {
	DryRun bool `json:"dryRun"`
	// Runs are the runs deleted; RunCount counts every one.
	Runs     []PrunedRun `json:"runs"`
	RunCount int         `json:"runCount"`
	// Checkpoints are the runs whose checkpoints the byte cap deleted,
	// with those checkpoints; CheckpointRuns counts every such run,
	// CheckpointCount their checkpoints and CheckpointBytes the bytes
	// those held.
	Checkpoints     []PrunedCheckpoints `json:"checkpoints"`
	CheckpointRuns  int                 `json:"checkpointRuns"`
	CheckpointCount int                 `json:"checkpointCount"`
	CheckpointBytes int64               `json:"checkpointBytes"`
	// Held is the runs a setting named that the pass kept because a
	// commit of theirs is still pending (ResolveCommit ends that): those
	// it found so before deleting, then those another process began a
	// commit of while it went on. HeldCount counts every one.
	Held      []HeldRun `json:"held"`
	HeldCount int       `json:"heldCount"`
	// Truncated says a list holds fewer entries than its count.
	Truncated  bool  `json:"truncated"`
	BytesFreed int64 `json:"bytesFreed"`
}

func (r *PruneReport) addRun(d PrunedRun) {
	r.RunCount++
	r.Runs = addEntry(r, r.Runs, d)
}

func (r *PruneReport) addCheckpoints(c PrunedCheckpoints) {
	r.CheckpointRuns++
	r.CheckpointCount += c.CheckpointCount
	r.CheckpointBytes += c.Bytes
	r.Checkpoints = addEntry(r, r.Checkpoints, c)
}

func (r *PruneReport) addHeld(h ...HeldRun) {
	for _, h := range h {
		r.HeldCount++
		r.Held = addEntry(r, r.Held, h)
	}
}

// addEntry appends e to list while it holds fewer than
// pruneReportEntries, else marks r truncated.
func addEntry[E any](r *PruneReport, list []E, e E) []E {
	if len(list) >= pruneReportEntries {
		r.Truncated = true
		return list
	}
	return append(list, e)
}

// HeldRun is a run retention would delete but keeps while commits of its
// are pending.
type HeldRun struct {
	RunID  string `json:"runId"`
	ChatID string `json:"workspaceId"`
	Status Status `json:"status"`
	// Reason is the setting that named it.
	Reason string `json:"reason"`
	// PendingCommits are the ids of its pending commits.
	PendingCommits []string `json:"pendingCommits"`
}

// Prune applies the retention policy (EffectivePolicy of each chat):
// deletes the finished runs keepCompletedRuns, keepFailedRuns,
// maxRunWorkspacesPerChat and autoPruneAfterDays name, oldest beyond each
// count first, each run in a transaction of its own with its deletion-log
// entry naming the setting; then holds every remaining run to
// maxCheckpointBytesPerRun; then reclaims the space (Deps.Reclaim). Active
// runs are never deleted, nor runs with a commit still pending delivery,
// nor a checkpoint a commit refers to. Settings left unset delete nothing.
// The report lists the first MaxPruneReportEntries runs, runs' checkpoints
// and held runs, and counts every one; the reclaim's deletion-log entry
// names the first MaxPruneReportEntries of the pass's entries and counts
// every one. A pass that fails part way keeps the deletions that
// committed before the failure (each run, and each run's checkpoints, is
// one transaction) and returns the report of them with its error,
// BytesFreed 0: their space waits for the next reclaim or gc. A reclaim
// that fails once the pass's deletions have
// committed (the context ending during it included) does not fail Prune,
// which would say nothing was deleted: the report has BytesFreed 0, the
// failure is logged as a reclaim_failed entry and the space waits for the
// next gc.
func (s *Service) Prune(ctx context.Context, opt PruneOptions) (PruneReport, error) {
	after := s.candidatesEnd(ctx)
	rep, ids, n, err := s.prunePass(ctx, opt)
	if err != nil {
		return rep, err
	}
	rep.BytesFreed = s.reclaimAfterDeletion(ctx, opt.ChatID, "", after, ids, n)
	return rep, nil
}

// prune is Prune for the automatic pass after a run's end, its reclaim
// taking the candidates recorded after place after as its own; a reclaim
// that fails is its error, which the run's journal records (afterFinal).
func (s *Service) prune(ctx context.Context, opt PruneOptions, after int64) (PruneReport, error) {
	rep, ids, n, err := s.prunePass(ctx, opt)
	if err != nil {
		return rep, err
	}
	rep.BytesFreed, err = s.reclaimAfter(ctx, after, ids, n)
	return rep, err
}

// prunePass deletes what the retention policy names (Prune) and returns
// its report, the first of its deletion-log entries' ids and how many it
// logged, for the reclaim after it.
func (s *Service) prunePass(ctx context.Context, opt PruneOptions) (rep PruneReport, ids []int64, logged int, err error) {
	rep = PruneReport{DryRun: opt.DryRun, Runs: []PrunedRun{}, Checkpoints: []PrunedCheckpoints{}, Held: []HeldRun{}}
	// The pass's deletion-log entries, for the reclaim after it: how many,
	// and the first of their ids, which its own entry names; each noted
	// once its transaction has committed.
	noteLogged := func(id int64) {
		logged++
		if len(ids) < pruneReportEntries {
			ids = append(ids, id)
		}
	}
	for chatID, err := range s.pruneChats(ctx, opt.ChatID) {
		if err != nil {
			return rep, ids, logged, fmt.Errorf("prune: %w", index.Translate(err))
		}
		doomed, keep, held, err := s.pruneCandidates(ctx, chatID)
		if err != nil {
			return rep, ids, logged, err
		}
		if pruneGap != nil {
			pruneGap()
		}
		rep.addHeld(held...)
		for _, d := range doomed {
			if !opt.DryRun {
				var pending []string
				err := s.update(ctx, func(tx *index.Tx) error {
					run, err := findRun(ctx, tx, d.RunID)
					if err != nil {
						return err
					}
					if !run.Status.Final() || s.saves.isSaving(d.RunID) {
						return errSkip
					}
					// A commit another process began since the candidates
					// were read.
					pending = nil
					if err := tx.SelectContext(ctx, &pending, `SELECT id FROM commits WHERE run_id = ? AND status = ? ORDER BY seq`,
						d.RunID, CommitPending); err != nil {
						return index.Translate(err)
					}
					if len(pending) > 0 {
						return errSkip
					}
					if err := s.deleteRunTx(ctx, tx, d.RunID); err != nil {
						return err
					}
					d.LogID, err = s.logDeletion(ctx, tx, DeletedRun, chatID, d.RunID, d.Reason, map[string]any{"status": d.Status}, 0)
					return err
				})
				if err == errSkip && len(pending) > 0 {
					rep.addHeld(HeldRun{RunID: d.RunID, ChatID: chatID, Status: d.Status, Reason: d.Reason, PendingCommits: pending})
				}
				if err == errSkip || wserr.Is(err, wserr.RunNotFound) {
					continue
				}
				if err != nil {
					return rep, ids, logged, err
				}
				noteLogged(d.LogID)
			}
			rep.addRun(d)
		}
		// Most runs are within their cap: find those that are not on
		// the read pool, so the others cost no write transaction.
		var over []string
		err = s.db.View(ctx, func(tx *index.Tx) error {
			over = nil
			for _, runID := range keep {
				limit, err := s.byteCap(ctx, tx, runID, chatID)
				if err != nil || limit <= 0 {
					if wserr.Is(err, wserr.RunNotFound) {
						continue
					}
					return err
				}
				kept, err := s.checkpoints.Retained(ctx, tx, runID)
				if err != nil {
					return err
				}
				if kept > limit {
					over = append(over, runID)
				}
			}
			return nil
		})
		if err != nil {
			return rep, ids, logged, err
		}
		for _, runID := range over {
			var pc PrunedCheckpoints
			var logID int64 // the entry's, noted once its transaction commits
			err := s.update(ctx, func(tx *index.Tx) error {
				pc, logID = PrunedCheckpoints{}, 0
				run, err := findRun(ctx, tx, runID)
				if err != nil {
					return err
				}
				limit, err := s.byteCap(ctx, tx, runID, chatID)
				if err != nil || limit <= 0 {
					return err
				}
				seqs, freed, err := s.checkpoints.PruneBytes(ctx, tx, runID, limit, run.HeadCheckpoint, commitPins)
				if err != nil || len(seqs) == 0 {
					return err
				}
				pc = prunedCheckpoints(runID, seqs, freed)
				if opt.DryRun {
					return errSkip // what the cap deletes, rolled back
				}
				logID, err = s.recordPruned(ctx, tx, chatID, "maxCheckpointBytesPerRun", limit, pc)
				return err
			})
			if err != nil && err != errSkip {
				return rep, ids, logged, err
			}
			if err == nil && logID != 0 {
				noteLogged(logID)
			}
			if pc.RunID != "" {
				rep.addCheckpoints(pc)
			}
		}
	}
	return rep, ids, logged, nil
}

// pruneChats yields the chat chatID, if given (store.not_found if there is
// none), else every chat of the store in id order, read chatIDPage ids at
// a time, each page after the last chat of the one before: a pass over a
// store of any number of chats holds one page of their ids.
func (s *Service) pruneChats(ctx context.Context, chatID string) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		if chatID != "" {
			err := s.db.View(ctx, func(tx *index.Tx) error {
				_, err := findChat(ctx, tx, chatID)
				return err
			})
			yield(chatID, err)
			return
		}
		after := ""
		for {
			var page []string
			err := s.db.View(ctx, func(tx *index.Tx) error {
				var err error
				page, err = chatIDsAfter(ctx, tx, after, chatIDPage)
				return err
			})
			if err != nil {
				yield("", err)
				return
			}
			for _, id := range page {
				if !yield(id, nil) {
					return
				}
			}
			if len(page) < chatIDPage {
				return
			}
			after = page[len(page)-1]
		}
	}
}

// chatIDPage is how many chat ids a store-wide pass (prune, export)
// reads at a time.
var chatIDPage = 1000

// chatIDsAfter returns, in id order, the ids of at most limit chats after
// the chat id after ("" for the first), read from the id index.
func chatIDsAfter(ctx context.Context, tx *index.Tx, after string, limit int) ([]string, error) {
	var ids []string
	if err := tx.SelectContext(ctx, &ids, `SELECT id FROM chats WHERE id > ? ORDER BY id LIMIT ?`, after, limit); err != nil {
		return nil, index.Translate(err)
	}
	return ids, nil
}

var errSkip = fmt.Errorf("skip")

// pruneGap, when set (tests), runs between a pass's read of a chat's
// candidates and its deletions, where another process may begin a commit.
var pruneGap func()

// byteCap returns the checkpoint byte cap of run runID of chat chatID: its
// profile's MaxCheckpointBytes, else the chat's maxCheckpointBytesPerRun;
// 0 for none.
func (s *Service) byteCap(ctx context.Context, tx *index.Tx, runID, chatID string) (int64, error) {
	run, err := findRun(ctx, tx, runID)
	if err != nil {
		return 0, err
	}
	if run.Profile.MaxCheckpointBytes > 0 {
		return run.Profile.MaxCheckpointBytes, nil
	}
	pol, err := s.effectivePolicy(ctx, tx, chatID)
	if err != nil || pol.MaxCheckpointBytesPerRun == nil {
		return 0, err
	}
	return *pol.MaxCheckpointBytesPerRun, nil
}

// pruneCandidates returns the finished runs of chat the policy deletes,
// with the setting that names each, the runs it keeps, and, among those,
// the ones a setting named that are kept for their pending commits.
func (s *Service) pruneCandidates(ctx context.Context, chatID string) ([]PrunedRun, []string, []HeldRun, error) {
	var pol Policy
	var rows []struct {
		ID       string `db:"id"`
		Status   string `db:"status"`
		Finished *int64 `db:"finished_at"`
	}
	var pendingRows []struct {
		RunID string `db:"run_id"`
		ID    string `db:"id"`
	}
	err := s.db.View(ctx, func(tx *index.Tx) error {
		var err error
		if pol, err = s.effectivePolicy(ctx, tx, chatID); err != nil {
			return err
		}
		if err := tx.SelectContext(ctx, &pendingRows, `SELECT c.run_id, c.id FROM commits c JOIN runs r ON r.id = c.run_id
			WHERE r.chat_id = ? AND c.status = ? ORDER BY c.run_id, c.seq`, chatID, CommitPending); err != nil {
			return index.Translate(err)
		}
		return index.Translate(tx.SelectContext(ctx, &rows, `SELECT id, status, finished_at FROM runs WHERE chat_id = ?
			ORDER BY created_at DESC, id DESC`, chatID))
	})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("prune: %w", err)
	}
	pending := map[string][]string{}
	for _, p := range pendingRows {
		pending[p.RunID] = append(pending[p.RunID], p.ID)
	}
	var doomed []PrunedRun
	var held []HeldRun
	var keep []string
	var completed, failed int
	cutoff := int64(-1)
	if d := pol.AutoPruneAfterDays; d != nil {
		// Days reaching back before the epoch name no run (and past
		// 106,751 days would overflow a time.Duration).
		now, day := s.now().UnixNano(), int64(24*time.Hour)
		if int64(*d) < now/day {
			cutoff = now - int64(*d)*day
		}
	}
	// The settings that judge each run on its own (its rank among the
	// chat's completed or failed runs, its age) come first; then
	// maxRunWorkspacesPerChat takes the oldest finished runs of those
	// left while the chat has more than it allows.
	reasons := make([]string, len(rows))
	for i, r := range rows {
		st := Status(r.Status)
		switch st {
		case Completed:
			completed++
			if pol.KeepCompletedRuns != nil && completed > *pol.KeepCompletedRuns {
				reasons[i] = "keepCompletedRuns"
			}
		case Failed, Cancelled:
			failed++
			if pol.KeepFailedRuns != nil && failed > *pol.KeepFailedRuns {
				reasons[i] = "keepFailedRuns"
			}
		}
		if reasons[i] == "" && st.Final() && cutoff >= 0 && r.Finished != nil && *r.Finished < cutoff {
			reasons[i] = "autoPruneAfterDays"
		}
	}
	// stays: the run is not deleted (no setting names it, it is active,
	// or a pending commit holds it).
	stays := func(i int) bool {
		return reasons[i] == "" || !Status(rows[i].Status).Final() || len(pending[rows[i].ID]) > 0
	}
	if n := pol.MaxRunWorkspacesPerChat; n != nil {
		left := 0
		for i := range rows {
			if stays(i) {
				left++
			}
		}
		for i := len(rows) - 1; i >= 0 && left > *n; i-- {
			if reasons[i] != "" || !Status(rows[i].Status).Final() {
				continue // going already, held for another setting, or active
			}
			reasons[i] = "maxRunWorkspacesPerChat"
			if len(pending[rows[i].ID]) == 0 {
				left--
			}
		}
	}
	for i, r := range rows {
		st, reason := Status(r.Status), reasons[i]
		if reason != "" && len(pending[r.ID]) > 0 {
			held = append(held, HeldRun{RunID: r.ID, ChatID: chatID, Status: st, Reason: reason, PendingCommits: pending[r.ID]})
		}
		if stays(i) {
			keep = append(keep, r.ID)
			continue
		}
		doomed = append(doomed, PrunedRun{RunID: r.ID, ChatID: chatID, Status: st, Reason: reason})
	}
	slices.Reverse(doomed) // oldest first
	slices.Reverse(held)
	return doomed, keep, held, nil
}

// afterFinal prunes chatID when automatic pruning is on, after its run
// runID reached a final status. The run's own change has committed
// whatever the pass does, so a failure does not fail the call that ended
// the run: it is journaled on that run as a retention_failed warning
// naming the error's code, or, when the pass had already deleted that
// run, recorded in the deletion log as a "retention_failed" entry. What
// the pass deleted before failing stays deleted and logged; the rest
// waits for the next pass. after is where the queue of gc candidates
// ended before the run's end (candidatesEnd): what the end and the pass
// recorded since is theirs to reclaim.
func (s *Service) afterFinal(ctx context.Context, runID, chatID string, after int64) {
	auto, perr := s.autoPrune(ctx)
	if !auto && perr == nil {
		return
	}
	var rep PruneReport
	if perr == nil {
		rep, perr = s.prune(ctx, PruneOptions{ChatID: chatID}, after)
	}
	if perr == nil && rep.RunCount == 0 && rep.CheckpointRuns == 0 {
		// Nothing deleted, so Prune reclaimed nothing: what the run's
		// end left (its scratch/) is collected here.
		_, perr = s.reclaimCandidates(ctx, after)
	}
	if perr == nil {
		return
	}
	detail := map[string]any{"workspaceId": chatID, "code": string(wserr.CodeOf(perr)), "error": perr.Error()}
	// Recorded even when ctx has ended (the pass may have failed for
	// that): the run's end has committed, the record of the pass is its.
	wctx := context.WithoutCancel(ctx)
	_ = s.update(wctx, func(tx *index.Tx) error {
		if _, err := findRun(wctx, tx, runID); wserr.Is(err, wserr.RunNotFound) {
			_, err := s.logDeletion(wctx, tx, RetentionFailed, chatID, runID, "automatic", detail, 0)
			return err
		} else if err != nil {
			return err
		}
		_, err := s.journal.Append(wctx, tx, runID, journal.RetentionFailed, journal.Warn, detail)
		return err
	})
}
