package wserr

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
)

// Code is a stable, dotted error code such as "workspace.invalid_path".
type Code string

// Model-correctable codes: the model can fix the call and go on.
const (
	InvalidPath             Code = "workspace.invalid_path"
	PathNotVisible          Code = "workspace.path_not_visible"
	PathNotWritable         Code = "workspace.path_not_writable"
	FileNotFound            Code = "workspace.file_not_found"
	PathIsDirectory         Code = "workspace.path_is_directory"
	NotADirectory           Code = "workspace.not_a_directory"
	PatchOldStringNotFound  Code = "workspace.patch_old_string_not_found"
	PatchOldStringNotUnique Code = "workspace.patch_old_string_not_unique"
	PatchNoChange           Code = "workspace.patch_no_change"
	PatchEmptyOldString     Code = "workspace.patch_empty_old_string"
	WriteStaleFile          Code = "workspace.write_stale_file"
	InvalidLineRange        Code = "workspace.invalid_line_range"
	InvalidCharRange        Code = "workspace.invalid_char_range"
	ReadOnlyResource        Code = "workspace.read_only_resource"
	NotText                 Code = "workspace.not_text"
	InvalidArgument         Code = "workspace.invalid_argument"
	SizeLimitExceeded       Code = "workspace.size_limit_exceeded"
	// InvalidActor: an actor name that is not one valid path segment.
	InvalidActor Code = "workspace.invalid_actor"
	// PathNotAllowed: a host path outside the allow-list, or a write aimed
	// where the Cell rules forbid it (scratch, /tmp, outside the cell).
	PathNotAllowed Code = "workspace.path_not_allowed"
)

// Host-level codes: the store or its host cannot go on safely.
const (
	Internal       Code = "store.internal"
	Corrupt        Code = "store.corrupt"
	NotFound       Code = "store.not_found"
	Conflict       Code = "store.conflict"
	NewerFormat    Code = "store.newer_format"
	OlderFormat    Code = "store.older_format"
	InvalidOptions Code = "store.invalid_options"
	Busy           Code = "store.busy"
	ReadOnly       Code = "store.read_only"
	// NotAStore: the store's database file exists but is empty, is not
	// SQLite, or holds no wsstore store; it is refused and left untouched.
	NotAStore Code = "store.not_a_store"
	// DiskFull: a write met a full disk or quota, or a file the file
	// system takes no larger (EFBIG: the process's file size limit, a FAT32
	// volume's 4 GiB); it changed nothing, and the store works again once
	// space frees.
	DiskFull Code = "store.disk_full"
	// Closed: the call came after the store (or the part of it called)
	// was closed; it changed nothing.
	Closed Code = "store.closed"
	// Canceled: the caller's context ended (cancelled, or past its
	// deadline) before the call finished; a change it cut short changed
	// nothing. CodeOf gives it for any error that wraps context.Canceled or
	// context.DeadlineExceeded without a code of its own.
	Canceled           Code = "store.canceled"
	InvalidState       Code = "run.invalid_transition"
	RunNotFound        Code = "run.not_found"
	RunExists          Code = "run.exists"
	CheckpointNotFound Code = "checkpoint.not_found"
	InvalidManifest    Code = "manifest.invalid"
	MissingArtifact    Code = "manifest.missing_required_artifact"
	SinkFailed         Code = "commit.sink_failed"
	JournalFailed      Code = "journal.write_failed"
	// ChatActiveRun: a chat workspace cannot be deleted while a run of
	// it is active; cancel the run, or force the deletion.
	ChatActiveRun Code = "chat.active_run"
	// PersistentWorkspaceConflict: two runs changed the same persist/
	// file differently; the host resolves it, not the model.
	PersistentWorkspaceConflict Code = "agent.persistent_workspace_conflict"
	// ArchiveCorrupt: an archive being imported is truncated, tampered
	// with or inconsistent; nothing of it was made visible.
	ArchiveCorrupt Code = "archive.corrupt"
	// ArchiveUnsupportedVersion: an archive of a format version this build
	// does not read; nothing of it was made visible.
	ArchiveUnsupportedVersion Code = "archive.unsupported_version"
)

// Access codes of the HTTP API.
const (
	// Unauthorized: no bearer token, or one that is unknown or revoked.
	Unauthorized Code = "auth.unauthorized"
	// Forbidden: a valid token that may not do what the request asks (a
	// read-only token writing, a token for other actors).
	Forbidden Code = "auth.forbidden"
)

// ModelCorrectable reports whether errors with code c are meant to be
// returned to the model as a tool error rather than failing the run.
func (c Code) ModelCorrectable() bool {
	return strings.HasPrefix(string(c), "workspace.")
}

// Error is the store's structured error. Op names the operation ("write",
// "patch"), Path the workspace path if any, Msg a human sentence, and Err the
// cause, reachable with errors.Unwrap.
type Error struct {
	Code Code
	Op   string
	Path string
	Msg  string
	Err  error
}

// New returns an *Error with the given code and a formatted message.
func New(code Code, op, path, format string, args ...any) *Error {
	return &Error{Code: code, Op: op, Path: path, Msg: fmt.Sprintf(format, args...)}
}

