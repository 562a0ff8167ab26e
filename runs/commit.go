package runs

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/checkpoint"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// CommitMode says what the chat sink does with the message.
type CommitMode string

// Commit modes.
const (
	ModeReplace CommitMode = "replace" // replace this run's agent message
	ModeAppend  CommitMode = "append"  // append to it; the first append creates it
	ModeDelete  CommitMode = "delete"  // delete it (commit rollback only)
)

// ArtifactRef names a committed artifact in the agent metadata.
type ArtifactRef struct {
	ID   string   `json:"id"`
	Kind string   `json:"kind"`
	Path string   `json:"path"`
	Hash cas.Hash `json:"hash"`
}

// AgentMetadata is what a committed message records of the run that made
// it (the host stores it in the message's extra data).
type AgentMetadata struct {
	RunID         string            `json:"runId"`
	StableChatID  string            `json:"stableChatId"`
	CheckpointID  string            `json:"checkpointId"`
	CommitID      string            `json:"commitId"`
	ProfileID     string            `json:"profileId"`
	ArtifactSetID string            `json:"artifactSetId"`
	Artifacts     []ArtifactRef     `json:"artifacts"`
	Contents      map[string]string `json:"contents,omitempty"` // when storeArtifactsInExtra
}

// Message is an assembled chat message.
type Message struct {
	Body  string            `json:"mes"`
	Extra map[string]string `json:"extra"`
	Agent AgentMetadata     `json:"agent"`
}

// CommitRequest is what the store hands the host's ChatSink.
type CommitRequest struct {
	CommitID string          `json:"commitId"`
	RunID    string          `json:"runId"`
	ChatID   string          `json:"workspaceId"`
	ChatRef  json.RawMessage `json:"chatRef"`
	Mode     CommitMode      `json:"mode"`
	Message  Message         `json:"message"`
}

// ChatSink saves messages into the host's chat, through the host's own
// save contract: the store never writes chat files. Each call carries a
// new CommitID, which the host may use to tell deliveries apart; after a
// failure the run may simply Commit again. The receipt is stored with the
// commit: JSON as it is, anything else as a JSON string of its bytes, and
// none as {}.
type ChatSink interface {
	Commit(ctx context.Context, req CommitRequest) (receipt json.RawMessage, err error)
}

// SinkFunc adapts a function to ChatSink.
type SinkFunc func(ctx context.Context, req CommitRequest) (json.RawMessage, error)

// Commit calls f.
func (f SinkFunc) Commit(ctx context.Context, req CommitRequest) (json.RawMessage, error) {
	return f(ctx, req)
}

// CommitOptions shape a commit.
type CommitOptions struct {
	Mode CommitMode // replace (default) or append
	// Path, if set, commits that one file as the body instead of the
	// manifest's assembly (workspace.commit's path argument).
	Path string
}

// CommitRecord is a stored commit.
type CommitRecord struct {
	ID           string          `json:"commitId"`
	RunID        string          `json:"runId"`
	Seq          int64           `json:"seq"`
	CheckpointID string          `json:"checkpointId"`
	Mode         CommitMode      `json:"mode"`
	Kind         string          `json:"kind"` // commit or rollback
	Status       string          `json:"status"`
	Message      Message         `json:"message"`
	Receipt      json.RawMessage `json:"receipt"`
	Error        string          `json:"error,omitempty"`
	CreatedAt    time.Time       `json:"createdAt"`
}

// Commit statuses.
const (
	CommitPending   = "pending"
	CommitCompleted = "completed"
	CommitFailed    = "failed"
)

// Commit assembles the run's artifacts and hands the message to sink (seed
// 000 §8): it takes a before_commit checkpoint (or names the run's head
// checkpoint, when that is a before_commit one of the live tree: a retry
// after a failed sink, or another commit, with nothing changed since),
// assembles from that
// checkpoint's tree, records the commit as pending with artifact_assembled
// and chat_commit_requested events, calls the sink outside any transaction,
// and records chat_commit_completed or chat_commit_failed. If assembly
// fails (manifest.missing_required_artifact, …) nothing is recorded and the
// sink is not called. With opt.Path the model names the one file to
// commit, and the model's rules apply: a path outside the profile's
// visible roots (input/, runtime records) fails with
// workspace.path_not_visible; one under scratch/, in a virtual mount, or
// under host/ of a run with allowed host paths with
// workspace.invalid_path; a missing file with workspace.file_not_found. A
// message past MaxMessageBytes fails with workspace.size_limit_exceeded. If the sink fails, the error is
// commit.sink_failed, the run stays as it was and Commit may be retried.
// If the run is deleted while the sink runs, nothing more is recorded and
// the error is run.not_found; the record returned carries the sink's
// receipt, so the host can find what its sink saved. If the commit was
// resolved meanwhile by another process (ResolveCommit), nothing is
// recorded and the error is run.invalid_transition. If recording the
// outcome fails, the commit stays pending, the record carries the sink's
// receipt and the error says what the sink did: ResolveCommit records it.
// So it does, with workspace.invalid_argument, for a receipt past
// MaxOutcomeBytes as JSON; a sink's error text past it is recorded cut.
// While this Service saves another commit to the same chat, Commit fails
// at once with store.busy and records nothing (see lockSaves).
func (s *Service) Commit(ctx context.Context, runID string, sink ChatSink, opt CommitOptions) (CommitRecord, error) {
	mode := opt.Mode
	if mode == "" {
		mode = ModeReplace
	}
	if mode != ModeReplace && mode != ModeAppend {
		return CommitRecord{}, wserr.New(wserr.InvalidArgument, "commit", "", "mode must be replace or append, not %q", mode)
	}
	if sink == nil {
		return CommitRecord{}, wserr.New(wserr.InvalidArgument, "commit", "", "no chat sink")
	}
	var single *vfs.Path
	if opt.Path != "" {
		p, err := vfs.ParsePath(opt.Path)
		if err != nil {
			return CommitRecord{}, err
		}
		single = &p
	}
	return s.commitThrough(ctx, runID, sink, func(tx *index.Tx) (pendingCommit, error) {
		run, caps, err := findRunCaps(ctx, tx, runID)
		if err != nil {
			return pendingCommit{}, err
		}
		if run.Status != Running && run.Status != AwaitingApproval {
			return pendingCommit{}, wserr.New(wserr.InvalidState, "commit", "", "run %s is %s: only running or awaiting_approval runs commit", runID, run.Status)
		}
		if single != nil {
			if err := s.checkCommitPath(run, *single); err != nil {
				return pendingCommit{}, err
			}
		}
		man, err := loadManifest(ctx, tx, runID)
		if err != nil {
			return pendingCommit{}, err
		}
		if single != nil {
			if err := checkNotHidden(man, *single); err != nil {
				return pendingCommit{}, err
			}
		}
		msg, err := s.assemble(ctx, tx, run, run.Root, man, single)
		if err != nil {
			return pendingCommit{}, err
		}
		cp, err := s.commitCheckpoint(ctx, tx, run, caps)
		if err != nil {
			return pendingCommit{}, err
		}
		return s.recordCommit(ctx, tx, run, cp, mode, "commit", msg)
	})
}

