package protocol

import (
	"encoding/base64"

	"github.com/wsstore/wsstore/cas"
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
