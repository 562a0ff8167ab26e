package protocol

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/checkpoint"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// HostRuns is what the host-side run ops (listing, showing and deleting
// runs and chats, rolling back commits, comparing runs, materializing
// virtual resources) ask of the store's runs; *runs.Service implements it.
type HostRuns interface {
	RunsPage(ctx context.Context, q runs.ListQuery) ([]runs.Run, bool, error)
	DeleteRun(ctx context.Context, runID string) error
	CancelAndDeleteRun(ctx context.Context, runID string) (bool, error)
	RollbackCommit(ctx context.Context, runID string, seq int64, sink runs.ChatSink, del bool) (runs.CommitRecord, error)
	CommitsPage(ctx context.Context, runID string, q runs.CommitQuery) ([]runs.CommitRecord, bool, error)
	ResolveCommit(ctx context.Context, runID, commitID string, out runs.CommitOutcome) (runs.CommitRecord, error)
	Manifest(ctx context.Context, runID string) (runs.Manifest, error)
	Chat(ctx context.Context, id string) (runs.Chat, error)
	ChatsPage(ctx context.Context, q runs.ChatQuery) ([]runs.Chat, bool, error)
	DiffRunsPage(ctx context.Context, from, to runs.TreeRef, opts runs.DiffOptions, page vfs.ListPage) ([]checkpoint.FileDiff, bool, error)
	Materialize(ctx context.Context, runID string, paths []vfs.Path) ([]vfs.FileInfo, error)
	Deletions(ctx context.Context, afterID int64, limit int) ([]runs.Deletion, bool, error)
	Policy(ctx context.Context, scope string) (runs.Policy, error)
	EffectivePolicy(ctx context.Context, chatID string) (runs.Policy, error)
}

// CheckpointViews lists a run's checkpoints and reads each one's
// checkpoint.json view; *checkpoint.Store implements it.
type CheckpointViews interface {
	PageMore(ctx context.Context, runID string, afterSeq int64, limit int) ([]checkpoint.Checkpoint, bool, error)
	ViewPage(ctx context.Context, runID string, seq int64, page vfs.ListPage) (checkpoint.View, bool, error)
}

// Maintenance is the store-wide maintenance the stats, gc, fsck, du and
// reclaim ops run; *wsstore.Store implements it.
type Maintenance interface {
	Stats(ctx context.Context) (wsstore.Stats, error)
	GC(ctx context.Context, opt wsstore.GCOptions) (wsstore.GCReport, error)
	CollectSteps(ctx context.Context, opt wsstore.GCStepOptions) (wsstore.GCReport, error)
	Fsck(ctx context.Context, progress func(phase string, done, total int)) (wsstore.FsckReport, error)
	DUPage(ctx context.Context, after wsstore.UsageKey, limit int) ([]wsstore.Usage, bool, error)
	Reclaim(ctx context.Context) (wsstore.ReclaimReport, error)
}

