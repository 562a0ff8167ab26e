package protocol

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/checkpoint"
	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// op is one operation: its name, the Go types that spell its request
// (the request and the objects nested in it), its help, and its handler,
// which decodes the request and returns the result object.
type op struct {
	name   string
	access access // reads or writes: every op declares which
	// noRun: the op acts on no run, so a request naming one ("runId") is
	// refused, never read as a scope the op does not have.
	noRun   bool
	request []any // zero values of its request type and the object types nested in it
	handle  func(s *Session, ctx context.Context, r request) (any, error)
	help    string // its lines in Help; a test checks that they name every field
}

// ops are the operations, in the order help lists them.
var ops = []op{
	{
		name: "run.create", access: writes, request: []any{createRequest{}, runs.ChatKey{}, runs.Profile{}, runs.Manifest{}, runs.Artifact{}, runs.CommitPolicy{}}, handle: (*Session).runCreate,
		help: `  run.create  {chat: {kind, stableChatId}, chatRef?, runId?, profile?, inputs?: {path: text}, manifest?}
              -> {runId, workspaceId}      inputs land under input/
      chat         the host's chat: two non-empty strings. Every run of
                   one chat shares its workspace (workspaceId) and persist/.
      chatRef      any JSON value by which the host finds the chat, e.g.
                   {"characterId": "keeper", "fileName": "Keeper.jsonl"};
                   default {}. Unlike chat it may change from run to run
                   (a renamed chat file): the run keeps its own (wsctl
                   show prints it), the chat the latest.
      profile      what the agent (write, read, list, …) may see and do:
                   {id?, visibleRoots?, writableRoots?, autoCheckpoint?,
                    maxRunBytes?, maxCheckpoints?, maxCheckpointBytes?,
                    keepScratch?, allowPaths?, primaryRoot?}
        id             a name for the profile; default "default"
        visibleRoots   top-level directories the agent may read, e.g.
                       ["output", "scratch"]; default output, scratch,
                       plan, summaries, persist; input and the runtime names
                       (tool-args, tool-results, model-responses,
                       checkpoints, events.jsonl, manifest.json) are
                       refused: the model never sees them; so are host
                       (allowPaths' place, in every profile), a root named
                       twice, and two that differ only in case
        writableRoots  those of visibleRoots it may write; default all of
                       them but input, which is never writable
        autoCheckpoint true or false: a checkpoint after each change; default true
        maxRunBytes    an integer: the most bytes the run may add to its
                       workspace (input/ and the persist/ it inherited do
                       not count); a write that would cross it is refused;
                       0 (the default): no cap
        maxCheckpoints an integer: the most checkpoints the run keeps; a
                       checkpoint past it deletes the oldest, recorded by a
                       checkpoints_pruned event, and those read as
                       checkpoint.not_found; a checkpoint a commit was made
                       from is never deleted, even if that keeps the run
                       above the cap; 0 (the default): no cap
        maxCheckpointBytes an integer: the most bytes the run's checkpoints
                       may keep beyond its live tree; past it the oldest go,
                       as for maxCheckpoints; 0 (the default): the chat's
                       maxCheckpointBytesPerRun, if any
        keepScratch    {completed?, failed?, cancelled?}: booleans, whether
                       a run ending so keeps scratch/; default false for
                       completed, true for failed and cancelled. Otherwise
                       scratch/ leaves the workspace and its checkpoints
                       when the run ends (a scratch_collected event)
        allowPaths     host directories the run reaches as host/NAME/…:
                       [{path, name?, writable?}] or bare path strings;
                       path absolute and existing (the store creates no
                       host directory), name default its last element
                       (not "": leave it out), unique ignoring case,
                       writable default false. Boundaries only: no
                       symlink or .. leaves one; never checkpointed,
                       exported or collected
        primaryRoot    the active project: an absolute path inside
                       allowPaths, or host/NAME/… or output/…; default
                       allowPaths[0], else output; any other place fails
                       with workspace.path_not_allowed
      manifest     {workspaceVersion: 1, artifacts: [ARTIFACT, …], commitPolicy?}
                   as manifest.set takes it: ARTIFACT {id, path, kind?,
                   target?, required?, assemblyOrder?}, commitPolicy
                   {defaultTarget?, combineTemplate?, storeArtifactsInExtra?};
                   default output/main.md as the message body. A manifest
                   (the default one too) whose required artifacts the
                   profile cannot write is manifest.invalid: no commit
                   could find them`,
	},
	{
		name: "write", access: writes, request: []any{writeRequest{}}, handle: (*Session).write,
		help: `  write       {path, content | contentBase64, expectedHash?}
              -> {path, hash, size, checkpointId?}
              expectedHash: the file's hash as last read (64 hex digits; not
              the zero hash): the write fails with workspace.write_stale_file
              if the file changed since`,
	},
	{
		name: "append", access: writes, request: []any{writeRequest{}}, handle: (*Session).append,
		help: `  append      {path, content | contentBase64, expectedHash?}   -> as write`,
	},
	{
		name: "patch", access: writes, request: []any{patchRequest{}}, handle: (*Session).patch,
		help: `  patch       {path, old, new, replaceAll?, expectedHash?}      -> as write`,
	},
	{
		name: "delete", access: writes, request: []any{pathRequest{}}, handle: (*Session).delete,
		help: `  delete      {path}                        -> {path, hash?, checkpointId?}   hash: the removed content (none for a host symlink leading to no file)`,
	},
	{
		name: "read", access: reads, request: []any{readRequest{}}, handle: (*Session).read,
		help: `  read        {path, at?, startLine?, endLine?}
              -> {path, content | contentBase64, hash, size, totalLines?, startLine?, endLine?, truncated?, totalLinesUnknown?}
              a read returns at most 16 MiB: a larger file is refused
              whole (workspace.size_limit_exceeded) and read by line
              range, only up to the range's end (a host file's rest is
              read too, not held, for its hash; totalLinesUnknown: the
              lines were not counted to the end), the range cut to the whole
              lines that fit (endLine the last one returned, below the
              range's end); truncated: the answer leaves part of the file
              out, by the range asked for or by that cut; wsctl cat
              streams a file of any size`,
	},
	{
		name: "list", access: reads, request: []any{listRequest{}}, handle: (*Session).list,
		help: `  list        {path?, depth?, at?, after?, limit?}  -> {entries: [{path, kind, size, hash, resource, writable, modTime?}], more}
              path: default the root. depth: how many levels below path
              to list, an integer; default 1, the direct entries (0 is 1
              too); 2 adds their children, and so on. hash is left out
              for host files (host/…), so a listing reads no file; stat
              gives it. modTime: when the host last changed a file or
              directory below host/NAME/ (RFC 3339); stored ones have
              none. A page: limit default 10000, at most 100000; more
              says entries remain (ask again with after the last entry's
              path). The profile's visible roots are always directories,
              listed even when they hold no file`,
	},
	{
		name: "checkpoint", access: writes, request: []any{checkpointRequest{}}, handle: (*Session).checkpoint,
		help: `  checkpoint  {reason?}                     -> {checkpointId, seq}`,
	},
	{
		name: "rollback", access: writes, request: []any{rollbackRequest{}}, handle: (*Session).rollback,
		help: `  rollback    {checkpointId | checkpointSeq, pause?}  -> {runId, root, checkpointId, status}`,
	},
	{
		name: "diff", access: reads, request: []any{diffRequest{}}, handle: (*Session).diff,
		help: `  diff        {from, to?, maxBytes?, after?, limit?}  -> {changes: [{path, op, unified?, binary?, tooLarge?, truncated?, omittedHunks?, ...}], more}  to: default live
              unified: the text wsctl diff prints, with git's headers
              ("--- /dev/null" for an added file, "+++ /dev/null" for a deleted one);
              none for a binary file (binary: true) or one with a side past 1 MiB (tooLarge: true)
              maxBytes: cap on the unified text of the response (default 8 MiB; through
              wsctl serve at most 16 MiB, workspace.invalid_argument past it); a file it cut
              has truncated: true and omittedHunks: hunks left out (0: its whole text)
              a page of files in path order: after (the last path of the page before),
              limit (default 10000, at most 100000); more: files remain after it`,
	},
	{
		name: "commit", access: writes, request: []any{commitRequest{}}, handle: (*Session).commit,
		help: `  commit      {path?, mode?: replace|append} -> {commitId, checkpointId, mode, message}`,
	},
	{
		name: "finish", access: writes, request: []any{base{}}, handle: (*Session).finish,
		help: `  finish      {}                            -> {runId, status, persistChanges, persistVersion, merged}`,
	},
	{
		name: "events", access: reads, request: []any{eventsRequest{}}, handle: (*Session).events,
		help: `  events      {afterSeq?, beforeSeq?, limit?}  -> {events: [...], more}   limit: default 100, at most 500
              oldest first; with beforeSeq alone, the newest page below it
              (scroll back: beforeSeq the page's first seq); more: events
              follow the page (below beforeSeq)`,
	},
	{
		name: "manifest.set", access: writes, request: []any{manifestRequest{}, runs.Manifest{}, runs.Artifact{}, runs.CommitPolicy{}}, handle: (*Session).manifestSet,
		help: `  manifest.set {manifest}                   -> {artifacts}
      manifest     {workspaceVersion: 1, artifacts: [ARTIFACT, …], commitPolicy?}
        ARTIFACT     {id, path, kind?, target?, required?, assemblyOrder?}
                     target: "message_body", "combined_markdown", "hidden"
                     or {"message_extra": KEY}, default commitPolicy's
                     defaultTarget; assemblyOrder: an integer
        commitPolicy {defaultTarget?: "message_body", combineTemplate?, storeArtifactsInExtra?}
                     combineTemplate: text where {{id}} stands for that
                     artifact's content
                   a manifest that is invalid, or has a field unknown or
                   of the wrong type, is refused with manifest.invalid`,
	},
	{
		name: "run.status", access: writes, request: []any{statusRequest{}}, handle: (*Session).runStatus,
		help: `  run.status  {status, reason?}             -> {runId, status, primaryRoot}
              status: e.g. failed or cancelled (a run completes only
              through finish). primaryRoot: the run's active project
              {source, path, hostPath?}, source explicit, allowPaths or
              artifact; run.show reports it too`,
	},
	{
		name: "export", noRun: true, access: reads, request: []any{exportRequest{}}, handle: (*Session).export,
		help: `  export      {path, runs?, chats?, actors?, all?, skipWorkspace?}
              -> {objects, blobs, trees, bytes, archiveBytes, chats, runs, actors, events, seconds}
              writes an archive (docs/archive.md) of the runs, chat
              workspaces (by workspaceId or KIND:STABLE_CHAT_ID, with their runs), actor spaces or
              the whole store to the file path on the host; scratch/ is
              never exported; skipWorkspace leaves actor spaces out.
              wsctl batch refuses (workspace.invalid_argument) a path that
              is its own standard input or output, for import too`,
	},
	{
		name: "import", noRun: true, access: writes, request: []any{importRequest{}}, handle: (*Session).importArchive,
		help: `  import      {path}                        -> as export, with added, unchanged, conflicts: [{kind, id, reason}],
                                                addedCount?, unchangedCount?, conflictCount?, newObjects?
              each list names its first 1,000 (conflicts 10,000) in the
              archive's order; the counts count all (absent: none);
              newObjects: the blobs the store did not hold (absent: none);
              verifies the whole archive before any row is visible: a
              damaged one fails with archive.corrupt, another version with
              archive.unsupported_version, and nothing is imported`,
	},
	{
		name: "prune", noRun: true, access: writes, request: []any{pruneRequest{}}, handle: (*Session).prune,
		help: `  prune       {dryRun?, workspaceId?}       -> {dryRun, runs: [{runId, workspaceId, status, reason, logId}], runCount,
                                                checkpoints: [{runId, checkpointIds, checkpointCount, bytes}], checkpointRuns,
                                                checkpointCount, checkpointBytes,
                                                held: [{runId, workspaceId, status, reason, pendingCommits}], heldCount,
                                                truncated, bytesFreed}
              applies the retention policy (policy.set) to every chat, or
              to workspaceId's; each deletion names the setting that made
              it (reason) and is in the deletion log (wsctl deletions);
              held: runs a setting named, kept for their pending commits
              (commit.resolve). Each list holds its first 1,000 entries,
              the counts and checkpointBytes are of every one; truncated
              says a list left some out. A run's checkpointIds name its
              first 1,000 checkpoints pruned, oldest first;
              checkpointCount counts every one`,
	},
	{
		name: "chat.delete", noRun: true, access: writes, request: []any{chatDeleteRequest{}, runs.ChatKey{}}, handle: (*Session).chatDelete,
		help: `  chat.delete {chats: [{kind, stableChatId}, …], force?}
              -> {chats: [{chat, workspaceId, found, runs, runCount, cancelled,
              cancelledCount, logId}], bytesFreed}
              deletes each chat's workspace with its runs, persist/ and
              commits, all or none; while a run of them is active it fails
              with chat.active_run, unless force, which cancels them first.
              runs and cancelled name the first 1,000, oldest first;
              runCount and cancelledCount count every one.
              A chat with no workspace comes back with found false`,
	},
	{
		name: "policy.set", noRun: true, access: writes, request: []any{policyRequest{}, runs.Policy{}}, handle: (*Session).policySet,
		help: `  policy.set  {workspaceId?, policy}        -> {scope, policy}   workspaceId: that chat's
              overrides; default the store's (an empty workspaceId, here
              and in prune, policy.get, runs.list and chat.show, is
              batch.invalid_request, never read as absent). It replaces
              that scope's whole policy: to change one setting, policy.get
              and set it back changed (wsctl policy --set changes only the
              settings it names)
      policy       {keepCompletedRuns?, keepFailedRuns?, maxRunWorkspacesPerChat?,
                    maxCheckpointBytesPerRun?, autoPruneAfterDays?, maxStoreBytes?}
                   integers; a field left out inherits (a chat's from the
                   store's; the store's from runs.MobilePolicy under the
                   mobile profile, else off), whatever it was set to before.
                   maxStoreBytes is the store's cap on stored bytes, store
                   only; 0 there or in maxCheckpointBytesPerRun is no cap
                   (the way to turn the mobile profile's 8 MiB off)`,
	},
}

