package protocol

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/wsstore/wsstore/actors"
	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// ActorSpaces is what the actor ops need of actor spaces; *actors.Spaces
// implements it.
type ActorSpaces interface {
	ListPage(ctx context.Context, actor, path string, depth int, page vfs.ListPage) ([]vfs.Listed, bool, error)
	ListAtPage(ctx context.Context, actor string, seq int64, path string, depth int, page vfs.ListPage) ([]vfs.Listed, bool, error)
	UploadWith(ctx context.Context, actor, path string, r io.Reader, opt actors.ChangeOptions) (actors.Change, error)
	Download(ctx context.Context, actor, path string) (io.ReadCloser, vfs.Entry, error)
	DeleteWith(ctx context.Context, actor, path string, opt actors.ChangeOptions) (actors.Change, error)
	DeleteByPrefix(ctx context.Context, actor, prefix string) (actors.Change, error)
	Stats(ctx context.Context, actor string) (actors.Stats, error)
	WorkspacePage(ctx context.Context, only []string, path string, depth int, cursor actors.WorkspaceCursor, limit int) ([]actors.WorkspaceEntry, bool, error)
	StatsPage(ctx context.Context, only []string, after string, limit int) ([]actors.Stats, bool, error)
	GC(ctx context.Context, opt actors.GCOptions) (actors.GCReport, error)
	ActorsPage(ctx context.Context, only []string, after string, limit int) ([]actors.Space, bool, error)
	Changes(ctx context.Context, actor string, afterSeq int64, limit int) ([]actors.Change, error)
	DiffPage(ctx context.Context, actor string, from, to int64, page vfs.ListPage) ([]vfs.Change, bool, error)
}

// MaxActorDownload bounds the file an actor.download line carries: a
// response is one JSON line held whole, so larger files go through
// "wsctl actor download", or GET /workspace/file over HTTP, which stream
// (Backend.StreamDownload).
const MaxActorDownload = 16 << 20