// commitCheckpoint takes the before_commit checkpoint of run's live
// workspace, or returns the run's head checkpoint when that is a
// before_commit one of the same tree: a commit with nothing changed since
// the last (a retry after a failed sink, above all) names the checkpoint
// that one took, so repeated commits neither add checkpoints nor, under a
// MaxCheckpoints cap, push the run's older ones out (every commit pins the
// checkpoint it names).
func (s *Service) commitCheckpoint(ctx context.Context, tx *index.Tx, run Run, caps runCaps) (checkpoint.Checkpoint, error) {
	if run.HeadCheckpoint > 0 {
		head, err := s.checkpoints.Get(ctx, tx, run.ID, run.HeadCheckpoint)
		if err != nil {
			return checkpoint.Checkpoint{}, err
		}
		if head.Reason == beforeCommit && head.Root == run.Root {
			return head, nil
		}
	}
	return s.checkpointTx(ctx, tx, run.ID, caps, run.Root, run.HeadCheckpoint, beforeCommit)
}

// beforeCommit is the reason of the checkpoint a commit takes.
const beforeCommit = "before_commit"

// commitThrough takes the turn to save to run runID's chat (lockSaves),
// records a pending commit with record in one write transaction, hands it
// to sink and records the outcome (deliver).
func (s *Service) commitThrough(ctx context.Context, runID string, sink ChatSink, record func(tx *index.Tx) (pendingCommit, error)) (rec CommitRecord, err error) {
	unlock, err := s.lockSaves(ctx, runID)
	if err != nil {
		return CommitRecord{}, err
	}
	defer func() { s.afterOutcome(ctx, runID, rec.Status) }() // once unlocked
	defer unlock()
	var pc pendingCommit
	err = s.update(ctx, func(tx *index.Tx) error {
		var err error
		pc, err = record(tx)
		return err
	})
	if err != nil {
		return CommitRecord{}, err
	}
	return s.deliver(ctx, sink, pc)
}

// checkCommitPath applies to the file the model names for a commit the
// rules a manifest's artifacts and the model's view of the workspace obey:
// the model commits only a stored file it can see, never the run's input.
func (s *Service) checkCommitPath(run Run, p vfs.Path) error {
	if _, _, _, ok := s.virtual.Match(p); ok {
		return wserr.New(wserr.InvalidPath, "commit", p.String(), "a virtual resource is not stored in the workspace; write what should be committed to a file under %v", run.Profile.WritableRoots)
	}
	if p.Top() == HostRoot && len(run.Profile.AllowPaths) > 0 {
		return wserr.New(wserr.InvalidPath, "commit", p.String(), "host/ files are the host's, never committed; write what should be committed to a file under %s/", ArtifactRoot)
	}
	if !run.Profile.visible(p.Top()) {
		return notVisible("commit", run, p)
	}
	if p.Top() == InputRoot {
		return wserr.New(wserr.InvalidPath, "commit", p.String(), "input/ holds the run's inputs, which are never committed")
	}
	if p.Top() == ScratchRoot {
		return wserr.New(wserr.InvalidPath, "commit", p.String(), "scratch/ is the run's scratch domain, which is never committed; write what should be committed under %s/", ArtifactRoot)
	}
	if p.Dir().IsRoot() {
		// A visible root is a directory in every view, one that holds
		// no file (which the tree does not store) included.
		return wserr.New(wserr.PathIsDirectory, "commit", p.String(), "an artifact must be a file")
	}
	return nil
}

// checkNotHidden refuses to commit by path a file the manifest keeps
// hidden: a hidden artifact stays in the run's workspace and never enters
// the chat (seed 000 §7).
func checkNotHidden(man Manifest, p vfs.Path) error {
	for _, a := range man.Artifacts {
		if a.Target.Kind != TargetHidden {
			continue
		}
		// As the assembly reads it: "./plan/notes.md" is plan/notes.md.
		if q, err := vfs.ParsePath(a.Path); err == nil && q == p {
			return wserr.New(wserr.InvalidPath, "commit", p.String(), "the manifest keeps artifact %q hidden: it stays in the run and never enters the chat; commit another file", a.ID)
		}
	}
	return nil
}

