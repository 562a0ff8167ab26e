package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"lukechampine.com/blake3"
)

// dirTree is a workspace kept as a plain directory, as the baselines keep
// it: ops become ordinary file-system calls.
type dirTree struct{ root string }

func (d dirTree) file(p string) string { return filepath.Join(d.root, filepath.FromSlash(p)) }

// apply performs op on the directory. A patch whose old text does not
// occur exactly once fails, as it does in wsstore, so a generator bug shows
// in every system.
func (d dirTree) apply(op Op) error {
	name := d.file(op.Path)
	switch op.Kind {
	case OpWrite:
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			return err
		}
		if op.Src == nil {
			return os.WriteFile(name, op.Data, 0o644)
		}
		return writeStream(name, op.Src.Open())
	case OpAppend:
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			return err
		}
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return err
		}
		if _, err := f.Write(op.Data); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	case OpPatch:
		b, err := os.ReadFile(name)
		if err != nil {
			return err
		}
		if n := bytes.Count(b, []byte(op.Old)); n != 1 {
			return fmt.Errorf("patch %s: old text occurs %d times", op.Path, n)
		}
		return os.WriteFile(name, bytes.Replace(b, []byte(op.Old), []byte(op.New), 1), 0o644)
	case OpSplice:
		return spliceFile(name, op.Edits)
	case OpDelete:
		return os.Remove(name)
	case OpBatch:
		for _, w := range op.Batch {
			if err := d.apply(w); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("dir tree: cannot apply %s", op.Kind)
}

func writeStream(name string, r io.Reader) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// spliceFile applies edits to a file the way an editor would: in-place
// overwrites are written where they fall; if any edit changes the length,
// the file is rewritten through a temporary file and renamed over.
func spliceFile(name string, edits []Edit) error {
	inPlace := !slices.ContainsFunc(edits, func(e Edit) bool { return e.Del != int64(len(e.Ins)) })
	if inPlace {
		f, err := os.OpenFile(name, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		for _, e := range edits {
			if _, err := f.WriteAt(e.Ins, e.Off); err != nil {
				f.Close()
				return err
			}
		}
		return f.Close()
	}
	in, err := os.Open(name)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := name + ".splice"
	if err := writeStream(tmp, newSpliceReader(in, edits)); err != nil {
		return err
	}
	return os.Rename(tmp, name)
}

// spliceReader streams src with edits applied.
type spliceReader struct {
	src   io.Reader
	edits []Edit
	pos   int64  // offset in src
	ins   []byte // inserted bytes not yet returned
}

func newSpliceReader(src io.Reader, edits []Edit) *spliceReader {
	return &spliceReader{src: src, edits: edits}
}

func (r *spliceReader) Read(p []byte) (int, error) {
	for {
		if len(r.ins) > 0 {
			n := copy(p, r.ins)
			r.ins = r.ins[n:]
			return n, nil
		}
		if len(r.edits) == 0 || r.edits[0].Off > r.pos {
			break
		}
		e := r.edits[0]
		r.edits = r.edits[1:]
		if _, err := io.CopyN(io.Discard, r.src, e.Del); err != nil {
			return 0, fmt.Errorf("splice at %d: %w", e.Off, err)
		}
		r.pos += e.Del
		r.ins = e.Ins
	}
	if len(r.edits) > 0 {
		p = p[:min(int64(len(p)), r.edits[0].Off-r.pos)]
	}
	n, err := r.src.Read(p)
	r.pos += int64(n)
	if err == io.EOF && len(r.edits) > 0 {
		err = fmt.Errorf("splice at %d: %w", r.edits[0].Off, io.ErrUnexpectedEOF)
	}
	return n, err
}

// sums reads every regular file below the root and returns its BLAKE3
// hash by workspace path.
func (d dirTree) sums() (map[string][32]byte, int64, error) {
	out := map[string][32]byte{}
	var total int64
	err := filepath.WalkDir(d.root, func(name string, de fs.DirEntry, err error) error {
		if err != nil || de.IsDir() {
			return err
		}
		rel, err := filepath.Rel(d.root, name)
		if err != nil {
			return err
		}
		sum, n, err := hashFile(name)
		if err != nil {
			return err
		}
		out[filepath.ToSlash(rel)] = sum
		total += n
		return nil
	})
	return out, total, err
}

func hashFile(name string) ([32]byte, int64, error) {
	f, err := os.Open(name)
	if err != nil {
		return [32]byte{}, 0, err
	}
	defer f.Close()
	return hashReader(f)
}

func hashReader(r io.Reader) ([32]byte, int64, error) {
	h := blake3.New(32, nil)
	n, err := io.Copy(h, r)
	var sum [32]byte
	h.Sum(sum[:0])
	return sum, n, err
}

// compareSums fails if got and want differ in any path or hash, naming the
// first few differences.
func compareSums(want, got map[string][32]byte) error {
	var diffs []string
	for p, w := range want {
		g, ok := got[p]
		switch {
		case !ok:
			diffs = append(diffs, "missing "+p)
		case g != w:
			diffs = append(diffs, "content differs: "+p)
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			diffs = append(diffs, "unexpected "+p)
		}
	}
	if len(diffs) == 0 {
		return nil
	}
	slices.Sort(diffs)
	if len(diffs) > 5 {
		diffs = append(diffs[:5], fmt.Sprintf("and %d more", len(diffs)-5))
	}
	return errors.New("verify: " + strings.Join(diffs, "; "))
}

// copyTree copies the directory src to dst, which must not exist. Files
// are copied with io.Copy, which uses copy_file_range on Linux.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(name string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, name)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if de.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		return copyFile(name, target)
	})
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// diskUsage returns the apparent size (sum of file lengths) and the
// allocated size (blocks) of everything below root.
func diskUsage(root string) (apparent, allocated int64, err error) {
	err = filepath.WalkDir(root, func(name string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := de.Info()
		if err != nil {
			return err
		}
		if !de.IsDir() {
			apparent += fi.Size()
		}
		allocated += allocatedBytes(fi)
		return nil
	})
	return apparent, allocated, err
}