// actorOps are the ops on actor spaces (seed 004's Workspace API).
var actorOps = []op{
	{
		name: "actor.ls", noRun: true, access: reads, request: []any{actorLsRequest{}}, handle: (*Session).actorLs,
		help: `  actor.ls  {actor?, path?, depth?, at?, after?, limit?}  -> {entries: [{path, name, kind, size, hash}], more}
                                            an actor's files below path to depth levels,
                                            a page at a time as list; at: the version after
                                            that change (a seq of actor.changes; 0: the
                                            empty space; a gc change's: the one before it),
                                            store.not_found if gc pruned it;
                                            without actor: every space as one tree, a
                                            directory per actor, paths starting with it
                                            (empty: refused)`,
	},
	{
		name: "actor.upload", noRun: true, access: writes, request: []any{actorUploadRequest{}}, handle: (*Session).actorUpload,
		help: `  actor.upload  {actor, path, content?, contentBase64?, expectedHash?}
                                            -> {actor, seq, op, path, files, bytes, root, created}
                                            content is text; contentBase64 carries bytes;
                                            expectedHash: the file's hash as last read (else
                                            workspace.write_stale_file, nothing changed)`,
	},
	{
		name: "actor.download", noRun: true, access: reads, request: []any{actorPathRequest{}}, handle: (*Session).actorDownload,
		help: `  actor.download  {actor, path}             -> {size, hash, content | contentBase64}
                                            files up to 16 MiB; "wsctl actor download"
                                            (over HTTP GET /workspace/file) streams any size`,
	},
	{
		name: "actor.rm", noRun: true, access: writes, request: []any{actorRmRequest{}}, handle: (*Session).actorRm,
		help: `  actor.rm  {actor, path, expectedHash?}    -> the change, as actor.upload`,
	},
	{
		name: "actor.rm-prefix", noRun: true, access: writes, request: []any{actorPrefixRequest{}}, handle: (*Session).actorRmPrefix,
		help: `  actor.rm-prefix  {actor, prefix}          -> the change; "temp/" removes temp/, "temp" also temp.md
                                            a prefix that matches nothing: seq 0 and no
                                            created, nothing recorded`,
	},
	{
		name: "actor.stats", noRun: true, access: reads, request: []any{actorStatsRequest{}}, handle: (*Session).actorStats,
		help: `  actor.stats  {actor?, after?, limit?}    -> {actor, files, dirs, bytes, seq, versions, root}
                                            without actor: {stats: [STATS, …], more}, one
                                            per actor by name, limit default 100, at most
                                            1000; more: ask again with after the last actor
                                            (an empty actor: refused)`,
	},
	{
		name: "actor.gc", noRun: true, access: writes, request: []any{actorGCRequest{}}, handle: (*Session).actorGC,
		help: `  actor.gc  {actor?, keepVersions?}         -> {actors, pruned}   prunes old versions;
                                            "wsctl gc" then frees what they held; actor
                                            left out: every actor's (empty: refused)`,
	},
	{
		name: "actor.changes", noRun: true, access: reads, request: []any{actorChangesRequest{}}, handle: (*Session).actorChanges,
		help: `  actor.changes  {actor, afterSeq?, limit?}  -> {changes: [CHANGE, …], more}
                                            the space's journal, oldest first: each change
                                            as actor.upload answers it (gc rows too); limit:
                                            default 100, at most 500; more: changes remain
                                            (ask again with afterSeq the last seq)`,
	},
	{
		name: "actor.diff", noRun: true, access: reads, request: []any{actorDiffRequest{}}, handle: (*Session).actorDiff,
		help: `  actor.diff  {actor, from, to, after?, limit?}  -> {changes: [{path, op, old?, new?}], more}
                                            the files that differ between the versions after
                                            changes from and to (seqs; 0: the empty space;
                                            a gc change's: the one before it);
                                            store.not_found for a change that does not exist
                                            or whose version actor.gc pruned; a page in path
                                            order as diff's`,
	},
	{
		name: "actors.list", noRun: true, access: reads, request: []any{actorsListRequest{}}, handle: (*Session).actorsList,
		help: `  actors.list  {after?, limit?}            -> {actors: [{actor, root, seq, created, updated}], more}
                                            the actor spaces, by name, a page at a time:
                                            limit default 10000, at most 100000; more:
                                            ask again with after the last actor; a token
                                            limited to actors lists its actors alone`,
	},
}

func init() {
	ops = append(ops, actorOps...)
	for i := range ops {
		opsByName[ops[i].name] = &ops[i]
	}
}

type actorLsRequest struct {
	base
	Actor *string `json:"actor"`
	Path  string  `json:"path"`
	Depth int     `json:"depth"`
	At    *int64  `json:"at"`
	After string  `json:"after"`
	Limit int     `json:"limit"`
}

type actorPathRequest struct {
	base
	Actor string `json:"actor"`
	Path  string `json:"path"`
}

type actorStatsRequest struct {
	base
	Actor *string `json:"actor"`
	After string  `json:"after"`
	Limit int     `json:"limit"`
}

type actorUploadRequest struct {
	base
	Actor         string  `json:"actor"`
	Path          string  `json:"path"`
	Content       *string `json:"content"`
	ContentBase64 *string `json:"contentBase64"`
	ExpectedHash  string  `json:"expectedHash"`
}

type actorRmRequest struct {
	base
	Actor        string `json:"actor"`
	Path         string `json:"path"`
	ExpectedHash string `json:"expectedHash"`
}

type actorPrefixRequest struct {
	base
	Actor  string `json:"actor"`
	Prefix string `json:"prefix"`
}

type actorChangesRequest struct {
	base
	Actor    string `json:"actor"`
	AfterSeq int64  `json:"afterSeq"`
	Limit    int    `json:"limit"`
}

type actorDiffRequest struct {
	base
	Actor string `json:"actor"`
	From  *int64 `json:"from"`
	To    *int64 `json:"to"`
	After string `json:"after"`
	Limit int    `json:"limit"`
}

type actorGCRequest struct {
	base
	Actor        *string `json:"actor"`
	KeepVersions int     `json:"keepVersions"`
}

// required refuses a request that leaves out one of the named fields
// (pairs of a name and its value; empty is left out) as
// batch.invalid_request: a host's mistake, where a bad value is the
// model's (workspace.invalid_actor, workspace.invalid_path).
func required(pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] == "" {
			return invalidRequest("missing %q", pairs[i])
		}
	}
	return nil
}