// messageText is b as message text: an artifact enters the chat as text,
// so bytes that are not UTF-8 are refused rather than changed (the
// message would no longer be what its artifact's hash names).
func messageText(p string, b []byte) (string, error) {
	if !utf8.Valid(b) {
		return "", wserr.New(wserr.InvalidArgument, "commit", p, "the file is not UTF-8 text, and a message carries text: write the artifact as text (a binary file cannot be committed)")
	}
	return string(b), nil
}

// assemble builds the message from the tree root: the single file if
// given, else the manifest's artifacts in assembly order.
func (s *Service) assemble(ctx context.Context, tx *index.Tx, run Run, root cas.Hash, man Manifest, single *vfs.Path) (Message, error) {
	msg := Message{Extra: map[string]string{}, Agent: AgentMetadata{RunID: run.ID, StableChatID: run.StableChatID, ProfileID: run.Profile.ID, Artifacts: []ArtifactRef{}}}
	lookup := func(p vfs.Path) (vfs.Entry, bool, error) {
		e, err := s.trees.Lookup(ctx, tx, root, p)
		if wserr.Is(err, wserr.FileNotFound) {
			return vfs.Entry{}, false, nil
		}
		if err != nil {
			return vfs.Entry{}, false, err
		}
		if e.Kind != vfs.KindFile {
			return vfs.Entry{}, false, wserr.New(wserr.PathIsDirectory, "commit", p.String(), "an artifact must be a file")
		}
		return e, true, nil
	}
	if single != nil {
		e, ok, err := lookup(*single)
		if err != nil {
			return Message{}, err
		}
		if !ok {
			// The model named the file: a mistyped path is for it to fix,
			// not a broken manifest.
			return Message{}, wserr.New(wserr.FileNotFound, "commit", single.String(), "the file to commit does not exist")
		}
		if e.Size > MaxMessageBytes {
			return Message{}, messageTooLarge(single.String(), e.Size)
		}
		b, err := s.blobs.ReadAll(ctx, e.Hash)
		if err != nil {
			return Message{}, err
		}
		if msg.Body, err = messageText(single.String(), b); err != nil {
			return Message{}, err
		}
		msg.Agent.Artifacts = append(msg.Agent.Artifacts, ArtifactRef{ID: single.Base(), Kind: "body", Path: single.String(), Hash: e.Hash})
		msg.Agent.ArtifactSetID = artifactSetID(msg.Agent.Artifacts)
		return msg, nil
	}
	// Every artifact is looked up, and the bytes the message would carry
	// counted, before any is read: a message past MaxMessageBytes is
	// refused without holding its files.
	type found struct {
		a Artifact
		e vfs.Entry
	}
	var arts []found
	for _, a := range man.sorted() {
		p, err := vfs.ParsePath(a.Path)
		if err != nil {
			return Message{}, invalidManifest("artifact %q: %s", a.ID, wserr.MessageOf(err))
		}
		// The message and the journal name the file by its workspace
		// path, however the manifest spelled it ("./output/main.md").
		a.Path = p.String()
		e, ok, err := lookup(p)
		if err != nil {
			return Message{}, err
		}
		if !ok {
			if a.Required {
				return Message{}, wserr.New(wserr.MissingArtifact, "commit", a.Path, "required artifact %q is missing", a.ID)
			}
			continue
		}
		if a.Target.Kind == TargetHidden {
			continue // never in the message, its template or its extra
		}
		arts = append(arts, found{a, e})
	}
	// What each artifact puts in the message: its bytes each time the
	// template names it (or once as a body without one), once as an extra,
	// once more among the contents kept.
	tpl := man.CommitPolicy.CombineTemplate
	named := map[string]int64{} // artifact id: how often the template names it
	for _, m := range placeholder.FindAllStringSubmatch(tpl, -1) {
		named[m[1]]++
	}
	total := int64(len(placeholder.ReplaceAllString(tpl, ""))) // the template's own text
	largest, most := "", int64(-1)
	nbodies := 0
	for _, f := range arts {
		n := named[f.a.ID]
		switch {
		case tpl == "" && f.a.Target.Kind == TargetMessageBody:
			if nbodies > 0 {
				total += int64(len("\n\n"))
			}
			nbodies++
			n = 1
		case f.a.Target.Kind == TargetMessageExtra:
			n++
		}
		if man.CommitPolicy.StoreArtifactsInExtra {
			n++
		}
		if in := n * f.e.Size; in > most {
			largest, most = f.a.Path, in
		}
		total += n * f.e.Size
	}
	if total > MaxMessageBytes {
		return Message{}, messageTooLarge(largest, total)
	}
	contents := map[string]string{}
	var bodies []string
	for _, f := range arts {
		used := f.a.Target.Kind == TargetMessageExtra || man.CommitPolicy.StoreArtifactsInExtra ||
			(tpl == "" && f.a.Target.Kind == TargetMessageBody) || named[f.a.ID] > 0
		msg.Agent.Artifacts = append(msg.Agent.Artifacts, ArtifactRef{ID: f.a.ID, Kind: f.a.Kind, Path: f.a.Path, Hash: f.e.Hash})
		if !used {
			continue // an artifact of the commit whose content goes nowhere in the message: not read
		}
		raw, err := s.blobs.ReadAll(ctx, f.e.Hash)
		if err != nil {
			return Message{}, err
		}
		b, err := messageText(f.a.Path, raw)
		if err != nil {
			return Message{}, err
		}
		switch f.a.Target.Kind {
		case TargetMessageBody:
			bodies = append(bodies, b)
		case TargetMessageExtra:
			msg.Extra[f.a.Target.Key] = b
		}
		contents[f.a.ID] = b
	}
	if tpl != "" {
		msg.Body = placeholder.ReplaceAllStringFunc(tpl, func(m string) string {
			return contents[placeholder.FindStringSubmatch(m)[1]]
		})
	} else {
		msg.Body = strings.Join(bodies, "\n\n")
	}
	if man.CommitPolicy.StoreArtifactsInExtra {
		msg.Agent.Contents = map[string]string{}
		for _, a := range msg.Agent.Artifacts {
			msg.Agent.Contents[a.ID] = contents[a.ID]
		}
	}
	msg.Agent.ArtifactSetID = artifactSetID(msg.Agent.Artifacts)
	return msg, nil
}