// parityOps are the ops that give a host in another language what the Go
// API gives an embedding one (TestOpsCoverGoAPI keeps them in step).
var parityOps = []op{
	{
		name: "search", access: reads, request: []any{searchRequest{}}, handle: (*Session).search,
		help: `  search      {query, path?, limit?}        -> {hits: [{path, score, startLine, endLine, snippet}], skipped?: [{path, code, message}]}
              the agent's search over the text files it may see; limit:
              default 20, at most 200 (else batch.invalid_request);
              skipped: virtual mounts below path whose provider failed`,
	},
	{
		name: "apply", access: writes, request: []any{applyRequest{}, applyEdit{}}, handle: (*Session).apply,
		help: `  apply       {edits: [{path, content | contentBase64 | remove: true}]}
              -> {files: [{path, hash, size, removed?}], checkpointId?}
              removed: true for a file the edit removed (hash and size
              are what it held); many files as one step: one transaction, one event per file,
              one checkpoint; all or nothing`,
	},
	{
		name: "stat", access: reads, request: []any{statRequest{}}, handle: (*Session).stat,
		help: `  stat        {path, at?}                   -> {path, kind, size, hash, resource, writable, modTime?}
              modTime: as list gives it, below host/NAME/ only`,
	},
	{
		name: "host.read", access: reads, request: []any{readRequest{}}, handle: (*Session).hostRead,
		help: `  host.read   {path, at?, startLine?, endLine?}  -> as read
              the host's view: input/, tool-args/, tool-results/,
              model-responses/, manifest.json and
              checkpoints/<checkpointId>/checkpoint.json (and that
              checkpoint's files below it), which the model never sees`,
	},
	{
		name: "host.list", access: reads, request: []any{listRequest{}}, handle: (*Session).hostList,
		help: `  host.list   {path?, depth?, at?, after?, limit?}  -> as list, in the host's view`,
	},
	{
		name: "commit.rollback", access: writes, request: []any{commitRollbackRequest{}}, handle: (*Session).commitRollback,
		help: `  commit.rollback {checkpointId, delete?}   -> {commitId, checkpointId, mode, message}
              replaces the committed message with the one checkpointId
              assembles (delete: true: deletes it); message as commit's`,
	},
	{
		name: "commits.list", access: reads, request: []any{commitsListRequest{}}, handle: (*Session).commitsList,
		help: `  commits.list {afterSeq?, limit?}          -> {commits: [{commitId, seq, checkpointId, mode, kind, status, message, ...}], more}  limit: default 100, at most 500; a page ends early to hold about 4 MiB of messages; more: commits after it remain`,
	},
	{
		name: "commit.resolve", access: writes, request: []any{commitResolveRequest{}}, handle: (*Session).commitResolve,
		help: `  commit.resolve {commitId, status, receipt?, error?}  -> COMMIT as commits.list lists it
              records what became of a commit left pending (the process
              that delivered it ended first): status "completed" if the
              chat saved its message, "failed" if not; error only with
              failed`,
	},
	{
		name: "runs.list", noRun: true, access: reads, request: []any{runsListRequest{}}, handle: (*Session).runsList,
		help: `  runs.list   {workspaceId?, status?, limit?, after?}  -> {runs: [RUN, …], more}   newest first;
              limit: default 1000, at most 10000; a page ends early to hold
              about 4 MiB of chatRefs and profiles; after: the last run id
              of the page before (run.not_found if it is gone); more: runs
              remain`,
	},
	{
		name: "run.show", access: reads, request: []any{base{}}, handle: (*Session).runShow,
		help: `  run.show    {}                            -> RUN: {runId, workspaceId, status, profile, root, headCheckpoint, …}`,
	},
	{
		name: "run.delete", access: writes, request: []any{runDeleteRequest{}}, handle: (*Session).runDelete,
		help: `  run.delete  {cancel?}                     -> {runId, deleted, cancelled}
              an active run is refused (run.invalid_transition) unless
              cancel is true, which cancels and deletes it in one step`,
	},
	{
		name: "chats.list", noRun: true, access: reads, request: []any{chatsListRequest{}}, handle: (*Session).chatsList,
		help: `  chats.list  {stableChatId?, limit?, after?}  -> {chats: [{id, kind, stableChatId, persistRoot, persistVersion, …}], more}
              newest first; limit: default 1000, at most 10000; a page ends
              early to hold about 4 MiB of chatRefs; after: the last chat id
              of the page before (store.not_found if it is gone); more:
              chats after the page remain`,
	},
	{
		name: "chat.show", noRun: true, access: reads, request: []any{chatShowRequest{}}, handle: (*Session).chatShow,
		help: `  chat.show   {workspaceId}                 -> {id, kind, stableChatId, …}`,
	},
	{
		name: "manifest.get", access: reads, request: []any{base{}}, handle: (*Session).manifestGet,
		help: `  manifest.get {}                           -> {manifest}`,
	},
	{
		name: "checkpoints.list", access: reads, request: []any{checkpointsListRequest{}}, handle: (*Session).checkpointsList,
		help: `  checkpoints.list {afterSeq?, limit?}      -> {checkpoints: [{id, runId, seq, root, parent?, reason, eventSeq, createdAt}], more}  oldest first; limit: default and at most 10000; more: checkpoints after the page remain (ask again with afterSeq its last seq)`,
	},
	{
		name: "checkpoint.view", access: reads, request: []any{checkpointViewRequest{}}, handle: (*Session).checkpointView,
		help: `  checkpoint.view {checkpointId, after?, limit?}  -> checkpoint.json: {id, seq, runId, createdAt, reason, eventSeq, parent?, root, files: [{path, hash, bytes}]}, more
              files: a page, as list pages (limit default 10000, at most
              100000; more says files remain: ask again with after the
              last file's path); the runtime file checkpoints/<id>/checkpoint.json
              holds them all and reads in ranges`,
	},
	{
		name: "runs.diff", access: reads, request: []any{runsDiffRequest{}}, handle: (*Session).runsDiff,
		help: `  runs.diff   {fromRunId?, from?, toRunId?, to?, maxBytes?, after?, limit?}  -> as diff
              compares two runs (or one): from and to are checkpoints or
              "live" (the default); each run defaults to the request's`,
	},
	{
		name: "materialize", access: writes, request: []any{materializeRequest{}}, handle: (*Session).materialize,
		help: `  materialize {paths: [VIRTUAL, …]}          -> {files: [{path, hash, size, checkpointId?}]}
              fixes each virtual resource's content now under input/ at
              the same path; an input that exists already is refused`,
	},
	{
		name: "deletions", noRun: true, access: reads, request: []any{deletionsRequest{}}, handle: (*Session).deletions,
		help: `  deletions   {afterId?, limit?}            -> {deletions: [...], more}   the deletion log, oldest first;
              limit: default 1000, at most 10000; a page also ends once its
              entries' details reach about 4 MiB (one entry comes alone);
              more: entries after the page remain (ask again with afterId
              its last id)`,
	},
	{
		name: "policy.get", noRun: true, access: reads, request: []any{policyGetRequest{}}, handle: (*Session).policyGet,
		help: `  policy.get  {workspaceId?, effective?}    -> {policy}   the store's policy, or a chat's;
                                            effective: a chat's as it applies`,
	},
	{
		name: "stats", noRun: true, access: reads, request: []any{base{}}, handle: (*Session).stats,
		help: `  stats       {}                            -> as wsctl stats --json`,
	},
	{
		name: "gc", noRun: true, access: writes, request: []any{gcRequest{}}, handle: (*Session).gc,
		help: `  gc          {dryRun?, graceSeconds?}      -> as wsctl gc --json   graceSeconds:
                                            keep unreachable rows younger than this`,
	},
	{
		name: "fsck", noRun: true, access: reads, request: []any{base{}}, handle: (*Session).fsck,
		help: `  fsck        {}                            -> {ok, report}   report: as wsctl fsck --json`,
	},
	{
		name: "du", noRun: true, access: reads, request: []any{duRequest{}, duAfter{}}, handle: (*Session).du,
		help: `  du          {after?: {workspaceId, runId?}, limit?}  -> {usage: [{workspaceId, runId?, files, logicalBytes, checkpoints, uniqueStoredBytes}], more}
              a page of wsctl du's rows, by workspaceId then runId (a
              chat's persist row has no runId and comes first); limit:
              default 1000, at most 10000; after: the last row of the page
              before (one gone since is no error); more: rows follow. Each
              page walks the store, as gc's mark does`,
	},
	{
		name: "reclaim", noRun: true, access: writes, request: []any{base{}}, handle: (*Session).reclaim,
		help: `  reclaim     {}                            -> {gc, fileBytesBefore, fileBytesAfter, ...}`,
	},
}