// access is what an op does to the store.
type access int

const (
	_ access = iota
	// reads: the op changes nothing in the store (export writes only
	// its archive, outside the store).
	reads
	// writes: the op may change the store.
	writes
)

// OpInfo describes one operation of the op table.
type OpInfo struct {
	// Name is the op's name, as a request's "op" spells it.
	Name string
	// ReadOnly: the op changes nothing in the store, so a read-only token
	// may send it.
	ReadOnly bool
}

// Ops returns every operation of the op table, in the order Help lists
// them.
func Ops() []OpInfo {
	out := make([]OpInfo, len(ops))
	for i, o := range ops {
		out[i] = OpInfo{Name: o.name, ReadOnly: o.access == reads}
	}
	return out
}

// Known reports whether name is an op of the table.
func Known(name string) bool {
	_, ok := opsByName[name]
	return ok
}

// ReadOnly reports whether the op named name changes nothing in the
// store; false for a name that is no op.
func ReadOnly(name string) bool {
	o, ok := opsByName[name]
	return ok && o.access == reads
}

// opsByName are ops by name.
var opsByName = func() map[string]*op {
	m := make(map[string]*op, len(ops))
	for i := range ops {
		m[ops[i].name] = &ops[i]
	}
	return m
}()

// base holds the fields every request may carry.
type base struct {
	Op    string          `json:"op"`
	ID    json.RawMessage `json:"id"`
	RunID string          `json:"runId"`
}