// actorOrEvery reads an optional actor: left out (or null), every actor
// (every true); empty, a host's mistake (an unset variable) refused, never
// read as every actor; to says what leaving it out does.
func actorOrEvery(actor *string, to string) (name string, every bool, err error) {
	switch {
	case actor == nil:
		return "", true, nil
	case *actor == "":
		return "", false, invalidRequest("\"actor\" is empty: name an actor, or leave it out to %s", to)
	}
	return *actor, false, nil
}

func (s *Session) actors() (ActorSpaces, error) {
	if s.backend.Actors == nil {
		return nil, wserr.New(wserr.Internal, "actor", "", "this session has no actor spaces")
	}
	return s.backend.Actors, nil
}

func (s *Session) actorLs(ctx context.Context, r request) (any, error) {
	var req actorLsRequest
	if err := r.decode(&req); err != nil {
		return nil, err
	}
	a, err := s.actors()
	if err != nil {
		return nil, err
	}
	if req.Depth < 0 {
		return nil, wserr.New(wserr.InvalidArgument, "actor.ls", "", "depth must not be negative")
	}
	actor, every, err := actorOrEvery(req.Actor, "list every actor's space")
	if err != nil {
		return nil, err
	}
	if every {
		return s.workspaceLs(ctx, a, req)
	}
	page, err := listPage(req.After, req.Limit)
	if err != nil {
		return nil, err
	}
	var ls []vfs.Listed
	var more bool
	switch {
	case req.At == nil:
		ls, more, err = a.ListPage(ctx, actor, req.Path, req.Depth, page)
	case *req.At < 0:
		return nil, invalidRequest("at must be a change seq (0: the empty space), not %d", *req.At)
	default:
		ls, more, err = a.ListAtPage(ctx, actor, *req.At, req.Path, req.Depth, page)
	}
	if err != nil {
		return nil, err
	}
	return listedPage("entries", ls, more), nil
}

// workspaceLs answers actor.ls without an actor: the spaces the session
// may reach, as one tree.
func (s *Session) workspaceLs(ctx context.Context, a ActorSpaces, req actorLsRequest) (any, error) {
	if req.At != nil {
		return nil, invalidRequest("at names a version of one actor's space: give actor too")
	}
	page, err := listPage("", req.Limit)
	if err != nil {
		return nil, err
	}
	cursor, err := actors.ParseWorkspaceCursor(req.After)
	if err != nil {
		return nil, invalidRequest("%s", err.Error())
	}
	ls, more, err := a.WorkspacePage(ctx, s.backend.ActorScope, req.Path, req.Depth, cursor, page.Limit)
	if err != nil {
		return nil, err
	}
	return listedPage("entries", ls, more), nil
}

func (s *Session) actorUpload(ctx context.Context, r request) (any, error) {
	var req actorUploadRequest
	if err := r.decode(&req); err != nil {
		return nil, err
	}
	if err := required("actor", req.Actor, "path", req.Path); err != nil {
		return nil, err
	}
	a, err := s.actors()
	if err != nil {
		return nil, err
	}
	var body io.Reader
	var size int64 // the content's, for the store cap to take at once
	switch {
	case req.Content != nil && req.ContentBase64 != nil:
		return nil, invalidRequest("give content or contentBase64, not both")
	case req.Content != nil:
		body, size = strings.NewReader(*req.Content), int64(len(*req.Content))
	case req.ContentBase64 != nil:
		body = base64Stream{base64.NewDecoder(base64.StdEncoding, strings.NewReader(*req.ContentBase64))}
		size = decodedSize(*req.ContentBase64)
	default:
		return nil, invalidRequest("actor.upload needs content or contentBase64")
	}
	expected, err := optionalHash(req.ExpectedHash)
	if err != nil {
		return nil, err
	}
	c, err := a.UploadWith(ctx, req.Actor, req.Path, body, actors.ChangeOptions{ExpectedHash: expected, Size: size})
	if err != nil {
		var ce base64.CorruptInputError
		if errors.As(err, &ce) || errors.Is(err, errBase64Cut) {
			return nil, badBase64("contentBase64", *req.ContentBase64)
		}
		return nil, err
	}
	return c, nil
}

