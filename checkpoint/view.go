package checkpoint

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"math"
	"time"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/vfs"
)

// FileRef is one file of a checkpoint view.
type FileRef struct {
	Path  string   `json:"path"`
	Hash  cas.Hash `json:"hash"` // BLAKE3-256 of the content
	Bytes int64    `json:"bytes"`
}

// View is a checkpoint's checkpoint.json (id, seq, runId, createdAt,
// reason, eventSeq, files with hash and bytes), derived from the checkpoint's
// row and tree: nothing but the row is stored per checkpoint.
type View struct {
	ID        string    `json:"id"`
	Seq       int64     `json:"seq"`
	RunID     string    `json:"runId"`
	CreatedAt time.Time `json:"createdAt"`
	Reason    string    `json:"reason"`
	EventSeq  int64     `json:"eventSeq"`
	Parent    string    `json:"parent,omitempty"`
	Root      cas.Hash  `json:"root"`
	Files     []FileRef `json:"files"`
}

// View returns the checkpoint.json view of checkpoint seq: every file of
// its tree with hash and size, sorted by path, held whole (ViewPage reads
// it a page at a time). It fails with checkpoint.not_found.
func (s *Store) View(ctx context.Context, runID string, seq int64) (View, error) {
	v, _, err := s.ViewPage(ctx, runID, seq, vfs.ListPage{})
	return v, err
}

// ViewPage returns one page of checkpoint seq's view: the files that come
// after page.After in the view's order, at most page.Limit of them (0: no
// limit), and whether files remain after them. A page reads the trees its
// files lie in and those on the way to After, not the files before it.
// It fails with checkpoint.not_found.
func (s *Store) ViewPage(ctx context.Context, runID string, seq int64, page vfs.ListPage) (View, bool, error) {
	if err := page.Check("checkpoint view", vfs.Root()); err != nil {
		return View{}, false, err
	}
	cp, err := s.Get(ctx, nil, runID, seq)
	if err != nil {
		return View{}, false, err
	}
	v := ViewOf(cp)
	v.Files = []FileRef{}
	more := false
	err = s.trees.ListFunc(ctx, nil, cp.Root, vfs.Root(), allLevels, page.After, func(l vfs.Listed) error {
		if l.Kind != vfs.KindFile {
			return nil
		}
		if page.Limit > 0 && len(v.Files) == page.Limit {
			more = true
			return fs.SkipAll
		}
		v.Files = append(v.Files, FileRef{Path: l.Path.String(), Hash: l.Hash, Bytes: l.Size})
		return nil
	})
	if err != nil {
		return View{}, false, err
	}
	return v, more, nil
}

// allLevels is a listing depth no tree reaches (a path is at most
// vfs.MaxPathLen bytes).
const allLevels = math.MaxInt

// ViewOf is cp's view without its files (WriteJSON takes them apart).
func ViewOf(cp Checkpoint) View {
	return View{ID: cp.ID, Seq: cp.Seq, RunID: cp.RunID, CreatedAt: cp.CreatedAt, Reason: cp.Reason,
		EventSeq: cp.EventSeq, Parent: cp.Parent, Root: cp.Root}
}

// Walker walks a tree, as *vfs.Trees does.
type Walker interface {
	Walk(ctx context.Context, tx *index.Tx, root cas.Hash, fn func(p vfs.Path, e vfs.Entry) error) error
}

// FilesOf returns the files of the tree root as a view lists them, in
// path order, for View and WriteJSON: each call walks the tree (in tx,
// or through the read pool for nil).
func FilesOf(ctx context.Context, w Walker, tx *index.Tx, root cas.Hash) func(fn func(FileRef) error) error {
	return func(fn func(FileRef) error) error {
		return w.Walk(ctx, tx, root, func(p vfs.Path, e vfs.Entry) error {
			if e.Kind != vfs.KindFile {
				return nil
			}
			return fn(FileRef{Path: p.String(), Hash: e.Hash, Bytes: e.Size})
		})
	}
}

// WriteJSON writes v as its checkpoint.json to w, with the files files
// gives (v.Files is left out) in place of a list held whole: the bytes of
// json.MarshalIndent(v, "", "  ") and a newline, written as the files
// come, so a checkpoint of any size is written in bounded memory. The
// error is files', w's or ctx's.
func WriteJSON(ctx context.Context, w io.Writer, v View, files func(fn func(FileRef) error) error) error {
	bw := bufio.NewWriterSize(w, 32<<10)
	if err := writeView(ctx, bw, v, files, "", true); err != nil {
		return err
	}
	bw.WriteString("\n")
	return bw.Flush()
}

// WriteJSONElement writes v as WriteJSON does, as an element of a JSON
// array whose elements are indented by prefix, with HTML characters left
// unescaped and no newline after it: the bytes a json.Encoder set to
// SetIndent(prefix, "  ") and SetEscapeHTML(false) gives for v there.
// When files or ctx fails once the element has begun, the element is
// still ended, its files cut short, before the error is returned, so
// what was written stays JSON the caller can end.
func WriteJSONElement(ctx context.Context, w io.Writer, v View, files func(fn func(FileRef) error) error, prefix string) error {
	return writeView(ctx, w, v, files, prefix, false)
}

// writeView writes v indented by prefix, its files as files gives them,
// without a final newline.
func writeView(ctx context.Context, w io.Writer, v View, files func(fn func(FileRef) error) error, prefix string, escapeHTML bool) error {
	encode := func(x any, prefix string) ([]byte, error) {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(escapeHTML)
		enc.SetIndent(prefix, "  ")
		if err := enc.Encode(x); err != nil {
			return nil, fmt.Errorf("checkpoint.json: %w", err)
		}
		return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
	}
	v.Files = []FileRef{}
	head, err := encode(v, prefix)
	if err != nil {
		return err
	}
	// head ends with the empty list: `"files": []` and the closing brace.
	emptyTail := "[]\n" + prefix + "}"
	if !bytes.HasSuffix(head, []byte(emptyTail)) {
		return fmt.Errorf("checkpoint.json: unexpected encoding of %q", head[max(0, len(head)-16):])
	}
	if _, err := w.Write(head[:len(head)-len(emptyTail)]); err != nil {
		return err
	}
	fileIndent := prefix + "    "
	n := 0
	err = files(func(f FileRef) error {
		if n%256 == 0 {
			if err := ctx.Err(); err != nil {
				return index.Translate(err)
			}
		}
		b, err := encode(f, fileIndent)
		if err != nil {
			return err
		}
		sep := ",\n" + fileIndent
		if n == 0 {
			sep = "[\n" + fileIndent
		}
		n++
		if _, err := io.WriteString(w, sep); err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	})
	tail := emptyTail
	if n > 0 {
		tail = "\n" + prefix + "  ]\n" + prefix + "}"
	}
	if _, werr := io.WriteString(w, tail); err == nil {
		err = werr
	}
	return err
}