// runRequest is a request that may name the run it acts on.
type runRequest interface{ runBase() base }

func (r base) runBase() base { return r }

// decodeForRun decodes a request line into a T and resolves the run it
// acts on.
func decodeForRun[T runRequest](s *Session, r request) (T, string, error) {
	var req T
	if err := r.decode(&req); err != nil {
		return req, "", err
	}
	runID, err := s.run(req.runBase())
	return req, runID, err
}

// run returns the run a request acts on.
func (s *Session) run(req base) (string, error) {
	if req.RunID != "" {
		return req.RunID, nil
	}
	if s.backend.OneRequest {
		return "", invalidRequest("no run: name it in \"runId\" (each request over HTTP stands alone, with no current run)")
	}
	if s.current == "" {
		return "", invalidRequest("no run: send run.create first, or name \"runId\"")
	}
	return s.current, nil
}

// ckptRef is a checkpoint given as "cp_000003", "3" or 3.
type ckptRef struct {
	seq  int64
	live bool // "live": the live workspace (diff's to)
}

func (c *ckptRef) UnmarshalJSON(b []byte) error {
	var n int64
	if err := json.Unmarshal(b, &n); err == nil {
		if n < 1 {
			return invalidRequest("checkpoint %d: checkpoints count from 1", n)
		}
		c.seq = n
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return invalidRequest("a checkpoint is \"cp_000003\" or a number")
	}
	if strings.EqualFold(s, "live") {
		c.live = true
		return nil
	}
	seq, err := checkpoint.ParseRef(s)
	if err != nil {
		return invalidRequest("checkpoint %q: a checkpoint is \"cp_000003\" or a number from 1", s)
	}
	c.seq = seq
	return nil
}