func init() {
	ops = append(ops, parityOps...)
	for i := range ops {
		opsByName[ops[i].name] = &ops[i]
	}
}

func (s *Session) hostRuns() (HostRuns, error) {
	if s.backend.Host == nil {
		return nil, wserr.New(wserr.InvalidOptions, "host", "", "this session serves no host run operations")
	}
	return s.backend.Host, nil
}

func (s *Session) maintenance() (Maintenance, error) {
	if s.backend.Store == nil {
		return nil, wserr.New(wserr.InvalidOptions, "maintenance", "", "this session serves no maintenance")
	}
	return s.backend.Store, nil
}

func (s *Session) checkpointViews() (CheckpointViews, error) {
	if s.backend.Checkpoints == nil {
		return nil, wserr.New(wserr.InvalidOptions, "checkpoints", "", "this session serves no checkpoint views")
	}
	return s.backend.Checkpoints, nil
}

// runOnly decodes a request that carries nothing but the common fields
// and returns its run.
func (s *Session) runOnly(r request) (string, error) {
	var req base
	if err := r.decode(&req); err != nil {
		return "", err
	}
	return s.run(req)
}

// ---- search, apply, stat, host.read, host.list

type searchRequest struct {
	base
	Query *string `json:"query"`
	Path  *string `json:"path"`
	Limit int     `json:"limit"`
}

