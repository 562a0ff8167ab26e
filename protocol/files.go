package protocol

import (
	"encoding/base64"
	"strings"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/checkpoint"
	"github.com/wsstore/wsstore/vfs"
)

// FileContent is a file as a host sees it in JSON: text as content,
// anything else as contentBase64.
type FileContent struct {
	Path          string   `json:"path"`
	Hash          cas.Hash `json:"hash"`
	Size          int64    `json:"size"`
	Content       *string  `json:"content,omitempty"`
	ContentBase64 *string  `json:"contentBase64,omitempty"`
}

// NewFileContent returns b, the content of p with hash h, as a host sees
// it.
func NewFileContent(p vfs.Path, h cas.Hash, b []byte) FileContent {
	fc := FileContent{Path: p.String(), Hash: h, Size: int64(len(b))}
	if vfs.IsText(b) {
		s := string(b)
		fc.Content = &s
	} else {
		s := base64.StdEncoding.EncodeToString(b)
		fc.ContentBase64 = &s
	}
	return fc
}

// GitHeaders returns diffs with git's file headers: /dev/null stands for
// the missing side of an added or deleted file ("--- /dev/null" where the
// store writes "--- a/PATH"). Every way in (wsctl diff, the diff op)
// shows diffs through it, so a host sees the same text either way.
func GitHeaders(diffs []checkpoint.FileDiff) []checkpoint.FileDiff {
	out := make([]checkpoint.FileDiff, len(diffs))
	for i, d := range diffs {
		switch d.Op {
		case vfs.Added:
			d.Unified = strings.Replace(d.Unified, "--- a/"+d.Path+"\n", "--- /dev/null\n", 1)
		case vfs.Deleted:
			d.Unified = strings.Replace(d.Unified, "+++ b/"+d.Path+"\n", "+++ /dev/null\n", 1)
		}
		out[i] = d
	}
	return out
}