// ---- run.create

type createRequest struct {
	base
	Chat     *runs.ChatKey     `json:"chat"`
	ChatRef  json.RawMessage   `json:"chatRef"`
	Profile  *runs.Profile     `json:"profile"`
	Inputs   map[string]string `json:"inputs"`
	Manifest rawJSON           `json:"manifest"`
}

func (s *Session) runCreate(ctx context.Context, r request) (any, error) {
	var req createRequest
	if err := r.decode(&req); err != nil {
		return nil, err
	}
	if req.Chat == nil {
		return nil, invalidRequest("missing \"chat\": {kind, stableChatId}")
	}
	if s.backend.NoHostPaths && req.Profile != nil && len(req.Profile.AllowPaths) > 0 {
		return nil, wserr.New(wserr.Forbidden, "run.create", "", "profile.allowPaths names directories on the server's host, which this session does not hand to its clients: create such a run with wsctl batch or the Go API")
	}
	if req.Chat.Kind == "" {
		return nil, invalidRequest("missing \"chat.kind\"")
	}
	if req.Chat.StableChatID == "" {
		return nil, invalidRequest("missing \"chat.stableChatId\"")
	}
	inputs := make(map[string][]byte, len(req.Inputs))
	for k, v := range req.Inputs {
		inputs[k] = []byte(v)
	}
	if absent(req.ChatRef) {
		req.ChatRef = nil
	}
	var man *runs.Manifest
	if !absent(json.RawMessage(req.Manifest)) {
		m, err := decodeManifest(r)
		if err != nil {
			return nil, err
		}
		man = &m
	}
	run, err := s.backend.Runs.CreateRun(ctx, runs.CreateRequest{Chat: *req.Chat, ChatRef: req.ChatRef, RunID: req.RunID, Profile: req.Profile, Inputs: inputs, Manifest: man})
	if err != nil {
		return nil, err
	}
	s.current = run.ID
	return map[string]any{"runId": run.ID, "workspaceId": run.ChatID}, nil
}

// ---- write, append, patch, delete

type writeRequest struct {
	base
	Path          *string `json:"path"`
	Content       *string `json:"content"`
	ContentBase64 *string `json:"contentBase64"`
	ExpectedHash  string  `json:"expectedHash"`
}

// writeResult is the answer to a workspace change.
type writeResult struct {
	Path string   `json:"path"`
	Hash cas.Hash `json:"hash,omitzero"`
	Size *int64   `json:"size,omitempty"`
	// Removed marks an apply edit that removed its file (hash and size
	// are then the content it had).
	Removed      bool   `json:"removed,omitempty"`
	CheckpointID string `json:"checkpointId,omitempty"`
}