func (s *Session) search(ctx context.Context, r request) (any, error) {
	req, runID, err := decodeForRun[searchRequest](s, r)
	if err != nil {
		return nil, err
	}
	if req.Query == nil {
		return nil, invalidRequest("missing \"query\"")
	}
	if req.Limit < 0 || req.Limit > vfs.MaxSearchHits {
		return nil, invalidRequest("limit must be in 0..%d (0: %d), not %d", vfs.MaxSearchHits, vfs.DefaultSearchHits, req.Limit)
	}
	opt := vfs.SearchOptions{MaxHits: req.Limit}
	if req.Path != nil && !vfs.NamesRoot(*req.Path) {
		if opt.Path, err = vfs.ParsePath(*req.Path); err != nil {
			return nil, err
		}
	}
	ws := s.backend.Runs.Workspace(runID, runs.ModelScope)
	if req.Path != nil && vfs.EndsAsDirectory(*req.Path) {
		// A file named as a directory is refused, as a read of it is.
		fi, err := ws.StatNoRead(ctx, opt.Path)
		if err == nil {
			err = vfs.CheckFileSpelling("search", *req.Path, opt.Path, fi.Kind)
		}
		if err != nil {
			return nil, err
		}
	}
	res, err := ws.Search(ctx, *req.Query, opt)
	if err != nil {
		return nil, err
	}
	out := listed("hits", res.Hits)
	if len(res.Skipped) > 0 {
		out["skipped"] = res.Skipped
	}
	return out, nil
}

type applyRequest struct {
	base
	Edits []applyEdit `json:"edits"`
}

type applyEdit struct {
	Path          *string `json:"path"`
	Content       *string `json:"content"`
	ContentBase64 *string `json:"contentBase64"`
	Remove        bool    `json:"remove"`
}

func (s *Session) apply(ctx context.Context, r request) (any, error) {
	req, runID, err := decodeForRun[applyRequest](s, r)
	if err != nil {
		return nil, err
	}
	if len(req.Edits) == 0 {
		return nil, invalidRequest("missing \"edits\": at least one {path, content}")
	}
	edits := make([]runs.Edit, len(req.Edits))
	for i, e := range req.Edits {
		p, err := filePath(e.Path)
		if err != nil {
			return nil, err
		}
		edits[i] = runs.Edit{Path: p, Remove: e.Remove}
		n := 0
		for _, set := range []bool{e.Content != nil, e.ContentBase64 != nil, e.Remove} {
			if set {
				n++
			}
		}
		if n != 1 {
			return nil, invalidRequest("edits[%d]: give exactly one of \"content\", \"contentBase64\" and \"remove\": true", i)
		}
		switch {
		case e.Content != nil:
			edits[i].Content = []byte(*e.Content)
		case e.ContentBase64 != nil:
			if edits[i].Content, err = decodeBase64(fmt.Sprintf("edits[%d].contentBase64", i), *e.ContentBase64); err != nil {
				return nil, err
			}
		}
	}
	infos, err := s.backend.Runs.Workspace(runID, runs.ModelScope).Apply(ctx, edits)
	if err != nil {
		return nil, err
	}
	files := make([]writeResult, len(infos))
	cp := ""
	for i, fi := range infos {
		size := fi.Size
		files[i] = writeResult{Path: fi.Path.String(), Hash: fi.Hash, Size: &size, Removed: edits[i].Remove}
		cp = fi.Checkpoint
	}
	res := map[string]any{"files": files}
	if cp != "" {
		res["checkpointId"] = cp
	}
	return res, nil
}

type statRequest struct {
	base
	Path *string  `json:"path"`
	At   *ckptRef `json:"at"`
}

func (s *Session) stat(ctx context.Context, r request) (any, error) {
	req, runID, err := decodeForRun[statRequest](s, r)
	if err != nil {
		return nil, err
	}
	if req.Path == nil {
		return nil, invalidRequest("missing \"path\"")
	}
	// The root is named as list names it: "", "." or "./".
	p := vfs.Root()
	if !vfs.NamesRoot(*req.Path) {
		if p, err = vfs.ParsePath(*req.Path); err != nil {
			return nil, err
		}
	}
	fi, err := s.modelView(runID, req.At).Stat(ctx, p)
	if err == nil {
		err = vfs.CheckFileSpelling("stat", *req.Path, p, fi.Kind)
	}
	if err != nil {
		return nil, err
	}
	return fi, nil
}

func (s *Session) hostRead(ctx context.Context, r request) (any, error) {
	return s.readIn(ctx, r, runs.HostScope)
}

func (s *Session) hostList(ctx context.Context, r request) (any, error) {
	return s.listIn(ctx, r, runs.HostScope)
}

// ---- commit.rollback, commits.list

type commitRollbackRequest struct {
	base
	CheckpointID *ckptRef `json:"checkpointId"`
	Delete       bool     `json:"delete"`
}