// MaxMessageBytes is the most a commit's message carries: its body, its
// extra and the artifacts' contents it keeps, as the artifacts' bytes
// before assembly, and the stored message (its JSON) as well. A commit past
// it fails with workspace.size_limit_exceeded and records nothing: the
// model can make its output smaller, and no file is held in memory whole
// to find out.
const MaxMessageBytes = 4 << 20

// MaxOutcomeBytes bounds the receipt (as stored, JSON) and the error text
// of a commit, a host's ChatSink returns them or ResolveCommit states
// them: the commit's row holds them beside its message, and an archive
// row holds at most 64 MiB. A sink's longer error text is cut to it; a
// sink's longer receipt leaves the commit pending (Commit).
const MaxOutcomeBytes = 1 << 20

func messageTooLarge(path string, n int64) error {
	return wserr.New(wserr.SizeLimitExceeded, "commit", path, "the message would carry %d bytes, past the %d a commit holds; make the output smaller", n, int64(MaxMessageBytes))
}

// artifactSetID names the set of artifact versions a message was built
// from, so two commits of the same contents share it.
func artifactSetID(refs []ArtifactRef) string {
	var b strings.Builder
	for _, r := range refs {
		fmt.Fprintf(&b, "%s\x00%s\x00%s\n", r.ID, r.Path, r.Hash)
	}
	return "artifact_set_" + cas.Sum([]byte(b.String())).Short()
}

// pendingCommit is a commit recorded as pending, with what deliver needs
// to find that very row again.
type pendingCommit struct {
	rec CommitRecord
	req CommitRequest
	// runCreated is the run's created_at. A run deleted while its sink runs
	// and created again under the same id numbers its commits from 1 again,
	// so the commit id alone may name the new run's row; the run's and the
	// row's creation times tell the two apart.
	runCreated int64
}

