package vfs

import (
	"context"
	"fmt"
	"time"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/wserr"
)

// Kind tells files from directories.
type Kind uint8

// Entry kinds.
const (
	KindFile Kind = 1
	KindDir  Kind = 2
)

func (k Kind) String() string {
	switch k {
	case KindFile:
		return "file"
	case KindDir:
		return "dir"
	}
	return "unknown"
}

// MarshalText encodes a kind as "file" or "dir".
func (k Kind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// ResourceKind says where a resource comes from.
type ResourceKind string

// Resource kinds.
const (
	ResourceMaterialized ResourceKind = "materialized" // input/: fixed at run start
	ResourceGenerated    ResourceKind = "generated"    // output/, scratch/, …: written by the agent
	ResourceVirtual      ResourceKind = "virtual"      // provider-backed, read on demand, never stored
	ResourceHost         ResourceKind = "host"         // an allow-listed host directory
)

// FileInfo describes a file or directory as a tool sees it.
type FileInfo struct {
	Path     Path         `json:"path"`
	Kind     Kind         `json:"kind"`
	Size     int64        `json:"size"`          // bytes; for a stored directory, of all files below it
	Hash     cas.Hash     `json:"hash,omitzero"` // BLAKE3 of a file's content, a stored directory's tree address; zero where not computed (host listings)
	Resource ResourceKind `json:"resource"`      // where it comes from
	Writable bool         `json:"writable"`      // whether Write/Patch may change it (a host file's permissions allow it); never for a directory. Removal is the directory's to allow
	ModTime  time.Time    `json:"modTime,omitzero"`
	// Checkpoint, on the info a change returns, names the checkpoint a
	// versioned store took right after that change ("" for none).
	Checkpoint string `json:"checkpoint,omitempty"`
}

// ReadOptions select part of a file. At most one of the ranges may be set.
// Lines are 1-based and inclusive; EndLine 0 means to the end. Chars are
// 0-based rune offsets, End exclusive; EndChar 0 means to the end.
type ReadOptions struct {
	StartLine, EndLine int
	StartChar, EndChar int
}

// ranges reports whether o asks for a line range and a char range.
func (o ReadOptions) ranges() (line, char bool) {
	return o.StartLine != 0 || o.EndLine != 0, o.StartChar != 0 || o.EndChar != 0
}

// ReadResult is what Read returns.
type ReadResult struct {
	Info       FileInfo `json:"info"`
	Content    []byte   `json:"-"`
	Text       string   `json:"content"`    // Content as text when it is valid UTF-8
	StartLine  int      `json:"startLine"`  // first line returned (1-based), 0 if no line range
	EndLine    int      `json:"endLine"`    // last line returned
	TotalLines int      `json:"totalLines"` // lines in the whole file
	Truncated  bool     `json:"truncated"`  // the range left part of the file out
	// TotalLinesUnknown is set when a range of a large file was read
	// without reading the file to its end, so TotalLines (then 0) is not
	// known.
	TotalLinesUnknown bool `json:"totalLinesUnknown,omitempty"`
}

// WriteMode says whether Write replaces or appends.
type WriteMode string

// Write modes.
const (
	Replace WriteMode = "replace"
	Append  WriteMode = "append"
)

// WriteOptions guard and shape a write.
type WriteOptions struct {
	Mode WriteMode // default Replace
	// ExpectedHash, if not zero, must be the file's current hash (or the
	// write fails with workspace.write_stale_file); it protects against
	// writing over a version the caller has not seen.
	ExpectedHash cas.Hash
}

// PatchOptions shape a patch.
type PatchOptions struct {
	ReplaceAll   bool
	ExpectedHash cas.Hash
}

// SearchOptions bound a search.
type SearchOptions struct {
	Path     Path // search below this directory; root by default
	MaxHits  int  // default 20, at most 200
	MaxFiles int  // files scanned at most; default 2000
}

// Hit is one search result: a file, a score and the line range that
// matched best.
type Hit struct {
	Path      Path    `json:"path"`
	Score     float64 `json:"score"`
	StartLine int     `json:"startLine"`
	EndLine   int     `json:"endLine"`
	Snippet   string  `json:"snippet"`
}

// SearchResult is what a search returns: the hits, and the virtual
// mounts it passed over.
type SearchResult struct {
	Hits []Hit `json:"hits"`
	// Skipped lists, in path order, the virtual mounts below the
	// searched directory whose provider failed, each with its error: the
	// search went on without them (files a provider gave before it
	// failed may be among the hits). A search of a path at or inside a
	// mount fails with its provider's error instead.
	Skipped []SkippedMount `json:"skipped,omitempty"`
}

// SkippedMount is a virtual mount a search passed over, and why: the code
// and message of its provider's error.
type SkippedMount struct {
	Path    Path       `json:"path"`
	Code    wserr.Code `json:"code"`
	Message string     `json:"message"`
}

// FS is the read side every resource kind implements. Paths are relative to
// the FS's own root. Errors are *wserr.Error with the workspace codes
// (file_not_found, path_is_directory, invalid_line_range, …).
type FS interface {
	Stat(ctx context.Context, p Path) (FileInfo, error)
	Read(ctx context.Context, p Path, opt ReadOptions) (ReadResult, error)
	// List returns the entries below p, to depth levels (1 = direct
	// children; 0 means 1), sorted by path.
	List(ctx context.Context, p Path, depth int) ([]FileInfo, error)
}

// WriteFS is implemented by resources that can be changed.
type WriteFS interface {
	FS
	Write(ctx context.Context, p Path, content []byte, opt WriteOptions) (FileInfo, error)
	Patch(ctx context.Context, p Path, old, new string, opt PatchOptions) (FileInfo, error)
	Remove(ctx context.Context, p Path) error
}

// SearchFS is implemented by resources that can be searched.
type SearchFS interface {
	Search(ctx context.Context, query string, opt SearchOptions) (SearchResult, error)
}

// UnmarshalText decodes "file" or "dir".
func (k *Kind) UnmarshalText(b []byte) error {
	switch string(b) {
	case "file":
		*k = KindFile
	case "dir":
		*k = KindDir
	default:
		return fmt.Errorf("unknown kind %q", b)
	}
	return nil
}