func (s *Session) actorDownload(ctx context.Context, r request) (any, error) {
	var req actorPathRequest
	if err := r.decode(&req); err != nil {
		return nil, err
	}
	if err := required("actor", req.Actor, "path", req.Path); err != nil {
		return nil, err
	}
	a, err := s.actors()
	if err != nil {
		return nil, err
	}
	rc, e, err := a.Download(ctx, req.Actor, req.Path)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	if e.Size > MaxActorDownload {
		way := s.backend.StreamDownload
		if way == "" {
			way = "wsctl actor download"
		}
		return nil, wserr.New(wserr.SizeLimitExceeded, "actor.download", req.Path,
			"the file is %d bytes, more than an op's answer carries (%d); use %s, which streams", e.Size, MaxActorDownload, way)
	}
	b, err := io.ReadAll(io.LimitReader(rc, MaxActorDownload+1))
	if err != nil {
		return nil, err
	}
	res := map[string]any{"size": e.Size, "hash": e.Hash}
	if utf8.Valid(b) {
		res["content"] = string(b)
	} else {
		res["contentBase64"] = base64.StdEncoding.EncodeToString(b)
	}
	return res, nil
}

func (s *Session) actorRm(ctx context.Context, r request) (any, error) {
	var req actorRmRequest
	if err := r.decode(&req); err != nil {
		return nil, err
	}
	if err := required("actor", req.Actor, "path", req.Path); err != nil {
		return nil, err
	}
	a, err := s.actors()
	if err != nil {
		return nil, err
	}
	expected, err := optionalHash(req.ExpectedHash)
	if err != nil {
		return nil, err
	}
	return a.DeleteWith(ctx, req.Actor, req.Path, actors.ChangeOptions{ExpectedHash: expected})
}

func (s *Session) actorRmPrefix(ctx context.Context, r request) (any, error) {
	var req actorPrefixRequest
	if err := r.decode(&req); err != nil {
		return nil, err
	}
	if err := required("actor", req.Actor, "prefix", req.Prefix); err != nil {
		return nil, err
	}
	a, err := s.actors()
	if err != nil {
		return nil, err
	}
	return a.DeleteByPrefix(ctx, req.Actor, req.Prefix)
}

func (s *Session) actorStats(ctx context.Context, r request) (any, error) {
	var req actorStatsRequest
	if err := r.decode(&req); err != nil {
		return nil, err
	}
	actor, every, err := actorOrEvery(req.Actor, "have every actor's stats")
	if err != nil {
		return nil, err
	}
	if !every && (req.After != "" || req.Limit != 0) {
		return nil, invalidRequest("after and limit page the stats of every actor: leave them out with actor")
	}
	if req.Limit < 0 || req.Limit > actors.MaxStatsLimit {
		return nil, invalidRequest("limit must be in 0..%d (0: %d), not %d", actors.MaxStatsLimit, actors.DefaultStatsLimit, req.Limit)
	}
	if err := actors.CheckActorCursor(req.After); err != nil {
		return nil, invalidRequest("%s", err.Error())
	}
	a, err := s.actors()
	if err != nil {
		return nil, err
	}
	if !every {
		return a.Stats(ctx, actor)
	}
	st, more, err := a.StatsPage(ctx, s.backend.ActorScope, req.After, req.Limit)
	if err != nil {
		return nil, err
	}
	return listedPage("stats", st, more), nil
}

func (s *Session) actorGC(ctx context.Context, r request) (any, error) {
	var req actorGCRequest
	if err := r.decode(&req); err != nil {
		return nil, err
	}
	// Left out, the actor is every actor; empty, it is a host's mistake
	// that would prune every actor's versions.
	var actor string
	if req.Actor != nil {
		if *req.Actor == "" {
			return nil, invalidRequest("\"actor\" is empty: name an actor, or leave it out to prune every actor's versions")
		}
		actor = *req.Actor
	}
	a, err := s.actors()
	if err != nil {
		return nil, err
	}
	rep, err := a.GC(ctx, actors.GCOptions{Actor: actor, KeepVersions: req.KeepVersions})
	return rep, withPartial(rep, rep.Actors > 0, err)
}

