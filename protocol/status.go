package protocol

import (
	"net/http"
	"slices"
	"strings"

	"github.com/wsstore/wsstore/wserr"
)

// The protocol's error codes, in addition to the store's.
const (
	CodeInvalidJSON    wserr.Code = "batch.invalid_json"    // the line is not JSON, or not UTF-8
	CodeUnknownOp      wserr.Code = "batch.unknown_op"      // op names no operation
	CodeInvalidRequest wserr.Code = "batch.invalid_request" // a request that does not fit its op
	CodeLineTooLong    wserr.Code = "batch.line_too_long"   // a line over the reader's limit
	CodeInterrupted    wserr.Code = "batch.interrupted"     // an interrupt stopped the request or the session
	// CodeStopped is a command (other than a session, whose requests answer
	// CodeInterrupted) that an interrupt stopped.
	CodeStopped wserr.Code = "wsctl.interrupted"
	// CodeInvalidArgument is a command-line argument or flag value wsctl
	// cannot use (a malformed run or checkpoint reference, a negative
	// --limit, an ambiguous run prefix, no user data directory): a mistake
	// of whoever typed the command, never one to hand to a model, unlike
	// workspace.invalid_argument.
	CodeInvalidArgument wserr.Code = "wsctl.invalid_argument"
	// CodeRangeNotSatisfiable is an HTTP Range request for bytes the file
	// does not hold (wsctl serve).
	CodeRangeNotSatisfiable wserr.Code = "http.range_not_satisfiable"
	// CodeMethodNotAllowed is an HTTP request whose path is an endpoint's
	// but not with its method (wsctl serve); the Allow header lists the
	// methods that are.
	CodeMethodNotAllowed wserr.Code = "http.method_not_allowed"
	// CodeNoEndpoint is an HTTP request whose path is no endpoint's (wsctl
	// serve): a client's mistake, not a missing store object.
	CodeNoEndpoint wserr.Code = "http.not_found"
	// CodePreconditionFailed is an HTTP download whose If-Match names
	// another version than the file is at (wsctl serve).
	CodePreconditionFailed wserr.Code = "http.precondition_failed"
	// CodeUnsupportedEncoding is an HTTP request whose body is in a
	// content coding (Content-Encoding: gzip, …) that wsctl serve does not
	// decode.
	CodeUnsupportedEncoding wserr.Code = "http.unsupported_encoding"

	// CodeQueryLimit is a wsctl sql query stopped for going over its
	// --max-memory or --timeout.
	CodeQueryLimit wserr.Code = "wsctl.query_limit"
)

// Interrupted is the error (CodeInterrupted) of a session, or of the
// request in flight, that an interrupt (SIGINT, SIGTERM) ended; what says
// what the interrupt stopped.
func Interrupted(what string) error {
	return wserr.New(CodeInterrupted, "batch", "", "interrupted: %s", what)
}

func invalidRequest(format string, args ...any) error {
	return wserr.New(CodeInvalidRequest, "", "", format, args...)
}

// Status is one row of a status table: the status, what it means, and the
// error codes that map to it (exact codes first, then code prefixes).
type Status struct {
	Status   int
	Meaning  string
	Codes    []wserr.Code
	Prefixes []string
}

// ExitStatuses is the one table that maps error codes to the exit statuses
// of wsctl; its help is generated from it. Codes not listed map to 1.
var ExitStatuses = []Status{
	{0, "ok", nil, nil},
	{1, "internal or unexpected error", []wserr.Code{wserr.Internal, wserr.JournalFailed}, nil},
	{2, "usage: bad command line, invalid argument or --store; a sql query over its --max-memory or --timeout; a batch whose host closed its end of the output (nothing printed)", []wserr.Code{wserr.InvalidArgument, wserr.InvalidOptions, CodeInvalidArgument, CodeQueryLimit}, nil},
	{3, "not found: store, run, checkpoint or file", []wserr.Code{wserr.NotFound, wserr.RunNotFound, wserr.CheckpointNotFound, wserr.FileNotFound}, nil},
	{4, "model-correctable workspace error: bad path, not visible or writable, patch mismatch, …", nil, []string{"workspace."}},
	{5, "conflict or invalid transition (active run, run exists, non-empty dir, a --listen address in use)", []wserr.Code{wserr.InvalidState, wserr.RunExists, wserr.Conflict, wserr.PersistentWorkspaceConflict, wserr.ChatActiveRun}, nil},
	{6, "corruption: fsck found problems, the store is damaged, its database file is not a store (left untouched), or an archive is truncated or tampered with", []wserr.Code{wserr.Corrupt, wserr.NotAStore, wserr.ArchiveCorrupt}, nil},
	{7, "format: a store written by a newer wsstore (upgrade wsctl), an older one a read-only open cannot upgrade, or an archive version this build does not read", []wserr.Code{wserr.NewerFormat, wserr.OlderFormat, wserr.ArchiveUnsupportedVersion}, nil},
	{8, "store busy, read-only (sql refuses writes with this status) or on a full disk; nothing was changed but the pages a gc, prune, reclaim or actor gc finished before, which it prints (run it again to go on)", []wserr.Code{wserr.Busy, wserr.ReadOnly, wserr.DiskFull}, nil},
	{9, "manifest invalid, required artifact missing, or chat sink failed", []wserr.Code{wserr.InvalidManifest, wserr.MissingArtifact, wserr.SinkFailed}, nil},
	// 128 + SIGINT's number, as shells report a process SIGINT ended.
	{130, "interrupted: stopped by SIGINT or SIGTERM, or the caller's context ended", []wserr.Code{CodeInterrupted, CodeStopped, wserr.Canceled}, nil},
}

