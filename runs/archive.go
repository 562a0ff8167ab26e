package runs

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/wserr"
)

// ChatRecord is a chats row as an archive carries it: every column, times
// in Unix nanoseconds, so an import writes back exactly what was read.
type ChatRecord struct {
	ID             string   `json:"id"`
	Kind           string   `json:"kind"`
	StableChatID   string   `json:"stableChatId"`
	ChatRef        string   `json:"chatRef"`
	PersistRoot    cas.Hash `json:"persistRoot"`
	PersistVersion int64    `json:"persistVersion"`
	CreatedAt      int64    `json:"createdAt"`
	UpdatedAt      int64    `json:"updatedAt"`
}

// RunRecord is a runs row as an archive carries it: every column.
type RunRecord struct {
	ID             string   `json:"id" db:"id"`
	ChatID         string   `json:"chatId" db:"chat_id"`
	ChatRef        string   `json:"chatRef" db:"chat_ref"`
	Profile        string   `json:"profile" db:"profile"`
	Status         string   `json:"status" db:"status"`
	Root           cas.Hash `json:"root" db:"root"`
	PersistBase    cas.Hash `json:"persistBase" db:"persist_base"`
	PersistVersion int64    `json:"persistVersion" db:"persist_version"`
	HeadCheckpoint int64    `json:"headCheckpoint" db:"head_checkpoint"`
	Manifest       string   `json:"manifest" db:"manifest"`
	CreatedAt      int64    `json:"createdAt" db:"created_at"`
	UpdatedAt      int64    `json:"updatedAt" db:"updated_at"`
	FinishedAt     *int64   `json:"finishedAt,omitempty" db:"finished_at"`
	// Records is the run's records tree, zero while nothing is recorded.
	Records cas.Hash `json:"records,omitzero" db:"records"`
}

// CommitRow is a commits row as an archive carries it: every column.
type CommitRow struct {
	ID            string `json:"id" db:"id"`
	RunID         string `json:"runId" db:"run_id"`
	Seq           int64  `json:"seq" db:"seq"`
	CheckpointSeq int64  `json:"checkpointSeq" db:"checkpoint_seq"`
	Mode          string `json:"mode" db:"mode"`
	Kind          string `json:"kind" db:"kind"`
	Status        string `json:"status" db:"status"`
	Message       string `json:"message" db:"message"`
	Receipt       string `json:"receipt" db:"receipt"`
	Error         string `json:"error" db:"error"`
	CreatedAt     int64  `json:"createdAt" db:"created_at"`
	UpdatedAt     int64  `json:"updatedAt" db:"updated_at"`
}

const runRecordCols = `id, chat_id, chat_ref, profile, status, root, persist_base, persist_version,
	head_checkpoint, manifest, created_at, updated_at, finished_at, records`

const commitRowCols = `id, run_id, seq, checkpoint_seq, mode, kind, status, message, receipt, error, created_at, updated_at`

// ExportChat returns the chat workspace id's row in tx, for an archive. It
// fails with store.not_found if there is none.
func (s *Service) ExportChat(ctx context.Context, tx *index.Tx, id string) (ChatRecord, error) {
	var r chatRow
	err := tx.GetContext(ctx, &r, `SELECT `+chatCols+` FROM chats WHERE id = ?`, id)
	if errors.Is(err, sql.ErrNoRows) {
		return ChatRecord{}, wserr.New(wserr.NotFound, "export chat", "", "no chat workspace %s", id)
	}
	if err != nil {
		return ChatRecord{}, fmt.Errorf("export chat %s: %w", id, index.Translate(err))
	}
	return ChatRecord(r), nil
}

// EachChatRecord calls fn, in tx, with every chat workspace's row, ordered
// by id, reading their ids a page at a time. The error is fn's or a failed
// read.
func (s *Service) EachChatRecord(ctx context.Context, tx *index.Tx, fn func(ChatRecord) error) error {
	after := ""
	for {
		ids, err := chatIDsAfter(ctx, tx, after, chatIDPage)
		if err != nil {
			return fmt.Errorf("export chats: %w", err)
		}
		for _, id := range ids {
			c, err := s.ExportChat(ctx, tx, id)
			if err != nil {
				return err
			}
			if err := fn(c); err != nil {
				return err
			}
		}
		if len(ids) < chatIDPage {
			return nil
		}
		after = ids[len(ids)-1]
	}
}