func (s *Session) write(ctx context.Context, r request) (any, error) {
	return s.writeMode(ctx, r, vfs.Replace)
}

func (s *Session) append(ctx context.Context, r request) (any, error) {
	return s.writeMode(ctx, r, vfs.Append)
}

func (s *Session) writeMode(ctx context.Context, r request, mode vfs.WriteMode) (any, error) {
	req, runID, err := decodeForRun[writeRequest](s, r)
	if err != nil {
		return nil, err
	}
	p, err := filePath(req.Path)
	if err != nil {
		return nil, err
	}
	var content []byte
	switch {
	case (req.Content == nil) == (req.ContentBase64 == nil):
		return nil, invalidRequest("give exactly one of \"content\" and \"contentBase64\"")
	case req.Content != nil:
		content = []byte(*req.Content)
	default:
		if content, err = decodeBase64("contentBase64", *req.ContentBase64); err != nil {
			return nil, err
		}
	}
	expected, err := optionalHash(req.ExpectedHash)
	if err != nil {
		return nil, err
	}
	fi, err := s.backend.Runs.Workspace(runID, runs.ModelScope).Write(ctx, p, content, vfs.WriteOptions{Mode: mode, ExpectedHash: expected})
	if err != nil {
		return nil, err
	}
	return s.changed(ctx, runID, fi)
}

type patchRequest struct {
	base
	Path         *string `json:"path"`
	Old          *string `json:"old"`
	New          *string `json:"new"`
	ReplaceAll   bool    `json:"replaceAll"`
	ExpectedHash string  `json:"expectedHash"`
}

func (s *Session) patch(ctx context.Context, r request) (any, error) {
	req, runID, err := decodeForRun[patchRequest](s, r)
	if err != nil {
		return nil, err
	}
	p, err := filePath(req.Path)
	if err != nil {
		return nil, err
	}
	if req.Old == nil || req.New == nil {
		return nil, invalidRequest("patch needs \"old\" and \"new\"")
	}
	expected, err := optionalHash(req.ExpectedHash)
	if err != nil {
		return nil, err
	}
	fi, err := s.backend.Runs.Workspace(runID, runs.ModelScope).Patch(ctx, p, *req.Old, *req.New, vfs.PatchOptions{ReplaceAll: req.ReplaceAll, ExpectedHash: expected})
	if err != nil {
		return nil, err
	}
	return s.changed(ctx, runID, fi)
}

type pathRequest struct {
	base
	Path *string `json:"path"`
}

func (s *Session) delete(ctx context.Context, r request) (any, error) {
	req, runID, err := decodeForRun[pathRequest](s, r)
	if err != nil {
		return nil, err
	}
	p, err := filePath(req.Path)
	if err != nil {
		return nil, err
	}
	fi, err := s.backend.Runs.Workspace(runID, runs.ModelScope).Delete(ctx, p)
	if err != nil {
		return nil, err
	}
	res, err := s.changed(ctx, runID, fi)
	if err != nil {
		return nil, err
	}
	res.Size = nil
	return res, nil
}

// changed builds the answer to a committed change, naming the automatic
// checkpoint the change took, if any.
func (s *Session) changed(ctx context.Context, runID string, fi vfs.FileInfo) (writeResult, error) {
	size := fi.Size
	return writeResult{Path: fi.Path.String(), Hash: fi.Hash, Size: &size, CheckpointID: fi.Checkpoint}, nil
}

func requiredPath(s *string) (vfs.Path, error) {
	if s == nil {
		return vfs.Path{}, invalidRequest("missing \"path\"")
	}
	return vfs.ParsePath(*s)
}

// filePath is requiredPath for an op that makes or changes a file: a path
// ending in "/" or "/." names a directory (vfs.EndsAsDirectory), and
// ParsePath, which drops the ending, would give the file the directory's
// name.
func filePath(s *string) (vfs.Path, error) {
	p, err := requiredPath(s)
	if err == nil && vfs.EndsAsDirectory(*s) {
		err = wserr.New(wserr.InvalidPath, "", *s, "the path ends in /, naming a directory: name the file below it (%s/NAME)", p)
	}
	return p, err
}

func optionalHash(s string) (cas.Hash, error) {
	if s == "" {
		return cas.Hash{}, nil
	}
	// A value that names no content, malformed or the zero hash, is one
	// mistake with one code: the guard is the model's as much as the
	// host's (workspace.write_stale_file is for the model to correct).
	h, err := cas.ParseHash(s)
	if err != nil {
		return h, wserr.New(wserr.InvalidArgument, "", "", "field \"expectedHash\": %s", wserr.MessageOf(err))
	}
	if h.IsZero() {
		// The zero hash means "no guard" to the store: a host that sends
		// it must not get a write that checks nothing.
		return h, wserr.New(wserr.InvalidArgument, "", "", "field \"expectedHash\" is the zero hash, which names no content: leave the field out to write unguarded")
	}
	return h, nil
}

