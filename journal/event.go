package journal

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/wsstore/wsstore/wserr"
)

// Level is the severity of an event.
type Level string

// Levels, from least to most severe.
const (
	Debug Level = "debug"
	Info  Level = "info"
	Warn  Level = "warn"
	Error Level = "error"
)

// Valid reports whether l is one of the four levels.
func (l Level) Valid() bool {
	switch l {
	case Debug, Info, Warn, Error:
		return true
	}
	return false
}

// Type names what an event records. The set is closed: Append refuses any
// value that is not one of the constants below, so a timeline can render
// every event it reads.
type Type string

// Run lifecycle.
const (
	RunCreated    Type = "run_created"
	RunCompleted  Type = "run_completed"
	RunFailed     Type = "run_failed"
	RunCancelled  Type = "run_cancelled"
	StatusChanged Type = "status_changed"
	RunFinished   Type = "run_finished"
)

// Context and model calls.
const (
	ContextAssembled    Type = "context_assembled"
	ModelRequestCreated Type = "model_request_created"
	ModelCompleted      Type = "model_completed"
	ModelResponseStored Type = "model_response_stored"
)

// Tool calls.
const (
	ToolCallRequested Type = "tool_call_requested"
	ToolCallCompleted Type = "tool_call_completed"
	ToolCallFailed    Type = "tool_call_failed"
)

// Workspace changes, checkpoints and rollbacks.
const (
	WorkspaceFileWritten  Type = "workspace_file_written"
	WorkspacePatchApplied Type = "workspace_patch_applied"
	WorkspaceFileDeleted  Type = "workspace_file_deleted"
	CheckpointCreated     Type = "checkpoint_created"
	CheckpointsPruned     Type = "checkpoints_pruned" // a run's checkpoint cap deleted its oldest
	WorkspaceRolledBack   Type = "workspace_rolled_back"
	ScratchCollected      Type = "scratch_collected" // an ended run's scratch/ left its workspace and checkpoints
)

// Output assembly, chat commit and persistent changes.
const (
	ArtifactAssembled          Type = "artifact_assembled"
	ChatCommitRequested        Type = "chat_commit_requested"
	ChatCommitCompleted        Type = "chat_commit_completed"
	ChatCommitFailed           Type = "chat_commit_failed"
	CommitRolledBack           Type = "commit_rolled_back"
	PersistentChangesCommitted Type = "persistent_changes_committed"
	ManifestSet                Type = "manifest_set"
)

// Retention.
const (
	// RetentionFailed records, on the run whose end started it, an
	// automatic retention pass that failed; what it deleted before failing
	// is in the store's deletion log.
	RetentionFailed Type = "retention_failed"
)

// types lists the vocabulary in the order the constants are declared.
var types = []Type{
	RunCreated, RunCompleted, RunFailed, RunCancelled, StatusChanged, RunFinished,
	ContextAssembled, ModelRequestCreated, ModelCompleted, ModelResponseStored,
	ToolCallRequested, ToolCallCompleted, ToolCallFailed,
	WorkspaceFileWritten, WorkspacePatchApplied, WorkspaceFileDeleted, CheckpointCreated, CheckpointsPruned, WorkspaceRolledBack, ScratchCollected,
	ArtifactAssembled, ChatCommitRequested, ChatCommitCompleted, ChatCommitFailed, CommitRolledBack,
	PersistentChangesCommitted, ManifestSet,
	RetentionFailed,
}

// Types returns every known event type, for help texts, filters and tests.
// The slice is a copy; changing it changes nothing in the package.
func Types() []Type { return slices.Clone(types) }

// Valid reports whether t is one of the known event types.
func (t Type) Valid() bool { return slices.Contains(types, t) }

// Event is one journal entry. Its JSON form is one line of events.jsonl.
type Event struct {
	RunID   string          `json:"runId"`
	Seq     int64           `json:"seq"`
	Type    Type            `json:"type"`
	Level   Level           `json:"level"`
	At      time.Time       `json:"at"`      // UTC, from the injected clock; stored as Unix nanoseconds
	Payload json.RawMessage `json:"payload"` // a JSON object, "{}" when empty
}

// row is an event as the events table stores it.
type row struct {
	RunID   string `db:"run_id"`
	Seq     int64  `db:"seq"`
	Type    string `db:"type"`
	Level   string `db:"level"`
	At      int64  `db:"at"`
	Payload []byte `db:"payload"` // plain JSON text or packed (packed.go)
}

// event returns the row as an Event. A payload that does not decode fails
// with store.corrupt naming the run and seq.
func (r row) event(op string) (Event, error) {
	payload, err := decodeEventPayload(r.Payload)
	if err != nil {
		return Event{}, &wserr.Error{Code: wserr.Corrupt, Op: op, Msg: fmt.Sprintf("run %s seq %d", r.RunID, r.Seq), Err: err}
	}
	return Event{
		RunID:   r.RunID,
		Seq:     r.Seq,
		Type:    Type(r.Type),
		Level:   Level(r.Level),
		At:      time.Unix(0, r.At).UTC(),
		Payload: json.RawMessage(payload),
	}, nil
}

// decodeEventPayload returns the JSON text of a stored payload and fails
// unless it is one JSON object, as Append wrote it.
func decodeEventPayload(stored []byte) ([]byte, error) {
	payload, err := decodePayload(stored)
	if err != nil {
		return nil, err
	}
	if len(payload) == 0 || payload[0] != '{' || !json.Valid(payload) {
		return nil, fmt.Errorf("payload is not a JSON object")
	}
	return payload, nil
}