func (s *Session) commitRollback(ctx context.Context, r request) (any, error) {
	req, runID, err := decodeForRun[commitRollbackRequest](s, r)
	if err != nil {
		return nil, err
	}
	if req.CheckpointID == nil || req.CheckpointID.live {
		return nil, invalidRequest("commit.rollback needs \"checkpointId\": a checkpoint")
	}
	h, err := s.hostRuns()
	if err != nil {
		return nil, err
	}
	var delivered *runs.Message
	rec, err := h.RollbackCommit(ctx, runID, req.CheckpointID.seq, s.responseSink("commit.rollback", &delivered), req.Delete)
	if err != nil {
		return nil, err
	}
	return commitResult(rec, delivered), nil
}

type commitsListRequest struct {
	base
	AfterSeq int64 `json:"afterSeq"`
	Limit    int   `json:"limit"`
}

func (s *Session) commitsList(ctx context.Context, r request) (any, error) {
	req, runID, err := decodeForRun[commitsListRequest](s, r)
	if err != nil {
		return nil, err
	}
	if req.AfterSeq < 0 || req.Limit < 0 || req.Limit > runs.MaxCommitPage {
		return nil, invalidRequest("afterSeq must not be negative and limit must be in 0..%d (0: %d), not %d and %d", runs.MaxCommitPage, runs.DefaultCommitPage, req.AfterSeq, req.Limit)
	}
	h, err := s.hostRuns()
	if err != nil {
		return nil, err
	}
	cs, more, err := h.CommitsPage(ctx, runID, runs.CommitQuery{AfterSeq: req.AfterSeq, Limit: req.Limit})
	if err != nil {
		return nil, err
	}
	return map[string]any{"commits": cs, "more": more}, nil
}

type commitResolveRequest struct {
	base
	CommitID string          `json:"commitId"`
	Status   string          `json:"status"`
	Receipt  json.RawMessage `json:"receipt"`
	Error    string          `json:"error"`
}

func (s *Session) commitResolve(ctx context.Context, r request) (any, error) {
	req, runID, err := decodeForRun[commitResolveRequest](s, r)
	if err != nil {
		return nil, err
	}
	if req.CommitID == "" {
		return nil, invalidRequest("commit.resolve needs \"commitId\": a commit of the run")
	}
	if req.Status != runs.CommitCompleted && req.Status != runs.CommitFailed {
		return nil, invalidRequest("commit.resolve needs \"status\": %q or %q, not %q", runs.CommitCompleted, runs.CommitFailed, req.Status)
	}
	if req.Status == runs.CommitCompleted && req.Error != "" {
		return nil, invalidRequest("commit.resolve takes \"error\" only with status %q", runs.CommitFailed)
	}
	h, err := s.hostRuns()
	if err != nil {
		return nil, err
	}
	return h.ResolveCommit(ctx, runID, req.CommitID, runs.CommitOutcome{Status: req.Status, Receipt: req.Receipt, Error: req.Error})
}

// ---- runs.list, run.show, run.delete, chats.list, chat.show, manifest.get

type runsListRequest struct {
	base
	WorkspaceID *string `json:"workspaceId"`
	Status      *string `json:"status"`
	Limit       int     `json:"limit"`
	After       string  `json:"after"`
}

func (s *Session) runsList(ctx context.Context, r request) (any, error) {
	var req runsListRequest
	if err := r.decode(&req); err != nil {
		return nil, err
	}
	st, err := filter("status", req.Status)
	if err != nil {
		return nil, err
	}
	status := runs.Status(st)
	if status != "" && !status.Valid() {
		return nil, invalidRequest("unknown status %q", status)
	}
	if req.Limit < 0 || req.Limit > runs.MaxRunPage {
		return nil, invalidRequest("limit must be in 0..%d (0: %d), not %d", runs.MaxRunPage, runs.DefaultRunPage, req.Limit)
	}
	chatID, err := workspaceID(req.WorkspaceID)
	if err != nil {
		return nil, err
	}
	h, err := s.hostRuns()
	if err != nil {
		return nil, err
	}
	rs, more, err := h.RunsPage(ctx, runs.ListQuery{ChatID: chatID, Status: status, Limit: req.Limit, After: req.After})
	if err != nil {
		return nil, err
	}
	return map[string]any{"runs": rs, "more": more}, nil
}

func (s *Session) runShow(ctx context.Context, r request) (any, error) {
	runID, err := s.runOnly(r)
	if err != nil {
		return nil, err
	}
	return s.backend.Runs.Run(ctx, runID)
}

type runDeleteRequest struct {
	base
	Cancel bool `json:"cancel"`
}