// ---- read, list

type readRequest struct {
	base
	Path      *string  `json:"path"`
	At        *ckptRef `json:"at"`
	StartLine int      `json:"startLine"`
	EndLine   int      `json:"endLine"`
}

type readResult struct {
	FileContent
	// TotalLines is left out when the lines were not counted: content
	// that is not text (contentBase64), or TotalLinesUnknown. An empty
	// file has 0.
	TotalLines *int `json:"totalLines,omitempty"`
	StartLine  int  `json:"startLine,omitempty"`
	EndLine    int  `json:"endLine,omitempty"`
	Truncated  bool `json:"truncated,omitempty"`
	// TotalLinesUnknown: a range of a large file was read without reading
	// the file to its end.
	TotalLinesUnknown bool `json:"totalLinesUnknown,omitempty"`
}

// listed is a listing's result: key names the list, which is [] rather
// than null when empty, so a host can always iterate it.
func listed[T any](key string, xs []T) map[string]any {
	if xs == nil {
		xs = []T{}
	}
	return map[string]any{key: xs}
}

// modelView returns the agent's view of a run, live or at a checkpoint.
func (s *Session) modelView(runID string, at *ckptRef) *runs.Workspace {
	return s.view(runID, at, runs.ModelScope)
}

// view returns a run's workspace as scope sees it, live or at a
// checkpoint.
func (s *Session) view(runID string, at *ckptRef, scope runs.Scope) *runs.Workspace {
	if at == nil || at.live {
		return s.backend.Runs.Workspace(runID, scope)
	}
	return s.backend.Runs.WorkspaceAt(runID, at.seq, scope)
}

func (s *Session) read(ctx context.Context, r request) (any, error) {
	return s.readIn(ctx, r, runs.ModelScope)
}

// readIn answers read (the model's view) and host.read (the host's).
func (s *Session) readIn(ctx context.Context, r request, scope runs.Scope) (any, error) {
	req, runID, err := decodeForRun[readRequest](s, r)
	if err != nil {
		return nil, err
	}
	p, err := requiredPath(req.Path)
	if err != nil {
		return nil, err
	}
	ws := s.view(runID, req.At, scope)
	if vfs.EndsAsDirectory(*req.Path) {
		// A file named as a directory is refused before it is read; a
		// directory is refused by the read, as without the ending.
		fi, err := ws.StatNoRead(ctx, p)
		if err == nil {
			err = vfs.CheckFileSpelling("read", *req.Path, p, fi.Kind)
		}
		if err != nil {
			return nil, err
		}
	}
	res, err := ws.Read(ctx, p, vfs.ReadOptions{StartLine: req.StartLine, EndLine: req.EndLine})
	if err != nil {
		return nil, err
	}
	out := readResult{FileContent: NewFileContent(p, res.Info.Hash, res.Content)}
	if out.Content != nil && !res.TotalLinesUnknown {
		out.TotalLines = &res.TotalLines
	}
	out.Size = res.Info.Size
	if req.StartLine != 0 || req.EndLine != 0 {
		out.StartLine, out.EndLine, out.Truncated = res.StartLine, res.EndLine, res.Truncated
		out.TotalLinesUnknown = res.TotalLinesUnknown
	}
	return out, nil
}

type listRequest struct {
	base
	Path  *string  `json:"path"`
	Depth int      `json:"depth"`
	At    *ckptRef `json:"at"`
	After string   `json:"after"`
	Limit int      `json:"limit"`
}

// listPage checks a listing's page fields, which the host gives.
func listPage(after string, limit int) (vfs.ListPage, error) {
	page, err := vfs.ParseListPage(after, limit)
	if err != nil {
		return page, invalidRequest("%s", err.Error())
	}
	return page, nil
}

// listedPage is a page's answer.
func listedPage[T any](key string, xs []T, more bool) map[string]any {
	m := listed(key, xs)
	m["more"] = more
	return m
}

func (s *Session) list(ctx context.Context, r request) (any, error) {
	return s.listIn(ctx, r, runs.ModelScope)
}

// listIn answers list (the model's view) and host.list (the host's).
func (s *Session) listIn(ctx context.Context, r request, scope runs.Scope) (any, error) {
	req, runID, err := decodeForRun[listRequest](s, r)
	if err != nil {
		return nil, err
	}
	p := vfs.Root()
	if req.Path != nil && !vfs.NamesRoot(*req.Path) {
		if p, err = vfs.ParsePath(*req.Path); err != nil {
			return nil, err
		}
	}
	if req.Depth < 0 {
		return nil, wserr.New(wserr.InvalidArgument, "list", "", "depth must not be negative")
	}
	page, err := listPage(req.After, req.Limit)
	if err != nil {
		return nil, err
	}
	entries, more, err := s.view(runID, req.At, scope).ListPage(ctx, p, req.Depth, page)
	if err != nil {
		return nil, err
	}
	return listedPage("entries", entries, more), nil
}

// ---- checkpoint, rollback, diff