// ExportRun returns run id's row in tx, for an archive. It fails with
// run.not_found if there is none.
func (s *Service) ExportRun(ctx context.Context, tx *index.Tx, id string) (RunRecord, error) {
	var r RunRecord
	err := tx.GetContext(ctx, &r, `SELECT `+runRecordCols+` FROM runs WHERE id = ?`, id)
	if errors.Is(err, sql.ErrNoRows) {
		return RunRecord{}, wserr.New(wserr.RunNotFound, "export run", "", "no run %q", id)
	}
	if err != nil {
		return RunRecord{}, fmt.Errorf("export run %s: %w", id, index.Translate(err))
	}
	return r, nil
}

// EachRunRecord calls fn, in tx, with the row of every run of chatID ("" for
// every run), ordered by id, reading their ids runIDPage at a time, each
// page after the last id of the one before: a pass over any number of runs
// holds one page of their ids. The error is fn's or a failed read.
func (s *Service) EachRunRecord(ctx context.Context, tx *index.Tx, chatID string, fn func(RunRecord) error) error {
	after := ""
	for {
		ids, err := runIDsAfter(ctx, tx, chatID, after, runIDPage)
		if err != nil {
			return fmt.Errorf("export runs: %w", err)
		}
		for _, id := range ids {
			r, err := s.ExportRun(ctx, tx, id)
			if err != nil {
				return err
			}
			if err := fn(r); err != nil {
				return err
			}
		}
		if len(ids) < runIDPage {
			return nil
		}
		after = ids[len(ids)-1]
	}
}

// runIDPage is how many run ids EachRunRecord reads at a time.
var runIDPage = 1000

// runIDsAfter returns, in id order, the ids of at most limit runs of
// chatID ("" for every run) after the run id after ("" for the first):
// every run's from the id index, a chat's from its entries of runs_chat_id.
func runIDsAfter(ctx context.Context, tx *index.Tx, chatID, after string, limit int) ([]string, error) {
	var ids []string
	var err error
	if chatID == "" {
		err = tx.SelectContext(ctx, &ids, `SELECT id FROM runs WHERE id > ? ORDER BY id LIMIT ?`, after, limit)
	} else {
		err = tx.SelectContext(ctx, &ids, `SELECT id FROM runs WHERE chat_id = ? AND id > ? ORDER BY id LIMIT ?`, chatID, after, limit)
	}
	if err != nil {
		return nil, index.Translate(err)
	}
	return ids, nil
}

// EachCommitRow calls fn with each of run id's commit rows in tx, ordered
// by seq, reading their seqs commitSeqPage at a time, each page after the
// last seq of the one before, and the rows one at a time: a run's
// messages are never held together, nor all of its seqs.
func (s *Service) EachCommitRow(ctx context.Context, tx *index.Tx, runID string, fn func(CommitRow) error) error {
	var seqs []int64
	for after := int64(math.MinInt64); ; {
		seqs = seqs[:0]
		if err := tx.SelectContext(ctx, &seqs, `SELECT seq FROM commits WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?`,
			runID, after, commitSeqPage); err != nil {
			return fmt.Errorf("export commits %s: %w", runID, index.Translate(err))
		}
		for _, seq := range seqs {
			var c CommitRow
			if err := tx.GetContext(ctx, &c, `SELECT `+commitRowCols+` FROM commits WHERE run_id = ? AND seq = ?`, runID, seq); err != nil {
				return fmt.Errorf("export commit %s#%d: %w", runID, seq, index.Translate(err))
			}
			if err := fn(c); err != nil {
				return err
			}
		}
		if len(seqs) < commitSeqPage {
			return nil
		}
		after = seqs[len(seqs)-1]
	}
}

// commitSeqPage is how many commit seqs EachCommitRow reads at a time.
var commitSeqPage = 1000