func (s *Session) runDelete(ctx context.Context, r request) (any, error) {
	req, runID, err := decodeForRun[runDeleteRequest](s, r)
	if err != nil {
		return nil, err
	}
	h, err := s.hostRuns()
	if err != nil {
		return nil, err
	}
	cancelled := false
	if req.Cancel {
		cancelled, err = h.CancelAndDeleteRun(ctx, runID)
	} else {
		err = h.DeleteRun(ctx, runID)
	}
	if err != nil {
		return nil, err
	}
	if s.current == runID {
		s.current = ""
	}
	return map[string]any{"runId": runID, "deleted": true, "cancelled": cancelled}, nil
}

type chatsListRequest struct {
	base
	StableChatID *string `json:"stableChatId"`
	Limit        int     `json:"limit"`
	After        string  `json:"after"`
}

func (s *Session) chatsList(ctx context.Context, r request) (any, error) {
	var req chatsListRequest
	if err := r.decode(&req); err != nil {
		return nil, err
	}
	if req.Limit < 0 || req.Limit > runs.MaxChatPage {
		return nil, invalidRequest("limit must be in 0..%d (0: %d), not %d", runs.MaxChatPage, runs.DefaultChatPage, req.Limit)
	}
	stable, err := filter("stableChatId", req.StableChatID)
	if err != nil {
		return nil, err
	}
	h, err := s.hostRuns()
	if err != nil {
		return nil, err
	}
	cs, more, err := h.ChatsPage(ctx, runs.ChatQuery{StableChatID: stable, Limit: req.Limit, After: req.After})
	if err != nil {
		return nil, err
	}
	return listedPage("chats", cs, more), nil
}

type chatShowRequest struct {
	base
	WorkspaceID *string `json:"workspaceId"`
}

func (s *Session) chatShow(ctx context.Context, r request) (any, error) {
	var req chatShowRequest
	if err := r.decode(&req); err != nil {
		return nil, err
	}
	if req.WorkspaceID == nil {
		return nil, invalidRequest("missing \"workspaceId\"")
	}
	if *req.WorkspaceID == "" {
		return nil, invalidRequest("\"workspaceId\" is empty: name a chat workspace (chat_…)")
	}
	h, err := s.hostRuns()
	if err != nil {
		return nil, err
	}
	return h.Chat(ctx, *req.WorkspaceID)
}

func (s *Session) manifestGet(ctx context.Context, r request) (any, error) {
	runID, err := s.runOnly(r)
	if err != nil {
		return nil, err
	}
	h, err := s.hostRuns()
	if err != nil {
		return nil, err
	}
	m, err := h.Manifest(ctx, runID)
	if err != nil {
		return nil, err
	}
	return map[string]any{"manifest": m}, nil
}

// ---- checkpoints.list, checkpoint.view, runs.diff, materialize

type checkpointsListRequest struct {
	base
	AfterSeq int64 `json:"afterSeq"`
	Limit    int   `json:"limit"`
}

func (s *Session) checkpointsList(ctx context.Context, r request) (any, error) {
	req, runID, err := decodeForRun[checkpointsListRequest](s, r)
	if err != nil {
		return nil, err
	}
	if req.AfterSeq < 0 || req.Limit < 0 || req.Limit > checkpoint.MaxPage {
		return nil, invalidRequest("afterSeq must not be negative and limit must be in 0..%d (0: %d), not %d and %d", checkpoint.MaxPage, checkpoint.MaxPage, req.AfterSeq, req.Limit)
	}
	cv, err := s.checkpointViews()
	if err != nil {
		return nil, err
	}
	if _, err := s.backend.Runs.Run(ctx, runID); err != nil {
		return nil, err
	}
	cps, more, err := cv.PageMore(ctx, runID, req.AfterSeq, req.Limit)
	if err != nil {
		return nil, err
	}
	return listedPage("checkpoints", cps, more), nil
}

type checkpointViewRequest struct {
	base
	CheckpointID *ckptRef `json:"checkpointId"`
	After        string   `json:"after"`
	Limit        int      `json:"limit"`
}

// viewPage is checkpoint.view's answer: a page of the checkpoint.json
// view, and whether files remain after it.
type viewPage struct {
	checkpoint.View
	More bool `json:"more"`
}