// recordCommit writes the pending commit row and its events.
func (s *Service) recordCommit(ctx context.Context, tx *index.Tx, run Run, cp checkpoint.Checkpoint, mode CommitMode, kind string, msg Message) (pendingCommit, error) {
	var seq int64
	if err := tx.GetContext(ctx, &seq, `SELECT coalesce(max(seq), 0) + 1 FROM commits WHERE run_id = ?`, run.ID); err != nil {
		return pendingCommit{}, index.Translate(err)
	}
	id := fmt.Sprintf("commit_%s_%04d", run.ID, seq)
	msg.Agent.CheckpointID = cp.ID
	msg.Agent.CommitID = id
	// Without HTML's escapes: a message of Markdown full of < and &
	// would otherwise take six bytes for each.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(msg); err != nil {
		return pendingCommit{}, err
	}
	b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	if len(b) > MaxMessageBytes {
		// Within the cap as bytes, past it as JSON: escapes and the
		// metadata around them.
		return pendingCommit{}, wserr.New(wserr.SizeLimitExceeded, "commit", "", "the message's JSON would be %d bytes (quotes, backslashes, newlines and control characters escaped), past the %d a commit holds; make the output smaller", len(b), int64(MaxMessageBytes))
	}
	now := s.now()
	if _, err := tx.ExecContext(ctx, `INSERT INTO commits (id, run_id, seq, checkpoint_seq, mode, kind, status, message, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, id, run.ID, seq, cp.Seq, string(mode), kind, CommitPending, string(b), now.UnixNano(), now.UnixNano()); err != nil {
		return pendingCommit{}, index.Translate(err)
	}
	if kind == "commit" {
		if _, err := s.journal.Append(ctx, tx, run.ID, journal.ArtifactAssembled, journal.Info, map[string]any{
			"commitId": id, "checkpointId": cp.ID, "artifactSetId": msg.Agent.ArtifactSetID, "artifacts": msg.Agent.Artifacts,
		}); err != nil {
			return pendingCommit{}, err
		}
	}
	if _, err := s.journal.Append(ctx, tx, run.ID, journal.ChatCommitRequested, journal.Info, map[string]any{
		"commitId": id, "checkpointId": cp.ID, "mode": mode, "kind": kind,
	}); err != nil {
		return pendingCommit{}, err
	}
	rec := CommitRecord{ID: id, RunID: run.ID, Seq: seq, CheckpointID: cp.ID, Mode: mode, Kind: kind, Status: CommitPending,
		Message: msg, Receipt: json.RawMessage(`{}`), CreatedAt: now.UTC()}
	req := CommitRequest{CommitID: id, RunID: run.ID, ChatID: run.ChatID, ChatRef: run.ChatRef, Mode: mode, Message: msg}
	return pendingCommit{rec: rec, req: req, runCreated: run.CreatedAt.UnixNano()}, nil
}

// deliver calls the sink and records the outcome on pc's row, in one
// transaction with its event (and, for a rollback the sink saved,
// commit_rolled_back: seed 000 §10.2 appends it after the save). If the
// row is gone (the run was deleted meanwhile, maybe created anew under the
// same id), nothing is written and the error is run.not_found; if another
// caller resolved it meanwhile (ResolveCommit), nothing is written and the
// error is run.invalid_transition.
func (s *Service) deliver(ctx context.Context, sink ChatSink, pc pendingCommit) (CommitRecord, error) {
	rec := pc.rec
	receipt, sinkErr := callSink(ctx, sink, pc.req)
	receipt = keptReceipt(receipt)
	status, errText := CommitCompleted, ""
	if sinkErr != nil {
		status, errText = CommitFailed, cutOutcome(sinkErr.Error())
	}
	saved := "the chat sink saved the message"
	if sinkErr != nil {
		saved = "the chat sink failed"
	}
	if len(receipt) > MaxOutcomeBytes {
		// The sink has acted, so the commit is not failed; its row cannot
		// hold the receipt, so it is not recorded completed either: the
		// host states the outcome, as for a delivery cut short.
		rec.Receipt = receipt
		e := wserr.New(wserr.InvalidArgument, "commit", "", "commit %s: %s, but its receipt is %d bytes as JSON, past the %d a commit holds; nothing is recorded, and the commit stays pending until ResolveCommit states its outcome with a smaller receipt", rec.ID, saved, len(receipt), MaxOutcomeBytes)
		e.Err = sinkErr
		return rec, e
	}
	// The outcome is recorded even if the caller's context ended meanwhile:
	// the sink has acted, and the journal must say so.
	err := s.recordOutcome(context.WithoutCancel(ctx), pc, status, receipt, errText, false)
	var resolved errCommitResolved
	switch {
	case errors.Is(err, errCommitGone):
		rec.Receipt = receipt
		e := wserr.New(wserr.RunNotFound, "commit", "", "run %s was deleted while its commit %s was being saved (%s); nothing is recorded", rec.RunID, rec.ID, saved)
		e.Err = sinkErr
		return rec, e
	case errors.As(err, &resolved):
		rec.Receipt = receipt
		e := wserr.New(wserr.InvalidState, "commit", "", "commit %s was resolved as %s by another caller while it was being saved (%s); this outcome is not recorded", rec.ID, resolved.status, saved)
		e.Err = sinkErr
		return rec, e
	case err != nil:
		// The commit stays pending: the record carries the receipt, and
		// the error says what the sink did, for ResolveCommit.
		rec.Receipt = receipt
		return rec, fmt.Errorf("commit %s: %s, but its outcome could not be recorded (the commit stays pending until ResolveCommit): %w", rec.ID, saved, err)
	}
	rec.Status, rec.Receipt, rec.Error = status, receipt, errText
	if sinkErr != nil {
		return rec, wserr.Wrap(wserr.SinkFailed, "commit", "", sinkErr)
	}
	return rec, nil
}

// cutOutcome is a sink's error text as a commit's row holds it: at most
// MaxOutcomeBytes, a longer text cut at a character's start and saying so
// (the caller's error keeps the whole).
func cutOutcome(text string) string {
	if len(text) <= MaxOutcomeBytes {
		return text
	}
	note := fmt.Sprintf(" … (cut: %d bytes in all)", len(text))
	n := MaxOutcomeBytes - len(note)
	for n > 0 && !utf8.RuneStart(text[n]) {
		n--
	}
	return text[:n] + note
}

// keptReceipt is how a sink's receipt is stored: JSON as it is, anything
// else as a JSON string of its bytes, none as {}.
func keptReceipt(receipt json.RawMessage) json.RawMessage {
	switch {
	case len(bytes.TrimSpace(receipt)) == 0:
		return json.RawMessage(`{}`)
	case !json.Valid(receipt):
		b, _ := json.Marshal(string(receipt))
		return b
	}
	return receipt
}

// recordOutcome moves pc's row from pending to status, in one transaction
// with its chat_commit_completed or chat_commit_failed event (and, for a
// rollback completed, commit_rolled_back). resolved marks an outcome a
// host stated afterwards (ResolveCommit) rather than one its sink
// returned. It fails with errCommitGone if the row is no longer there and
// errCommitResolved if it is no longer pending.
func (s *Service) recordOutcome(ctx context.Context, pc pendingCommit, status string, receipt json.RawMessage, errText string, resolved bool) error {
	rec := pc.rec
	typ, level := journal.ChatCommitCompleted, journal.Info
	if status == CommitFailed {
		typ, level = journal.ChatCommitFailed, journal.Error
	}
	return s.update(ctx, func(tx *index.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE commits SET status = ?, receipt = ?, error = ?, updated_at = ?
			WHERE id = ? AND run_id = ? AND status = ? AND created_at = ?
			AND EXISTS (SELECT 1 FROM runs WHERE id = commits.run_id AND created_at = ?)`,
			status, string(receipt), errText, s.now().UnixNano(),
			rec.ID, rec.RunID, CommitPending, rec.CreatedAt.UnixNano(), pc.runCreated)
		if err != nil {
			return index.Translate(err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return index.Translate(err)
		}
		if n == 0 {
			// Deleting the run removes the row; deliver and ResolveCommit
			// move it from pending.
			var now []string
			if err := tx.SelectContext(ctx, &now, `SELECT c.status FROM commits c JOIN runs r ON r.id = c.run_id
				WHERE c.id = ? AND c.run_id = ? AND c.created_at = ? AND r.created_at = ?`,
				rec.ID, rec.RunID, rec.CreatedAt.UnixNano(), pc.runCreated); err != nil {
				return index.Translate(err)
			}
			if len(now) == 0 {
				return errCommitGone
			}
			return errCommitResolved{status: now[0]}
		}
		payload := map[string]any{"commitId": rec.ID, "checkpointId": rec.CheckpointID, "mode": rec.Mode, "kind": rec.Kind}
		if errText != "" {
			payload["error"] = errText
		}
		if resolved {
			payload["resolved"] = true
		}
		if _, err := s.journal.Append(ctx, tx, rec.RunID, typ, level, payload); err != nil {
			return err
		}
		if status == CommitCompleted && rec.Kind == "rollback" {
			_, err = s.journal.Append(ctx, tx, rec.RunID, journal.CommitRolledBack, journal.Info, map[string]any{
				"commitId": rec.ID, "checkpointId": rec.CheckpointID, "mode": rec.Mode,
			})
		}
		return err
	})
}