type checkpointRequest struct {
	base
	Reason string `json:"reason"`
}

func (s *Session) checkpoint(ctx context.Context, r request) (any, error) {
	req, runID, err := decodeForRun[checkpointRequest](s, r)
	if err != nil {
		return nil, err
	}
	cp, err := s.backend.Runs.Checkpoint(ctx, runID, req.Reason)
	if err != nil {
		return nil, err
	}
	return map[string]any{"checkpointId": cp.ID, "seq": cp.Seq}, nil
}

type rollbackRequest struct {
	base
	CheckpointID  *ckptRef `json:"checkpointId"`
	CheckpointSeq *int64   `json:"checkpointSeq"`
	Pause         bool     `json:"pause"`
}

func (s *Session) rollback(ctx context.Context, r request) (any, error) {
	req, runID, err := decodeForRun[rollbackRequest](s, r)
	if err != nil {
		return nil, err
	}
	var seq int64
	switch {
	case (req.CheckpointID == nil) == (req.CheckpointSeq == nil):
		return nil, invalidRequest("give exactly one of \"checkpointId\" and \"checkpointSeq\"")
	case req.CheckpointID != nil:
		if req.CheckpointID.live {
			return nil, invalidRequest("rollback needs a checkpoint, not live")
		}
		seq = req.CheckpointID.seq
	default:
		seq = *req.CheckpointSeq
		if seq < 1 {
			return nil, invalidRequest("checkpoint %d: checkpoints count from 1", seq)
		}
	}
	run, err := s.backend.Runs.Rollback(ctx, runID, seq, runs.RollbackOptions{Pause: req.Pause})
	if err != nil {
		return nil, err
	}
	return map[string]any{"runId": run.ID, "root": run.Root, "checkpointId": checkpoint.ID(seq), "status": run.Status}, nil
}

type diffRequest struct {
	base
	From     *ckptRef `json:"from"`
	To       *ckptRef `json:"to"`
	MaxBytes int      `json:"maxBytes"`
	After    string   `json:"after"`
	Limit    int      `json:"limit"`
}

func (s *Session) diff(ctx context.Context, r request) (any, error) {
	req, runID, err := decodeForRun[diffRequest](s, r)
	if err != nil {
		return nil, err
	}
	if req.From == nil || req.From.live {
		return nil, invalidRequest("diff needs \"from\": a checkpoint")
	}
	var to int64
	if req.To != nil && !req.To.live {
		to = req.To.seq
	}
	if err := s.diffBytes(req.MaxBytes); err != nil {
		return nil, err
	}
	page, err := listPage(req.After, req.Limit)
	if err != nil {
		return nil, err
	}
	changes, more, err := s.backend.Runs.DiffPage(ctx, runID, req.From.seq, to, runs.DiffOptions{MaxBytes: req.MaxBytes}, page)
	if err != nil {
		return nil, err
	}
	return listedPage("changes", changes, more), nil
}

// diffBytes checks a diff's maxBytes against Backend.MaxDiffBytes.
func (s *Session) diffBytes(maxBytes int) error {
	if limit := s.backend.MaxDiffBytes; limit > 0 && maxBytes > limit {
		return wserr.New(wserr.InvalidArgument, "diff", "", "maxBytes %d is more text than this server puts in one answer (%d): page the diff with after and limit instead (a page of one file holds its whole text)", maxBytes, limit)
	}
	return nil
}

// ---- commit, finish, events, manifest.set, run.status

type commitRequest struct {
	base
	Path *string          `json:"path"`
	Mode *runs.CommitMode `json:"mode"`
}

func (s *Session) commit(ctx context.Context, r request) (any, error) {
	req, runID, err := decodeForRun[commitRequest](s, r)
	if err != nil {
		return nil, err
	}
	var opt runs.CommitOptions
	if req.Path != nil {
		if *req.Path == "" {
			return nil, invalidRequest("\"path\" is empty: name the file to commit, or leave it out to commit the manifest's artifacts")
		}
		opt.Path = *req.Path
	}
	if req.Mode != nil {
		if *req.Mode == "" {
			return nil, invalidRequest("\"mode\" is empty: %q or %q, or leave it out for %q", runs.ModeReplace, runs.ModeAppend, runs.ModeReplace)
		}
		opt.Mode = *req.Mode
	}
	var delivered *runs.Message
	rec, err := s.backend.Runs.Commit(ctx, runID, s.responseSink("commit", &delivered), opt)
	if err != nil {
		return nil, err
	}
	return commitResult(rec, delivered), nil
}

// responseSink is the sink of a commit a host asks for: the chat is the
// host's, so the response delivers the message (into *delivered). Under
// HandleTo the response is written from here, before the outcome is
// recorded, and a failed write fails the commit.
func (s *Session) responseSink(op string, delivered **runs.Message) runs.ChatSink {
	return runs.SinkFunc(func(_ context.Context, cr runs.CommitRequest) (json.RawMessage, error) {
		m := cr.Message
		*delivered = &m
		if d := s.delivery; d != nil {
			rec := runs.CommitRecord{ID: cr.CommitID, CheckpointID: m.Agent.CheckpointID, Mode: cr.Mode, Message: m}
			d.sent = true
			if d.err = d.write(Response{Op: op, ID: s.id, OK: true, Result: commitResult(rec, nil)}); d.err != nil {
				return nil, fmt.Errorf("the response could not be written: %w", d.err)
			}
		}
		return json.RawMessage(`{"deliveredIn":"batch response"}`), nil
	})
}