func (s *Session) checkpointView(ctx context.Context, r request) (any, error) {
	req, runID, err := decodeForRun[checkpointViewRequest](s, r)
	if err != nil {
		return nil, err
	}
	if req.CheckpointID == nil || req.CheckpointID.live {
		return nil, invalidRequest("checkpoint.view needs \"checkpointId\": a checkpoint")
	}
	page, err := listPage(req.After, req.Limit)
	if err != nil {
		return nil, err
	}
	cv, err := s.checkpointViews()
	if err != nil {
		return nil, err
	}
	if _, err := s.backend.Runs.Run(ctx, runID); err != nil {
		return nil, err
	}
	v, more, err := cv.ViewPage(ctx, runID, req.CheckpointID.seq, page)
	if err != nil {
		return nil, err
	}
	return viewPage{v, more}, nil
}

type runsDiffRequest struct {
	base
	FromRunID string   `json:"fromRunId"`
	From      *ckptRef `json:"from"`
	ToRunID   string   `json:"toRunId"`
	To        *ckptRef `json:"to"`
	MaxBytes  int      `json:"maxBytes"`
	After     string   `json:"after"`
	Limit     int      `json:"limit"`
}

func (s *Session) runsDiff(ctx context.Context, r request) (any, error) {
	var req runsDiffRequest
	if err := r.decode(&req); err != nil {
		return nil, err
	}
	ref := func(runID string, c *ckptRef) (runs.TreeRef, error) {
		if runID == "" {
			var err error
			if runID, err = s.run(req.base); err != nil {
				return runs.TreeRef{}, err
			}
		}
		t := runs.TreeRef{RunID: runID}
		if c != nil && !c.live {
			t.Seq = c.seq
		}
		return t, nil
	}
	from, err := ref(req.FromRunID, req.From)
	if err != nil {
		return nil, err
	}
	to, err := ref(req.ToRunID, req.To)
	if err != nil {
		return nil, err
	}
	h, err := s.hostRuns()
	if err != nil {
		return nil, err
	}
	if err := s.diffBytes(req.MaxBytes); err != nil {
		return nil, err
	}
	page, err := listPage(req.After, req.Limit)
	if err != nil {
		return nil, err
	}
	changes, more, err := h.DiffRunsPage(ctx, from, to, runs.DiffOptions{MaxBytes: req.MaxBytes}, page)
	if err != nil {
		return nil, err
	}
	return listedPage("changes", changes, more), nil
}

type materializeRequest struct {
	base
	Paths []string `json:"paths"`
}

func (s *Session) materialize(ctx context.Context, r request) (any, error) {
	req, runID, err := decodeForRun[materializeRequest](s, r)
	if err != nil {
		return nil, err
	}
	if len(req.Paths) == 0 {
		return nil, invalidRequest("missing \"paths\": the virtual resources to fix under input/")
	}
	paths := make([]vfs.Path, len(req.Paths))
	for i, p := range req.Paths {
		if paths[i], err = vfs.ParsePath(p); err != nil {
			return nil, err
		}
	}
	h, err := s.hostRuns()
	if err != nil {
		return nil, err
	}
	infos, err := h.Materialize(ctx, runID, paths)
	if err != nil {
		return nil, err
	}
	files := make([]writeResult, len(infos))
	for i, fi := range infos {
		size := fi.Size
		files[i] = writeResult{Path: fi.Path.String(), Hash: fi.Hash, Size: &size, CheckpointID: fi.Checkpoint}
	}
	return map[string]any{"files": files}, nil
}

// ---- deletions, policy.get

type deletionsRequest struct {
	base
	AfterID int64 `json:"afterId"`
	Limit   int   `json:"limit"`
}

func (s *Session) deletions(ctx context.Context, r request) (any, error) {
	var req deletionsRequest
	if err := r.decode(&req); err != nil {
		return nil, err
	}
	if req.AfterID < 0 || req.Limit < 0 || req.Limit > runs.MaxDeletionPage {
		return nil, invalidRequest("afterId must not be negative and limit must be in 0..%d (0: %d), not %d and %d", runs.MaxDeletionPage, runs.DefaultDeletionPage, req.AfterID, req.Limit)
	}
	h, err := s.hostRuns()
	if err != nil {
		return nil, err
	}
	ds, more, err := h.Deletions(ctx, req.AfterID, req.Limit)
	if err != nil {
		return nil, err
	}
	return listedPage("deletions", ds, more), nil
}

type policyGetRequest struct {
	base
	WorkspaceID *string `json:"workspaceId"`
	Effective   bool    `json:"effective"`
}