// ImportChat writes c in tx unless a chat workspace with its id exists. It
// reports added when it wrote the row. An existing chat with the same
// identity and persist layer (root and version) is the same chat; its
// timestamps and chat reference stay as they are. One whose persist layer
// differs fails with store.conflict, and nothing is written: an import never
// overwrites a persist state.
func (s *Service) ImportChat(ctx context.Context, tx *index.Tx, c ChatRecord) (added bool, err error) {
	const op = "import chat"
	if c.ID == "" || c.ID != ChatWorkspaceID(ChatKey{Kind: c.Kind, StableChatID: c.StableChatID}) {
		return false, wserr.New(wserr.Corrupt, op, "", "chat id %q does not derive from its kind and stable id", c.ID)
	}
	old, err := s.ExportChat(ctx, tx, c.ID)
	switch {
	case err == nil:
		if old.Kind == c.Kind && old.StableChatID == c.StableChatID && old.PersistRoot == c.PersistRoot && old.PersistVersion == c.PersistVersion {
			return false, nil
		}
		if old.PersistVersion == c.PersistVersion {
			return false, wserr.New(wserr.Conflict, op, "", "chat workspace %s exists with another persist layer at the archive's version %d", c.ID, c.PersistVersion)
		}
		return false, wserr.New(wserr.Conflict, op, "", "chat workspace %s exists with persist version %d, archive holds version %d", c.ID, old.PersistVersion, c.PersistVersion)
	case !wserr.Is(err, wserr.NotFound):
		return false, err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO chats (`+chatCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		c.ID, c.Kind, c.StableChatID, c.ChatRef, c.PersistRoot, c.PersistVersion, c.CreatedAt, c.UpdatedAt)
	if err != nil {
		return false, fmt.Errorf("%s %s: %w", op, c.ID, index.Translate(err))
	}
	return true, nil
}

// ImportRun writes r in tx unless a run with its id exists; its chat must
// exist already. It reports added when it wrote the row, and then the
// caller writes the run's checkpoints, commits and events in the same tx.
// An existing run with an identical row is the same run (nothing written);
// one that differs fails with store.conflict. A run whose profile or
// manifest does not parse fails with store.corrupt.
func (s *Service) ImportRun(ctx context.Context, tx *index.Tx, r RunRecord) (added bool, err error) {
	const op = "import run"
	if err := r.Check(op); err != nil {
		return false, err
	}
	old, err := s.ExportRun(ctx, tx, r.ID)
	switch {
	case err == nil:
		if sameRun(old, r) {
			return false, nil
		}
		return false, wserr.New(wserr.Conflict, op, "", "run %s exists with other content", r.ID)
	case !wserr.Is(err, wserr.RunNotFound):
		return false, err
	}
	if _, err := findChat(ctx, tx, r.ChatID); err != nil {
		return false, fmt.Errorf("%s %s: %w", op, r.ID, err)
	}
	var records any
	if !r.Records.IsZero() {
		records = r.Records
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO runs (`+runRecordCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.ID, r.ChatID, r.ChatRef, r.Profile, r.Status, r.Root, r.PersistBase, r.PersistVersion, r.HeadCheckpoint,
		r.Manifest, r.CreatedAt, r.UpdatedAt, r.FinishedAt, records)
	if err != nil {
		return false, fmt.Errorf("%s %s: %w", op, r.ID, index.Translate(err))
	}
	return true, nil
}

// ReachesHost reports whether the run's profile names host directories
// (allowPaths). A profile that does not read reaches none; ImportRun
// refuses it.
func (r RunRecord) ReachesHost() bool {
	var p struct {
		AllowPaths []json.RawMessage `json:"allowPaths"`
	}
	return json.Unmarshal([]byte(r.Profile), &p) == nil && len(p.AllowPaths) > 0
}

func sameRun(a, b RunRecord) bool {
	fa, fb := a.FinishedAt, b.FinishedAt
	a.FinishedAt, b.FinishedAt = nil, nil
	if a != b {
		return false
	}
	return (fa == nil) == (fb == nil) && (fa == nil || *fa == *fb)
}

// ImportCommit writes c in tx, for a run ImportRun has just added, after
// its checkpoints. It fails with store.corrupt if the commit's run is not
// c.RunID's, it names a checkpoint the run does not hold, or its row does
// not insert (a duplicate id or seq).
func (s *Service) ImportCommit(ctx context.Context, tx *index.Tx, c CommitRow) error {
	if !json.Valid([]byte(c.Message)) || !json.Valid([]byte(c.Receipt)) {
		// Every read of the run's commits would fail on it.
		return wserr.New(wserr.Corrupt, "import commit", "", "commit %s of run %s has a message or receipt that is not JSON", c.ID, c.RunID)
	}
	if c.Status != CommitPending && c.Status != CommitCompleted && c.Status != CommitFailed {
		return wserr.New(wserr.Corrupt, "import commit", "", "commit %s of run %s has status %q", c.ID, c.RunID, c.Status)
	}
	if c.CheckpointSeq != 0 {
		ok, err := s.checkpoints.Has(ctx, tx, c.RunID, c.CheckpointSeq)
		if err != nil {
			return err
		}
		if !ok {
			return wserr.New(wserr.Corrupt, "import commit", "", "commit %s of run %s names checkpoint %d, which the run does not hold", c.ID, c.RunID, c.CheckpointSeq)
		}
	}
	_, err := tx.NamedExecContext(ctx, `INSERT INTO commits (`+commitRowCols+`) VALUES (:id, :run_id, :seq,
		:checkpoint_seq, :mode, :kind, :status, :message, :receipt, :error, :created_at, :updated_at)`, c)
	if err != nil {
		return index.TranslateRow("import commit", fmt.Sprintf("commit %s of run %s", c.ID, c.RunID), err)
	}
	return nil
}

// HasCommit reports whether run runID holds commit id, in tx.
func (s *Service) HasCommit(ctx context.Context, tx *index.Tx, runID, id string) (bool, error) {
	var n int
	if err := tx.GetContext(ctx, &n, `SELECT count(*) FROM commits WHERE id = ? AND run_id = ?`, id, runID); err != nil {
		return false, fmt.Errorf("commit %s: %w", id, index.Translate(err))
	}
	return n > 0, nil
}

// MergeCommits brings run runID's commits forward to incoming, in tx, for
// a sync that found the store's state of the run an earlier state of the
// incoming one: a commit the store lacks is imported (ImportCommit), and
// one the store holds as pending that the incoming state has completed or
// failed (delivered, or resolved, on the other device) takes that outcome,
// its receipt and error. A commit the store holds in any other status is
// left as it is: the run's journal, which records every outcome, is where
// the two states are compared. The store's commits are read by id and
// status only, never their messages, and the message of an incoming
// commit the store holds is not looked at (the caller may leave it out).
func (s *Service) MergeCommits(ctx context.Context, tx *index.Tx, runID string, incoming []CommitRow) error {
	var rows []struct {
		ID     string `db:"id"`
		Status string `db:"status"`
	}
	if err := tx.SelectContext(ctx, &rows, `SELECT id, status FROM commits WHERE run_id = ?`, runID); err != nil {
		return fmt.Errorf("merge commits %s: %w", runID, index.Translate(err))
	}
	have := make(map[string]string, len(rows))
	for _, r := range rows {
		have[r.ID] = r.Status
	}
	for _, c := range incoming {
		if c.RunID != runID {
			return wserr.New(wserr.Corrupt, "merge commit", "", "commit %s belongs to run %s, not %s", c.ID, c.RunID, runID)
		}
		status, ok := have[c.ID]
		switch {
		case !ok:
			if err := s.ImportCommit(ctx, tx, c); err != nil {
				return err
			}
		case status == CommitPending && c.Status != CommitPending:
			if c.Status != CommitCompleted && c.Status != CommitFailed {
				return wserr.New(wserr.Corrupt, "merge commit", "", "commit %s of run %s has status %q", c.ID, c.RunID, c.Status)
			}
			if !json.Valid([]byte(c.Receipt)) {
				return wserr.New(wserr.Corrupt, "merge commit", "", "commit %s of run %s has a receipt that is not JSON", c.ID, c.RunID)
			}
			if _, err := tx.ExecContext(ctx, `UPDATE commits SET status = ?, receipt = ?, error = ?, updated_at = ? WHERE id = ? AND run_id = ? AND status = ?`,
				c.Status, c.Receipt, c.Error, c.UpdatedAt, c.ID, runID, CommitPending); err != nil {
				return fmt.Errorf("merge commit %s: %w", c.ID, index.Translate(err))
			}
		}
	}
	return nil
}

// Check fails with store.corrupt, for op, if r cannot be a run's row: an
// invalid id, an unknown status, a profile or manifest that does not
// parse. An import refuses such a row, so an export does not write one.
func (r RunRecord) Check(op string) error {
	if !runIDPattern.MatchString(r.ID) {
		return wserr.New(wserr.Corrupt, op, "", "invalid run id %q", r.ID)
	}
	if !Status(r.Status).Valid() {
		return wserr.New(wserr.Corrupt, op, "", "run %s: unknown status %q", r.ID, r.Status)
	}
	rr := runRow{ID: r.ID, Profile: r.Profile, FinishedAt: sql.NullInt64{}}
	if _, err := rr.run(); err != nil {
		return wserr.New(wserr.Corrupt, op, "", "run %s: unreadable profile", r.ID)
	}
	if r.Manifest != "" {
		if _, err := ParseManifest([]byte(r.Manifest)); err != nil {
			return wserr.New(wserr.Corrupt, op, "", "run %s: unreadable manifest: %v", r.ID, err)
		}
	}
	return nil
}

// MergeRun replaces the row of the run r names with r, in tx, for a sync
// that found the store's state of the run an earlier state of r's (the
// caller appends the new checkpoints, commits and events in the same tx).
// A run the store lacks fails with run.not_found, one whose profile or
// manifest does not parse with store.corrupt.
func (s *Service) MergeRun(ctx context.Context, tx *index.Tx, r RunRecord) error {
	const op = "merge run"
	rr := runRow{ID: r.ID, Profile: r.Profile}
	if _, err := rr.run(); err != nil {
		return wserr.New(wserr.Corrupt, op, "", "run %s: unreadable profile", r.ID)
	}
	if r.Manifest != "" {
		if _, err := ParseManifest([]byte(r.Manifest)); err != nil {
			return wserr.New(wserr.Corrupt, op, "", "run %s: unreadable manifest: %v", r.ID, err)
		}
	}
	var records any
	if !r.Records.IsZero() {
		records = r.Records
	}
	res, err := tx.ExecContext(ctx, `UPDATE runs SET chat_ref = ?, status = ?, root = ?, head_checkpoint = ?, manifest = ?,
		updated_at = ?, finished_at = ?, records = ? WHERE id = ? AND chat_id = ?`,
		r.ChatRef, r.Status, r.Root, r.HeadCheckpoint, r.Manifest, r.UpdatedAt, r.FinishedAt, records, r.ID, r.ChatID)
	if err != nil {
		return fmt.Errorf("%s %s: %w", op, r.ID, index.Translate(err))
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return wserr.New(wserr.RunNotFound, op, "", "run %s of chat %s", r.ID, r.ChatID)
	}
	return nil
}

// MergePersist moves the chat workspace's persist layer from the state
// from to the state to, in tx, by the same compare-and-swap a promotion
// uses: it fails with store.conflict, changing nothing, unless the chat
// is still at from's version and root.
func (s *Service) MergePersist(ctx context.Context, tx *index.Tx, from, to ChatRecord) error {
	res, err := tx.ExecContext(ctx, `UPDATE chats SET persist_root = ?, persist_version = ?, updated_at = max(updated_at, ?)
		WHERE id = ? AND persist_version = ? AND persist_root = ?`,
		to.PersistRoot, to.PersistVersion, to.UpdatedAt, from.ID, from.PersistVersion, from.PersistRoot)
	if err != nil {
		return fmt.Errorf("merge persist %s: %w", from.ID, index.Translate(err))
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return wserr.New(wserr.Conflict, "merge persist", "", "chat workspace %s: persist/ changed here meanwhile", from.ID)
	}
	return nil
}