// Wrap returns an *Error with the given code whose cause is err.
func Wrap(code Code, op, path string, err error) *Error {
	return &Error{Code: code, Op: op, Path: path, Err: err}
}

// StoreFull returns the workspace.size_limit_exceeded refusal of a change
// that the store-wide cap (maxStoreBytes) refuses, which IsStoreFull tells
// from the code's other refusals (a run's cap, an event's or a message's
// size): collecting the store's garbage may make room for the change,
// never for those. It reads, and carries its code, as New's error does.
func StoreFull(op, path, format string, args ...any) error {
	return storeFull{New(SizeLimitExceeded, op, path, format, args...)}
}

// IsStoreFull reports whether err is, or wraps, a refusal of the store's
// cap made by StoreFull.
func IsStoreFull(err error) bool { return errors.As(err, new(storeFull)) }

// storeFull marks the *Error it wraps as the store cap's refusal.
type storeFull struct{ e *Error }

func (f storeFull) Error() string { return f.e.Error() }
func (f storeFull) Unwrap() error { return f.e }

// FromFS codes err, a failure of the file system beside the store (a
// temporary file, a spooled body): a full disk or quota, or a file grown
// past what the file system takes (EFBIG), is DiskFull and a read-only
// file system ReadOnly, as the store's own writes report them; anything
// else is Internal.
func FromFS(op, path string, err error) *Error {
	switch {
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT), errors.Is(err, syscall.EFBIG):
		return Wrap(DiskFull, op, path, err)
	case errors.Is(err, syscall.EROFS):
		return Wrap(ReadOnly, op, path, err)
	}
	return Wrap(Internal, op, path, err)
}

// FSFault codes err as FromFS does when it is a full disk, a quota, a file
// grown past what the file system takes or a read-only file system, and
// returns it unchanged otherwise (nil for nil): for a file the user named,
// where other failures keep their own meaning.
func FSFault(op, path string, err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || errors.Is(err, syscall.EFBIG) || errors.Is(err, syscall.EROFS) {
		return FromFS(op, path, err)
	}
	return err
}

// FSWriter is w with its write errors passed through FSFault(op, path):
// for an archive or a file streamed onto the host's file system.
func FSWriter(op, path string, w io.Writer) io.Writer { return fsWriter{w, op, path} }

type fsWriter struct {
	w        io.Writer
	op, path string
}

func (f fsWriter) Write(b []byte) (int, error) {
	n, err := f.w.Write(b)
	return n, FSFault(f.op, f.path, err)
}

// Source is r, content a caller hands the store, with its read errors
// coded as the caller's: InvalidArgument naming op and path, r's own error
// still reachable (errors.Is, errors.As). io.EOF, a context's end and
// errors that carry a code already pass as they are.
func Source(r io.Reader, op, path string) io.Reader { return source{r, op, path} }

type source struct {
	r        io.Reader
	op, path string
}

func (s source) Read(b []byte) (int, error) {
	n, err := s.r.Read(b)
	if err != nil && err != io.EOF && !errors.As(err, new(*Error)) &&
		!errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		err = &Error{Code: InvalidArgument, Op: s.op, Path: s.path, Msg: "reading the content", Err: err}
	}
	return n, err
}

// Error formats the error as "op path: code: message: cause".
func (e *Error) Error() string {
	var b strings.Builder
	if e.Op != "" {
		b.WriteString(e.Op)
		if e.Path != "" {
			b.WriteString(" ")
			b.WriteString(e.Path)
		}
		b.WriteString(": ")
	} else if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(string(e.Code))
	if e.Msg != "" {
		b.WriteString(": ")
		b.WriteString(e.Msg)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Message returns the human part of the error without the code, for
// responses that carry the code in a field of its own.
func (e *Error) Message() string {
	s := e.Msg
	if e.Err != nil {
		if s != "" {
			s += ": "
		}
		s += e.Err.Error()
	}
	if s == "" {
		s = string(e.Code)
	}
	if e.Path != "" {
		s = e.Path + ": " + s
	}
	return s
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is an *Error with the same code, so that
// errors.Is(err, &wserr.Error{Code: wserr.InvalidPath}) works.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code && (t.Op == "" || t.Op == e.Op) && (t.Path == "" || t.Path == e.Path)
}

// CodeOf returns the code of the first *Error in err's chain; for any
// other non-nil error, Canceled if it wraps a context's end, else
// Internal; and "" for nil.
func CodeOf(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return Canceled
	}
	return Internal
}

// Is reports whether err carries code c. An error that carries no code
// but is a context's end carries Canceled, as CodeOf says.
func Is(err error, c Code) bool {
	var e *Error
	if c == Canceled && !errors.As(err, &e) && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return true
	}
	for err != nil {
		if errors.As(err, &e) {
			if e.Code == c {
				return true
			}
			err = e.Err
			continue
		}
		return false
	}
	return false
}

// MessageOf returns the human message of err without its code.
func MessageOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message()
	}
	return err.Error()
}