// errCommitGone rolls back recordOutcome's transaction when the commit row
// is no longer there to complete; deliver reports it as run.not_found.
var errCommitGone = errors.New("commit row gone")

// errCommitResolved rolls back recordOutcome's transaction when the commit
// row is no longer pending: status is what it became.
type errCommitResolved struct{ status string }

func (e errCommitResolved) Error() string { return "commit already " + e.status }

// CommitOutcome is what a host states became of a pending commit
// (ResolveCommit).
type CommitOutcome struct {
	// Status is CommitCompleted (the sink saved the message) or
	// CommitFailed (it did not).
	Status string `json:"status"`
	// Receipt is kept as a sink's is: JSON as it is, anything else as a
	// JSON string of its bytes, none as {}.
	Receipt json.RawMessage `json:"receipt,omitempty"`
	// Error says why it failed; only with CommitFailed.
	Error string `json:"error,omitempty"`
}

// ResolveCommit records the outcome of commit commitID of run runID that
// is still pending: the process that called its sink ended, or the store
// was closed, before the sink's outcome was recorded, so the host, which
// can tell from its own chat whether the message was saved, states it.
// The commit becomes completed or failed as a delivery would make it, with
// chat_commit_completed or chat_commit_failed journaled (and, for a
// rollback completed, commit_rolled_back), the chat_commit_* event's
// payload marked "resolved": true. Resolve a commit on the store that
// made it: resolved on two devices, the run's journals part, and sync
// reports the run as a conflict from then on. Until then retention keeps the run (PruneReport.Held).
// It fails with workspace.invalid_argument for an outcome other than
// completed or failed, an error given with completed, or a receipt or
// error past MaxOutcomeBytes; run.not_found;
// store.not_found for a commit the run does not have;
// run.invalid_transition for one that is no longer pending; store.busy
// while this Service is saving a commit to the run's chat (the commit may
// be that very one). A commit whose sink another process is calling is
// not known to be in flight: resolving it makes that delivery fail with
// run.invalid_transition and record nothing.
func (s *Service) ResolveCommit(ctx context.Context, runID, commitID string, out CommitOutcome) (CommitRecord, error) {
	const op = "resolve commit"
	switch {
	case out.Status != CommitCompleted && out.Status != CommitFailed:
		return CommitRecord{}, wserr.New(wserr.InvalidArgument, op, "", "the outcome must be %s or %s, not %q", CommitCompleted, CommitFailed, out.Status)
	case out.Status == CommitCompleted && out.Error != "":
		return CommitRecord{}, wserr.New(wserr.InvalidArgument, op, "", "an error is stated only for a failed commit")
	case len(keptReceipt(out.Receipt)) > MaxOutcomeBytes || len(out.Error) > MaxOutcomeBytes:
		return CommitRecord{}, wserr.New(wserr.InvalidArgument, op, "", "the receipt (%d bytes as JSON) and the error (%d bytes) are each at most %d: the commit's row holds them", len(keptReceipt(out.Receipt)), len(out.Error), MaxOutcomeBytes)
	}
	unlock, err := s.lockSaves(ctx, runID)
	if err != nil {
		return CommitRecord{}, err
	}
	var resolvedAs string
	defer func() { s.afterOutcome(ctx, runID, resolvedAs) }() // once unlocked
	defer unlock()
	var pc pendingCommit
	err = s.db.View(ctx, func(tx *index.Tx) error {
		run, err := findRun(ctx, tx, runID)
		if err != nil {
			return err
		}
		var rows []commitRow
		if err := tx.SelectContext(ctx, &rows, `SELECT id, run_id, seq, checkpoint_seq, mode, kind, status, message, receipt, error, created_at
			FROM commits WHERE id = ? AND run_id = ?`, commitID, runID); err != nil {
			return index.Translate(err)
		}
		if len(rows) == 0 {
			return wserr.New(wserr.NotFound, op, "", "run %s has no commit %q", runID, commitID)
		}
		if rows[0].Status != CommitPending {
			return wserr.New(wserr.InvalidState, op, "", "commit %s is %s already; only a pending commit is resolved", commitID, rows[0].Status)
		}
		rec, err := rows[0].record()
		pc = pendingCommit{rec: rec, runCreated: run.CreatedAt.UnixNano()}
		return err
	})
	if err != nil {
		return CommitRecord{}, err
	}
	receipt := keptReceipt(out.Receipt)
	err = s.recordOutcome(ctx, pc, out.Status, receipt, out.Error, true)
	var resolved errCommitResolved
	switch {
	case errors.Is(err, errCommitGone):
		return CommitRecord{}, wserr.New(wserr.RunNotFound, op, "", "run %s was deleted meanwhile", runID)
	case errors.As(err, &resolved):
		return CommitRecord{}, wserr.New(wserr.InvalidState, op, "", "commit %s was resolved as %s meanwhile", commitID, resolved.status)
	case err != nil:
		return CommitRecord{}, fmt.Errorf("%s %s: %w", op, commitID, err)
	}
	rec := pc.rec
	rec.Status, rec.Receipt, rec.Error = out.Status, receipt, out.Error
	resolvedAs = out.Status
	return rec, nil
}

