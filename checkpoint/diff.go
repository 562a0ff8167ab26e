package checkpoint

import (
	"context"
	"strings"
	"unicode/utf8"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// FileDiff is one changed file between two trees.
type FileDiff struct {
	Path    string       `json:"path"`
	Op      vfs.ChangeOp `json:"op"` // added, modified, deleted
	OldHash cas.Hash     `json:"oldHash,omitzero"`
	NewHash cas.Hash     `json:"newHash,omitzero"`
	OldSize int64        `json:"oldSize"`
	NewSize int64        `json:"newSize"`
	// Unified is a unified diff for text files (both sides valid UTF-8
	// without NUL, each at most MaxDiffBytes), with git's headers
	// ("--- a/PATH", "+++ b/PATH", /dev/null for the missing side of an
	// added or deleted file, a tab after a PATH that holds a space); empty
	// for binary or large files.
	Unified string `json:"unified,omitempty"`
	Binary  bool   `json:"binary,omitempty"`
	// TooLarge says a side is past MaxDiffBytes: no text is rendered.
	TooLarge bool `json:"tooLarge,omitempty"`
	// Truncated says the response limit (DiffOptions.MaxBytes) cut this
	// file's text: OmittedHunks hunks were left out of Unified, or, when
	// OmittedHunks is 0, the whole text was (the limit was reached by the
	// files before it).
	Truncated    bool `json:"truncated,omitempty"`
	OmittedHunks int  `json:"omittedHunks,omitempty"`
}

// MaxDiffBytes is the largest file side Diff renders as text.
const MaxDiffBytes = 1 << 20

// DefaultDiffMaxBytes is the response limit on the unified text of one
// Diff when DiffOptions.MaxBytes is 0.
const DefaultDiffMaxBytes = 8 << 20

// DiffOptions say what Diff renders; the zero value lists changes without
// text.
type DiffOptions struct {
	// Text renders unified diffs of text files.
	Text bool
	// MaxBytes caps the unified text of the whole response, so a huge
	// diff costs a bounded answer; 0 means DefaultDiffMaxBytes. Hunks and
	// files past it are left out and marked with FileDiff.Truncated.
	MaxBytes int
}

// Diff returns the file changes from tree a to tree b, skipping equal
// subtrees by hash, with unified diffs of text files when opts.Text is
// set. It holds every change: DiffPage and DiffFunc answer a diff of any
// size in bounded memory. It fails with workspace.invalid_argument for a
// negative MaxBytes, and with the errors of reading the trees and blobs.
func (s *Store) Diff(ctx context.Context, a, b cas.Hash, opts DiffOptions) ([]FileDiff, error) {
	out, _, err := s.DiffPage(ctx, a, b, opts, vfs.ListPage{})
	return out, err
}

// DiffPage returns one page of Diff's files: those whose paths come after
// page.After (segment by segment), at most page.Limit of them (0: all),
// and whether files remain after it; opts.MaxBytes caps the page's text.
// Subtrees wholly before After are passed over unread.
func (s *Store) DiffPage(ctx context.Context, a, b cas.Hash, opts DiffOptions, page vfs.ListPage) ([]FileDiff, bool, error) {
	budget, err := opts.budget()
	if err != nil {
		return nil, false, err
	}
	changes, more, err := s.trees.DiffPage(ctx, nil, a, b, page)
	if err != nil {
		return nil, false, err
	}
	out := make([]FileDiff, 0, len(changes))
	for _, c := range changes {
		d, err := s.fileDiff(ctx, c, opts.Text, &budget)
		if err != nil {
			return nil, false, err
		}
		out = append(out, d)
	}
	return out, more, nil
}

// DiffFunc calls fn with each of Diff's files whose path comes after
// after (the zero Path: every file), in path order, holding none of them;
// opts.MaxBytes caps the text of all the files it passes. fn returning
// fs.SkipAll ends the diff, and DiffFunc returns nil; any other error
// from fn ends it and is returned.
func (s *Store) DiffFunc(ctx context.Context, a, b cas.Hash, opts DiffOptions, after vfs.Path, fn func(FileDiff) error) error {
	budget, err := opts.budget()
	if err != nil {
		return err
	}
	return s.trees.DiffFunc(ctx, nil, a, b, after, func(c vfs.Change) error {
		d, err := s.fileDiff(ctx, c, opts.Text, &budget)
		if err != nil {
			return err
		}
		return fn(d)
	})
}

// budget returns the text a diff may render.
func (o DiffOptions) budget() (int, error) {
	if o.MaxBytes < 0 {
		return 0, wserr.New(wserr.InvalidArgument, "diff", "", "the response limit %d is negative", o.MaxBytes)
	}
	if o.MaxBytes == 0 {
		return DefaultDiffMaxBytes, nil
	}
	return o.MaxBytes, nil
}

// fileDiff is change c as a FileDiff, its text rendered within *budget
// when text is set.
func (s *Store) fileDiff(ctx context.Context, c vfs.Change, text bool, budget *int) (FileDiff, error) {
	d := FileDiff{Path: c.Path.String(), Op: c.Op, OldHash: c.Old.Hash, NewHash: c.New.Hash, OldSize: c.Old.Size, NewSize: c.New.Size}
	if text {
		if err := s.renderText(ctx, &d, budget); err != nil {
			return FileDiff{}, err
		}
	}
	return d, nil
}

// renderText fills d's text within *budget bytes and takes what it used.
func (s *Store) renderText(ctx context.Context, d *FileDiff, budget *int) error {
	if d.OldSize > MaxDiffBytes || d.NewSize > MaxDiffBytes {
		d.TooLarge = true
		return nil
	}
	if *budget <= 0 {
		d.Truncated = d.OldSize+d.NewSize > 0
		return nil
	}
	read := func(h cas.Hash) ([]byte, error) {
		if h.IsZero() {
			return nil, nil
		}
		return s.blobs.ReadAll(ctx, h)
	}
	ob, err := read(d.OldHash)
	if err != nil {
		return err
	}
	nb, err := read(d.NewHash)
	if err != nil {
		return err
	}
	if !isText(ob) || !isText(nb) {
		d.Binary = true
		return nil
	}
	// git's headers: /dev/null names the missing side of an added or
	// deleted file, and the budget counts the text as it is sent.
	oldName, newName := "a/"+d.Path, "b/"+d.Path
	switch d.Op {
	case vfs.Added:
		oldName = "/dev/null"
	case vfs.Deleted:
		newName = "/dev/null"
	}
	text, omitted := unified(oldName, newName, string(ob), string(nb), *budget)
	switch {
	case len(text) > *budget || omitted > 0 && !strings.Contains(text, "\n@@"):
		// Not even its first hunk fits, or not even its headers: no
		// text at all.
		d.Truncated, d.OmittedHunks = true, omitted
		*budget = 0
	case omitted > 0:
		d.Truncated, d.OmittedHunks = true, omitted
		d.Unified = text
		*budget = 0
	default:
		d.Unified = text
		*budget -= len(text)
	}
	return nil
}

func isText(b []byte) bool {
	for _, c := range b {
		if c == 0 {
			return false
		}
	}
	return utf8.Valid(b)
}
