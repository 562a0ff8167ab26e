package journal

// Typed payloads for the common events, so callers do not hand-build maps
// and readers can decode an event's Payload with json.Unmarshal. Each
// names the event type it goes with; Append does not enforce the pairing,
// because the vocabulary, not the payload shape, is what stays closed.
// Hashes are cas.Hash hex strings; keeping them as strings here keeps
// journal independent of cas.

// FileWritten is the payload of WorkspaceFileWritten.
type FileWritten struct {
	Path     string `json:"path"`
	Hash     string `json:"hash"`
	Bytes    int64  `json:"bytes"`
	Mode     string `json:"mode"`               // how the file was written, e.g. "create", "overwrite", "append"
	PrevHash string `json:"prevHash,omitempty"` // empty when the file is new
}

// PatchApplied is the payload of WorkspacePatchApplied.
type PatchApplied struct {
	Path         string `json:"path"`
	Hash         string `json:"hash"`
	PrevHash     string `json:"prevHash"`
	Replacements int    `json:"replacements"`
}

// FileDeleted is the payload of WorkspaceFileDeleted.
type FileDeleted struct {
	Path     string `json:"path"`
	PrevHash string `json:"prevHash"`
}

// StatusChange is the payload of StatusChanged.
type StatusChange struct {
	From   string `json:"from"`
	To     string `json:"to"`
	Reason string `json:"reason,omitempty"`
}

// CheckpointMade is the payload of CheckpointCreated. Seq is the
// checkpoint's own number within its run, not an event seq (the event
// carries that already).
type CheckpointMade struct {
	CheckpointID string `json:"checkpointId"`
	Seq          int64  `json:"seq"`
	Root         string `json:"root"`
	Reason       string `json:"reason"`
	Parent       string `json:"parent,omitempty"` // the previous checkpoint's id; empty for the first
}

// Pruned is the payload of CheckpointsPruned: the checkpoints a run's cap
// (its profile's maxCheckpoints) deleted, right after the
// checkpoint_created event of the checkpoint that took the run past it.
// CheckpointIDs names the first 1,000 of them (runs.MaxPrunedCheckpointIDs),
// oldest first, and CheckpointCount counts every one.
type Pruned struct {
	CheckpointIDs   []string `json:"checkpointIds"`
	CheckpointCount int      `json:"checkpointCount"`
	MaxCheckpoints  int      `json:"maxCheckpoints,omitempty"`
	// MaxCheckpointBytes and FreedBytes are set when the byte cap
	// (maxCheckpointBytesPerRun) pruned: the cap and what the pruned
	// checkpoints held beyond the ones kept.
	MaxCheckpointBytes int64 `json:"maxCheckpointBytes,omitempty"`
	FreedBytes         int64 `json:"freedBytes,omitempty"`
}

// Collected is the payload of ScratchCollected: what a run's
// scratch/ held when the run ended (Bytes, Files, counted on the live
// workspace), the final status that collected it, and how many of the
// run's checkpoints were rewritten without it.
type Collected struct {
	Status      string `json:"status"`
	Bytes       int64  `json:"bytes"`
	Files       int64  `json:"files"`
	Checkpoints int64  `json:"checkpoints"`
	Root        string `json:"root"`     // the live root without scratch/
	PrevRoot    string `json:"prevRoot"` // the live root it replaced
}

// RolledBack is the payload of WorkspaceRolledBack.
type RolledBack struct {
	CheckpointID string `json:"checkpointId"`
	Root         string `json:"root"`     // the root restored
	PrevRoot     string `json:"prevRoot"` // the root replaced
}

// ContextSource is one part of an assembled model context: where it came
// from (e.g. "prompt_snapshot", "world_info", "persist") and its size.
type ContextSource struct {
	Name   string `json:"name"`
	Bytes  int64  `json:"bytes,omitempty"`
	Tokens int64  `json:"tokens,omitempty"`
}

// ContextAssembledPayload is the payload of ContextAssembled: what went
// into the model's context before its first round.
type ContextAssembledPayload struct {
	Sources  []ContextSource `json:"sources"`
	Messages int             `json:"messages,omitempty"`
	Tokens   int64           `json:"tokens,omitempty"`
}

// ModelRequest is the payload of ModelRequestCreated: round Round of the
// model loop was sent.
type ModelRequest struct {
	Round    int    `json:"round"`
	Model    string `json:"model,omitempty"`
	Messages int    `json:"messages,omitempty"`
	Tools    int    `json:"tools,omitempty"`
}

// ModelDone is the payload of ModelCompleted: the model answered round
// Round.
type ModelDone struct {
	Round        int      `json:"round"`
	FinishReason string   `json:"finishReason,omitempty"`
	InputTokens  int64    `json:"inputTokens,omitempty"`
	OutputTokens int64    `json:"outputTokens,omitempty"`
	ToolCallIDs  []string `json:"toolCallIds,omitempty"` // the tool calls the answer asks for
}

// RecordStored is the payload of ModelResponseStored and part of the tool
// call payloads: a file the host recorded beside the run's workspace, at
// Path (e.g. "model-responses/round-001.json"), with its content's hash
// and size.
type RecordStored struct {
	Round int    `json:"round,omitempty"`
	Path  string `json:"path"`
	Hash  string `json:"hash"`
	Bytes int64  `json:"bytes"`
}

// ToolCall is the payload of ToolCallRequested, ToolCallCompleted and
// ToolCallFailed: the call's id and tool, and the file that holds its
// arguments (tool-args/<id>.json) or its result (tool-results/<id>.json).
// A failed call carries the error's code and message as the model was told
// them.
type ToolCall struct {
	ToolCallID string `json:"toolCallId"`
	Name       string `json:"name,omitempty"` // a result's: as its host gave it, if it did
	Round      int    `json:"round,omitempty"`
	Path       string `json:"path"`
	Hash       string `json:"hash"`
	Bytes      int64  `json:"bytes"`
	Code       string `json:"code,omitempty"`
	Message    string `json:"message,omitempty"`
}