// afterOutcome prunes the chat of run runID when automatic pruning is on,
// the commit's outcome (status) was recorded and the run has ended: a
// pass that met the run while the commit was pending kept it
// (PruneReport.Held), and would otherwise wait for the next run to end.
// It goes as afterFinal does; the outcome stands whatever it does.
func (s *Service) afterOutcome(ctx context.Context, runID, status string) {
	if status != CommitCompleted && status != CommitFailed {
		return
	}
	if auto, err := s.autoPrune(ctx); err != nil || !auto {
		return
	}
	var run Run
	err := s.db.View(ctx, func(tx *index.Tx) error {
		var err error
		run, err = findRun(ctx, tx, runID)
		return err
	})
	if err == nil && run.Status.Final() {
		s.afterFinal(ctx, runID, run.ChatID, s.candidatesEnd(ctx))
	}
}

// callSink calls the sink, turning a panic into an error so the commit is
// still recorded as failed.
func callSink(ctx context.Context, sink ChatSink, req CommitRequest) (receipt json.RawMessage, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("chat sink panicked: %v", r)
		}
	}()
	return sink.Commit(ctx, req)
}

// RollbackCommit re-assembles the run's message from checkpoint seq and
// hands the sink a replace of the committed message, or a delete when
// del is set. Once the sink has saved it, commit_rolled_back is journaled
// with the commit's completion; a failed save journals only
// chat_commit_failed. The run's workspace is not changed. It fails with
// checkpoint.not_found, the assembly errors of Commit, commit.sink_failed,
// run.not_found (also when the run is deleted while the sink runs),
// run.invalid_transition (no completed commit, the newest one a delete,
// or resolved meanwhile), or store.busy as Commit does. The checkpoint's
// files are assembled with the manifest the run holds now: checkpoints do
// not keep one of their own.
func (s *Service) RollbackCommit(ctx context.Context, runID string, seq int64, sink ChatSink, del bool) (CommitRecord, error) {
	if sink == nil {
		return CommitRecord{}, wserr.New(wserr.InvalidArgument, "rollback commit", "", "no chat sink")
	}
	return s.commitThrough(ctx, runID, sink, func(tx *index.Tx) (pendingCommit, error) {
		run, err := findRun(ctx, tx, runID)
		if err != nil {
			return pendingCommit{}, err
		}
		// The chat's message is what the run's newest completed commit
		// left: none, or one a rollback deleted, leaves nothing to replace
		// or delete.
		var last struct {
			ID   string `db:"id"`
			Mode string `db:"mode"`
		}
		err = tx.GetContext(ctx, &last, `SELECT id, mode FROM commits WHERE run_id = ? AND status = ? ORDER BY seq DESC LIMIT 1`, runID, CommitCompleted)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return pendingCommit{}, wserr.New(wserr.InvalidState, "rollback commit", "", "run %s has no completed commit to roll back", runID)
		case err != nil:
			return pendingCommit{}, index.Translate(err)
		case last.Mode == string(ModeDelete):
			return pendingCommit{}, wserr.New(wserr.InvalidState, "rollback commit", "", "run %s's committed message was deleted by %s: there is none to roll back until the run commits again", runID, last.ID)
		}
		cp, err := s.checkpoints.Get(ctx, tx, runID, seq)
		if err != nil {
			return pendingCommit{}, err
		}
		mode := ModeDelete
		msg := Message{Extra: map[string]string{}, Agent: AgentMetadata{RunID: run.ID, StableChatID: run.StableChatID, ProfileID: run.Profile.ID, Artifacts: []ArtifactRef{}}}
		if !del {
			mode = ModeReplace
			man, err := loadManifest(ctx, tx, runID)
			if err != nil {
				return pendingCommit{}, err
			}
			if msg, err = s.assemble(ctx, tx, run, cp.Root, man, nil); err != nil {
				return pendingCommit{}, err
			}
		}
		return s.recordCommit(ctx, tx, run, cp, mode, "rollback", msg)
	})
}

// lockSaves takes the turn to save to the chat of run runID and returns
// what ends it: seed 000 wants a chat's saves serialized, and a host's
// sink need not expect two calls at once for one chat. The turn spans the
// whole commit, from recording it as pending to recording its outcome;
// meanwhile Finish refuses the run. A commit that finds the turn taken
// fails at once with store.busy and records nothing: waiting would hang a
// sink that commits to its own chat. Commits made by other processes on
// the same store are not serialized with these.
func (s *Service) lockSaves(ctx context.Context, runID string) (func(), error) {
	var chatID string
	err := s.db.View(ctx, func(tx *index.Tx) error {
		run, err := findRun(ctx, tx, runID)
		chatID = run.ChatID
		return err
	})
	if err != nil {
		return nil, err
	}
	unlock, ok := s.saves.tryLock(chatID, runID)
	if !ok {
		return nil, wserr.New(wserr.Busy, "commit", "", "chat %s is saving another commit: retry once it is done", chatID)
	}
	return unlock, nil
}

// chatLocks hands out one turn at a time per chat, and knows which runs
// hold one.
type chatLocks struct {
	mu     sync.Mutex
	chats  map[string]bool // chat id: its turn is taken
	saving map[string]int  // run id: its commits holding a turn (a run deleted and created again may have two)
}