func (s *Session) actorChanges(ctx context.Context, r request) (any, error) {
	var req actorChangesRequest
	if err := r.decode(&req); err != nil {
		return nil, err
	}
	if err := required("actor", req.Actor); err != nil {
		return nil, err
	}
	if req.AfterSeq < 0 || req.Limit < 0 || req.Limit > journal.MaxLimit {
		return nil, invalidRequest("afterSeq must not be negative and limit must be in 0..%d (0: %d), not %d and %d", journal.MaxLimit, journal.DefaultLimit, req.AfterSeq, req.Limit)
	}
	a, err := s.actors()
	if err != nil {
		return nil, err
	}
	// One change more than the page says whether more remain.
	limit := cmp.Or(req.Limit, journal.DefaultLimit)
	cs, err := a.Changes(ctx, req.Actor, req.AfterSeq, limit+1)
	if err != nil {
		return nil, err
	}
	more := len(cs) > limit
	return listedPage("changes", cs[:min(len(cs), limit)], more), nil
}

func (s *Session) actorDiff(ctx context.Context, r request) (any, error) {
	var req actorDiffRequest
	if err := r.decode(&req); err != nil {
		return nil, err
	}
	if err := required("actor", req.Actor); err != nil {
		return nil, err
	}
	if req.From == nil || req.To == nil {
		return nil, invalidRequest("actor.diff needs \"from\" and \"to\": change seqs (0: the empty space)")
	}
	if *req.From < 0 || *req.To < 0 {
		return nil, invalidRequest("from and to must not be negative, not %d and %d", *req.From, *req.To)
	}
	page, err := listPage(req.After, req.Limit)
	if err != nil {
		return nil, err
	}
	a, err := s.actors()
	if err != nil {
		return nil, err
	}
	cs, more, err := a.DiffPage(ctx, req.Actor, *req.From, *req.To, page)
	if err != nil {
		return nil, err
	}
	return listedPage("changes", cs, more), nil
}

type actorsListRequest struct {
	base
	After string `json:"after"`
	Limit int    `json:"limit"`
}

func (s *Session) actorsList(ctx context.Context, r request) (any, error) {
	var req actorsListRequest
	if err := r.decode(&req); err != nil {
		return nil, err
	}
	if req.Limit < 0 || req.Limit > vfs.MaxListLimit {
		return nil, invalidRequest("limit must be in 0..%d (0: %d), not %d", vfs.MaxListLimit, vfs.DefaultListLimit, req.Limit)
	}
	if err := actors.CheckActorCursor(req.After); err != nil {
		return nil, invalidRequest("%s", err.Error())
	}
	a, err := s.actors()
	if err != nil {
		return nil, err
	}
	sps, more, err := a.ActorsPage(ctx, s.backend.ActorScope, req.After, cmp.Or(req.Limit, vfs.DefaultListLimit))
	if err != nil {
		return nil, err
	}
	return listedPage("actors", sps, more), nil
}

// errBase64Cut is a base64 stream that ends inside a group of four.
var errBase64Cut = errors.New("it ends inside a group of four characters (standard base64 pads the last group with =)")

// base64Stream is a base64 decoder whose input ending inside a group is
// errBase64Cut: the decoder's io.ErrUnexpectedEOF reads, to a reader that
// fills a buffer, as a short last read, and the content would be stored
// cut short.
type base64Stream struct{ r io.Reader }

func (b base64Stream) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if errors.Is(err, io.ErrUnexpectedEOF) {
		err = errBase64Cut
	}
	return n, err
}

// decodedSize is how many bytes the padded base64 text s decodes to, the
// line breaks the decoder skips left out (text that is not base64 is
// refused as it is decoded).
func decodedSize(s string) int64 {
	var n, pad int64
	for i := range len(s) {
		switch s[i] {
		case '\n', '\r':
			continue
		case '=':
			pad++
		}
		n++
	}
	return max(n/4*3-pad, 0)
}