// HTTPStatuses is the one table that maps error codes to HTTP statuses:
// 4xx for what the caller (a host, or the model through it) can correct,
// 5xx for what it cannot. Codes not listed map to 500.
var HTTPStatuses = []Status{
	{http.StatusBadRequest, "the request is not JSON, names no op, or does not fit its op",
		[]wserr.Code{CodeInvalidJSON, CodeInvalidRequest, CodeUnknownOp, wserr.InvalidArgument, wserr.InvalidOptions, CodeInvalidArgument, CodeQueryLimit}, nil},
	{http.StatusUnauthorized, "no bearer token, or an unknown or revoked one", []wserr.Code{wserr.Unauthorized}, nil},
	{http.StatusForbidden, "the store is read-only, or the token may not do this (read-only, other actors)", []wserr.Code{wserr.ReadOnly, wserr.Forbidden}, nil},
	{http.StatusNotFound, "no such store, run, checkpoint or file; no such endpoint",
		[]wserr.Code{wserr.NotFound, wserr.RunNotFound, wserr.CheckpointNotFound, wserr.FileNotFound, CodeNoEndpoint}, nil},
	{http.StatusConflict, "conflict or invalid transition; a write guarded by a stale hash",
		[]wserr.Code{wserr.InvalidState, wserr.RunExists, wserr.Conflict, wserr.PersistentWorkspaceConflict, wserr.WriteStaleFile, wserr.ChatActiveRun}, nil},
	{http.StatusMethodNotAllowed, "an endpoint asked with a method it does not take (Allow lists those it does)", []wserr.Code{CodeMethodNotAllowed}, nil},
	{http.StatusRequestEntityTooLarge, "the request is too long", []wserr.Code{CodeLineTooLong}, nil},
	{http.StatusPreconditionFailed, "a download whose If-Match names another version of the file", []wserr.Code{CodePreconditionFailed}, nil},
	{http.StatusUnsupportedMediaType, "a request body in a content coding (Content-Encoding) the server does not decode", []wserr.Code{CodeUnsupportedEncoding}, nil},
	{http.StatusRequestedRangeNotSatisfiable, "a Range request for bytes the file does not hold", []wserr.Code{CodeRangeNotSatisfiable}, nil},
	{http.StatusUnprocessableEntity, "model-correctable workspace error, an invalid manifest or missing artifact, or an archive that is corrupt or of an unsupported version",
		[]wserr.Code{wserr.InvalidManifest, wserr.MissingArtifact, wserr.ArchiveCorrupt, wserr.ArchiveUnsupportedVersion}, []string{"workspace."}},
	{http.StatusInternalServerError, "internal error, corruption, a failed journal write, a database file that is not a store, or a store format this build cannot use",
		[]wserr.Code{wserr.Internal, wserr.JournalFailed, wserr.Corrupt, wserr.NotAStore, wserr.NewerFormat, wserr.OlderFormat}, nil},
	{http.StatusInsufficientStorage, "the disk under the store is full; nothing was changed but the pages a gc, prune, reclaim or actor gc finished before, which the answer's partial gives", []wserr.Code{wserr.DiskFull}, nil},
	{http.StatusBadGateway, "the chat sink failed", []wserr.Code{wserr.SinkFailed}, nil},
	{http.StatusServiceUnavailable, "the store is busy, or an interrupt or the request's end stopped it",
		[]wserr.Code{wserr.Busy, CodeInterrupted, CodeStopped, wserr.Canceled}, nil},
}

// ExitStatus maps code to its exit status through ExitStatuses: 0 for no
// code, 1 for one the table does not list.
func ExitStatus(code wserr.Code) int {
	if code == "" {
		return 0
	}
	return lookup(ExitStatuses, code, 1)
}

// HTTPStatus maps code to its HTTP status through HTTPStatuses: 200 for
// no code, 500 for one the table does not list.
func HTTPStatus(code wserr.Code) int {
	if code == "" {
		return http.StatusOK
	}
	return lookup(HTTPStatuses, code, http.StatusInternalServerError)
}

// lookup finds code in table: an exact code first, then a prefix.
func lookup(table []Status, code wserr.Code, otherwise int) int {
	for _, s := range table {
		if slices.Contains(s.Codes, code) {
			return s.Status
		}
	}
	for _, s := range table {
		for _, p := range s.Prefixes {
			if strings.HasPrefix(string(code), p) {
				return s.Status
			}
		}
	}
	return otherwise
}
