package checkpoint

import (
	"context"
	"unicode/utf8"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/vfs"
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
	// without NUL, each under MaxDiffBytes); empty for binary or large
	// files.
	Unified string `json:"unified,omitempty"`
	Binary  bool   `json:"binary,omitempty"`
}

// MaxDiffBytes is the largest file side Diff renders as text.
const MaxDiffBytes = 1 << 20

// Diff returns the file changes from tree a to tree b, skipping equal
// subtrees by hash, with unified diffs of text files when text is true.
func (s *Store) Diff(ctx context.Context, a, b cas.Hash, text bool) ([]FileDiff, error) {
	changes, err := s.trees.Diff(ctx, nil, a, b)
	if err != nil {
		return nil, err
	}
	out := make([]FileDiff, 0, len(changes))
	for _, c := range changes {
		d := FileDiff{Path: c.Path.String(), Op: c.Op, OldHash: c.Old.Hash, NewHash: c.New.Hash, OldSize: c.Old.Size, NewSize: c.New.Size}
		if text {
			if err := s.renderText(ctx, &d); err != nil {
				return nil, err
			}
		}
		out = append(out, d)
	}
	return out, nil
}

func (s *Store) renderText(ctx context.Context, d *FileDiff) error {
	if d.OldSize > MaxDiffBytes || d.NewSize > MaxDiffBytes {
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
	d.Unified = Unified(d.Path, string(ob), string(nb))
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