// commitResult is a commit's response: the message as delivered, if the
// sink was given one.
func commitResult(rec runs.CommitRecord, delivered *runs.Message) map[string]any {
	msg := rec.Message
	if delivered != nil {
		msg = *delivered
	}
	return map[string]any{"commitId": rec.ID, "checkpointId": rec.CheckpointID, "mode": rec.Mode, "message": msg}
}

func (s *Session) finish(ctx context.Context, r request) (any, error) {
	var req base
	if err := r.decode(&req); err != nil {
		return nil, err
	}
	runID, err := s.run(req)
	if err != nil {
		return nil, err
	}
	res, err := s.backend.Runs.Finish(ctx, runID)
	if err != nil {
		return nil, err
	}
	return map[string]any{"runId": res.Run.ID, "status": res.Run.Status, "persistChanges": res.PersistChanges,
		"persistVersion": res.PersistVersion, "merged": res.Merged}, nil
}

type eventsRequest struct {
	base
	AfterSeq  int64 `json:"afterSeq"`
	BeforeSeq int64 `json:"beforeSeq"`
	Limit     int   `json:"limit"`
}

func (s *Session) events(ctx context.Context, r request) (any, error) {
	req, runID, err := decodeForRun[eventsRequest](s, r)
	if err != nil {
		return nil, err
	}
	if req.AfterSeq < 0 || req.BeforeSeq < 0 || req.Limit < 0 || req.Limit > journal.MaxLimit {
		return nil, invalidRequest("afterSeq and beforeSeq must not be negative and limit must be in 0..%d (0: %d), not %d, %d and %d", journal.MaxLimit, journal.DefaultLimit, req.AfterSeq, req.BeforeSeq, req.Limit)
	}
	if _, err := s.backend.Runs.Run(ctx, runID); err != nil {
		return nil, err
	}
	evs, err := s.backend.Journal.Page(ctx, runID, journal.PageQuery{AfterSeq: req.AfterSeq, BeforeSeq: req.BeforeSeq, Limit: req.Limit})
	if err != nil {
		return nil, err
	}
	// A page, full or cut short at journal.MaxPageBytes, may be the
	// last: an event after it (below beforeSeq) says.
	more := false
	if len(evs) > 0 {
		if more, err = s.backend.Journal.HasEvents(ctx, runID, evs[len(evs)-1].Seq, req.BeforeSeq); err != nil {
			return nil, err
		}
	}
	return listedPage("events", evs, more), nil
}

type manifestRequest struct {
	base
	Manifest rawJSON `json:"manifest"`
}

func (s *Session) manifestSet(ctx context.Context, r request) (any, error) {
	req, runID, err := decodeForRun[manifestRequest](s, r)
	if err != nil {
		return nil, err
	}
	if len(req.Manifest) == 0 || string(req.Manifest) == "null" {
		return nil, invalidRequest("missing \"manifest\"")
	}
	m, err := decodeManifest(r)
	if err != nil {
		return nil, err
	}
	if err := s.backend.Runs.SetManifest(ctx, runID, m); err != nil {
		return nil, err
	}
	return map[string]any{"artifacts": len(m.Artifacts)}, nil
}

// decodeManifest reads the request's "manifest" from the line's tree, as
// runs.ParseManifest would read its bytes, and validates it the same way.
func decodeManifest(r request) (runs.Manifest, error) {
	var m runs.Manifest
	if err := r.decodeField("manifest", &m); err != nil {
		var fe *fieldError
		if errors.As(err, &fe) {
			return m, wserr.Wrap(wserr.InvalidManifest, "manifest", "", err)
		}
		return m, wserr.New(wserr.InvalidManifest, "manifest", "", "%v", err)
	}
	return m, m.Validate()
}

type statusRequest struct {
	base
	Status *runs.Status `json:"status"`
	Reason string       `json:"reason"`
}

func (s *Session) runStatus(ctx context.Context, r request) (any, error) {
	req, runID, err := decodeForRun[statusRequest](s, r)
	if err != nil {
		return nil, err
	}
	if req.Status == nil {
		return nil, invalidRequest("missing \"status\"")
	}
	if !req.Status.Valid() {
		return nil, invalidRequest("unknown status %q", *req.Status)
	}
	if err := s.backend.Runs.SetStatus(ctx, runID, *req.Status, req.Reason); err != nil {
		return nil, err
	}
	run, err := s.backend.Runs.Run(ctx, runID)
	if err != nil {
		return nil, err
	}
	return map[string]any{"runId": runID, "status": run.Status, "primaryRoot": run.PrimaryRoot}, nil
}