func (s *Session) policyGet(ctx context.Context, r request) (any, error) {
	var req policyGetRequest
	if err := r.decode(&req); err != nil {
		return nil, err
	}
	chatID, err := workspaceID(req.WorkspaceID)
	if err != nil {
		return nil, err
	}
	h, err := s.hostRuns()
	if err != nil {
		return nil, err
	}
	var p runs.Policy
	if req.Effective {
		if chatID == "" {
			return nil, invalidRequest("effective needs \"workspaceId\": the chat it applies to")
		}
		p, err = h.EffectivePolicy(ctx, chatID)
	} else {
		p, err = h.Policy(ctx, policyScope(chatID))
	}
	if err != nil {
		return nil, err
	}
	return map[string]any{"policy": p}, nil
}

// ---- stats, gc, fsck, du, reclaim

func (s *Session) stats(ctx context.Context, r request) (any, error) {
	if err := r.decode(&base{}); err != nil {
		return nil, err
	}
	m, err := s.maintenance()
	if err != nil {
		return nil, err
	}
	return m.Stats(ctx)
}

type gcRequest struct {
	base
	DryRun       bool     `json:"dryRun"`
	GraceSeconds *float64 `json:"graceSeconds"`
}

func (s *Session) gc(ctx context.Context, r request) (any, error) {
	var req gcRequest
	if err := r.decode(&req); err != nil {
		return nil, err
	}
	m, err := s.maintenance()
	if err != nil {
		return nil, err
	}
	opt := wsstore.GCOptions{DryRun: req.DryRun}
	if req.GraceSeconds != nil {
		if *req.GraceSeconds < 0 {
			return nil, invalidRequest("graceSeconds must not be negative")
		}
		// A grace past what a time.Duration holds (about 292 years) is
		// the longest there is, not an overflow into none.
		opt.Grace = time.Duration(math.MaxInt64)
		if ns := *req.GraceSeconds * float64(time.Second); ns < math.MaxInt64 {
			opt.Grace = time.Duration(ns)
		}
		if opt.Grace == 0 {
			opt.Grace = -1 // no grace: GCOptions reads zero as the default
		}
	}
	if opt.DryRun {
		return m.GC(ctx, opt)
	}
	// In steps, as wsctl gc sweeps: writers wait for one step at a time.
	rep, err := m.CollectSteps(ctx, wsstore.GCStepOptions{GCOptions: opt})
	return rep, withPartial(rep, freedAny(rep), err)
}

// freedAny reports whether a collection's steps deleted anything.
func freedAny(rep wsstore.GCReport) bool {
	return rep.Freed != wsstore.ObjectCounts{}
}

func (s *Session) fsck(ctx context.Context, r request) (any, error) {
	if err := r.decode(&base{}); err != nil {
		return nil, err
	}
	m, err := s.maintenance()
	if err != nil {
		return nil, err
	}
	rep, err := m.Fsck(ctx, nil)
	if err != nil {
		return nil, err
	}
	return map[string]any{"ok": rep.OK(), "report": rep}, nil
}

type duRequest struct {
	base
	After *duAfter `json:"after"`
	Limit int      `json:"limit"`
}

// duAfter is the last row of the page before: its workspaceId and runId.
type duAfter struct {
	WorkspaceID string `json:"workspaceId"`
	RunID       string `json:"runId"`
}

func (s *Session) du(ctx context.Context, r request) (any, error) {
	var req duRequest
	if err := r.decode(&req); err != nil {
		return nil, err
	}
	if req.Limit < 0 || req.Limit > wsstore.MaxDUPage {
		return nil, invalidRequest("limit must be in 0..%d (0: %d), not %d", wsstore.MaxDUPage, wsstore.DefaultDUPage, req.Limit)
	}
	var after wsstore.UsageKey
	if req.After != nil {
		if req.After.WorkspaceID == "" {
			return nil, invalidRequest("after.workspaceId is empty: give the last row's workspaceId (and runId), or leave after out for the first page")
		}
		after = wsstore.UsageKey{ChatID: req.After.WorkspaceID, RunID: req.After.RunID}
	}
	m, err := s.maintenance()
	if err != nil {
		return nil, err
	}
	u, more, err := m.DUPage(ctx, after, req.Limit)
	if err != nil {
		return nil, err
	}
	return listedPage("usage", u, more), nil
}

func (s *Session) reclaim(ctx context.Context, r request) (any, error) {
	if err := r.decode(&base{}); err != nil {
		return nil, err
	}
	m, err := s.maintenance()
	if err != nil {
		return nil, err
	}
	rep, err := m.Reclaim(ctx)
	return rep, withPartial(rep, freedAny(rep.GC), err)
}