// tryLock takes chatID's turn for run runID if it is free, and returns
// the function that ends it.
func (l *chatLocks) tryLock(chatID, runID string) (func(), bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.chats[chatID] {
		return nil, false
	}
	if l.chats == nil {
		l.chats, l.saving = map[string]bool{}, map[string]int{}
	}
	l.chats[chatID] = true
	l.saving[runID]++
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		delete(l.chats, chatID)
		if l.saving[runID]--; l.saving[runID] == 0 {
			delete(l.saving, runID)
		}
	}, true
}

// isSaving reports whether a commit of runID holds its chat's turn.
func (l *chatLocks) isSaving(runID string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.saving[runID] > 0
}

type commitRow struct {
	ID            string `db:"id"`
	RunID         string `db:"run_id"`
	Seq           int64  `db:"seq"`
	CheckpointSeq int64  `db:"checkpoint_seq"`
	Mode          string `db:"mode"`
	Kind          string `db:"kind"`
	Status        string `db:"status"`
	Message       string `db:"message"`
	Receipt       string `db:"receipt"`
	Error         string `db:"error"`
	CreatedAt     int64  `db:"created_at"`
}

// Commits lists the run's commits in order, every message held at once
// (each up to MaxMessageBytes): for a run of a few commits. CommitsPage
// reads them a page at a time.
func (s *Service) Commits(ctx context.Context, runID string) ([]CommitRecord, error) {
	out := []CommitRecord{}
	q := CommitQuery{Limit: MaxCommitPage}
	for {
		page, more, err := s.CommitsPage(ctx, runID, q)
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if !more {
			return out, nil
		}
		q.AfterSeq = page[len(page)-1].Seq
	}
}

// CommitQuery selects a page of a run's commits (CommitsPage).
type CommitQuery struct {
	// AfterSeq lists the commits after this seq; 0 from the first.
	AfterSeq int64
	// Limit is the most commits a page holds: 1..MaxCommitPage, 0 for
	// DefaultCommitPage.
	Limit int
}

// The commits a page holds.
const (
	DefaultCommitPage = 100
	MaxCommitPage     = 500
)

// CommitsPage lists the run's commits after q.AfterSeq in order: up to
// q.Limit, and ending before a commit whose message, receipt and error
// would take the page's past MaxMessageBytes (a page holds one commit at
// least), so a page holds about one full message's worth. more says whether commits
// after the page remain. A run with no commits (after AfterSeq) has an
// empty page; a run the store does not hold is run.not_found.
// A negative AfterSeq or a Limit outside 0..MaxCommitPage is
// workspace.invalid_argument.
func (s *Service) CommitsPage(ctx context.Context, runID string, q CommitQuery) (page []CommitRecord, more bool, err error) {
	if q.Limit == 0 {
		q.Limit = DefaultCommitPage
	}
	if q.AfterSeq < 0 || q.Limit < 1 || q.Limit > MaxCommitPage {
		return nil, false, wserr.New(wserr.InvalidArgument, "commits", "", "afterSeq %d must not be negative and limit %d must be in 1..%d", q.AfterSeq, q.Limit, MaxCommitPage)
	}
	var rows []commitRow
	err = s.db.View(ctx, func(tx *index.Tx) error {
		// The rows' sizes first (message, receipt, error), from their
		// headers: where the page ends is known before any is read.
		var sizes []struct {
			Seq   int64 `db:"seq"`
			Bytes int64 `db:"bytes"`
		}
		if err := tx.SelectContext(ctx, &sizes, `SELECT seq, octet_length(message) + coalesce(octet_length(receipt), 0) + coalesce(octet_length(error), 0) AS bytes FROM commits
			WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?`, runID, q.AfterSeq, q.Limit+1); err != nil {
			return index.Translate(err)
		}
		n, total := 0, int64(0)
		for _, r := range sizes {
			if n == q.Limit || n > 0 && total+r.Bytes > MaxMessageBytes {
				more = true
				break
			}
			total += r.Bytes
			n++
		}
		if n == 0 {
			// No commits, or no such run: run.not_found tells them apart.
			_, err := findRun(ctx, tx, runID)
			return err
		}
		return index.Translate(tx.SelectContext(ctx, &rows, `SELECT id, run_id, seq, checkpoint_seq, mode, kind, status, message, receipt, error, created_at
			FROM commits WHERE run_id = ? AND seq > ? AND seq <= ? ORDER BY seq`, runID, q.AfterSeq, sizes[n-1].Seq))
	})
	if err != nil {
		return nil, false, err
	}
	page = make([]CommitRecord, 0, len(rows))
	for _, r := range rows {
		rec, err := r.record()
		if err != nil {
			return nil, false, err
		}
		page = append(page, rec)
	}
	return page, more, nil
}

// record is the row as a CommitRecord; a message that is not JSON is
// store.corrupt.
func (r commitRow) record() (CommitRecord, error) {
	rec := CommitRecord{ID: r.ID, RunID: r.RunID, Seq: r.Seq, CheckpointID: checkpoint.ID(r.CheckpointSeq), Mode: CommitMode(r.Mode),
		Kind: r.Kind, Status: r.Status, Receipt: json.RawMessage(r.Receipt), Error: r.Error, CreatedAt: time.Unix(0, r.CreatedAt).UTC()}
	if err := json.Unmarshal([]byte(r.Message), &rec.Message); err != nil {
		return CommitRecord{}, wserr.New(wserr.Corrupt, "commits", "", "commit %s has an unreadable message: %v", r.ID, err)
	}
	return rec, nil
}
