package remote

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/wsstore/wsstore/cas"
)

// Bounds of an index as a push writes it (docs/remote.md, "Limits"). An
// index read from the object store past them is damaged, read no
// further, so a damaged or hostile index object, or a pack's end, never
// makes a reader hold more than one entry of bounded size.
const (
	// maxEntryChunks is the longest chunk list a push writes in one
	// entry; it refuses a blob of more chunks (pushGroup). Each chunk
	// but the last holds at least 128 KiB, so this is a file of at least
	// 8 GiB, about 40 GiB of ordinary content.
	maxEntryChunks = 1 << 16
	// maxIndexChunks is the most chunks the entries of one index list
	// in all: a push starts another index object past it.
	maxIndexChunks = 1 << 18
	// maxChunkedGroup is the most chunked blobs one index lists.
	maxChunkedGroup = 1000
	// entryBytes bounds what an entry holds besides its chunk list (three
	// hashes and five numbers as JSON), and any one token of an index;
	// chunkRefBytes is the most one chunk of a list takes, its comma
	// included: {"hash":"…","off":…}.
	entryBytes    = 1 << 10
	chunkRefBytes = 102
	// maxIndexBytes is the longest index a push writes: one of a pack,
	// or of chunked blobs' lists.
	maxIndexBytes = entryBytes + max(maxPackObjects*entryBytes, maxChunkedGroup*entryBytes+maxIndexChunks*chunkRefBytes)
	// memIndex is the longest index read into memory; a longer one is
	// kept in a temporary file while it is gone over.
	memIndex = 64 << 10
)

// storedIndex is an index read from the object store, every entry of it
// checked, kept (in memory when short, in a temporary file when not) so
// that its entries are gone over again one at a time. Close it when done.
type storedIndex struct {
	Pack   string // the pack it lists (for a pack's own copy, set by its reader)
	Device string
	Pushed int64
	mem    []byte
	sp     *Spool
}

// Close removes the temporary file, if any.
func (x *storedIndex) Close() {
	if x != nil {
		x.sp.Close()
	}
}

// each calls fn with each entry in order, its Codec filled in.
func (x *storedIndex) each(fn func(e entry) error) error {
	_, err := x.scan(fn)
	var rf readFailure
	if errors.As(err, &rf) {
		return rf.err
	}
	return err
}

// scan goes over the index with scanIndex.
func (x *storedIndex) scan(fn func(e entry) error) (packIndex, error) {
	if x.sp == nil {
		return scanIndex(bytes.NewReader(x.mem), fn)
	}
	r, err := x.sp.Reader()
	if err != nil {
		return packIndex{}, readFailure{err}
	}
	return scanIndex(bufio.NewReaderSize(r, 64<<10), fn)
}

// loadIndex reads the index r gives: an index object at key, which must
// hash to its key (object), or the copy a pack at key ends with. It reads
// at most maxIndexBytes and checks every entry before it returns, so a
// damaged index (store.corrupt) is found before any of it is used. A
// failure to read r, or to keep the index, is returned as it is.
func loadIndex(r io.Reader, key string, object bool) (*storedIndex, error) {
	what := "index object"
	if !object {
		what = "the index the pack ends with"
	}
	var sum *cas.Hasher
	if object {
		sum = cas.NewHasher()
		defer sum.Release()
		r = io.TeeReader(r, sum)
	}
	lr := &io.LimitedReader{R: r, N: maxIndexBytes + 1}
	x := &storedIndex{}
	mem, err := io.ReadAll(io.LimitReader(lr, memIndex+1))
	if err != nil {
		return nil, err
	}
	if len(mem) <= memIndex {
		x.mem = mem
	} else {
		if x.sp, err = newSpool("read index", "wsstore-index-*"); err != nil {
			return nil, err
		}
		if _, err = x.sp.Write(mem); err == nil {
			_, err = io.Copy(x.sp, lr)
		}
		if err != nil {
			x.Close()
			return nil, err
		}
	}
	if lr.N == 0 {
		x.Close()
		return nil, corrupt(key, fmt.Sprintf("%s longer than any a push writes (%d bytes)", what, maxIndexBytes))
	}
	if object && indexKey(sum.Sum()) != key {
		x.Close()
		return nil, corrupt(key, "index object does not hash to its key")
	}
	head, err := x.scan(nil)
	var rf readFailure
	switch {
	case errors.As(err, &rf):
		x.Close()
		return nil, rf.err
	case err != nil:
		x.Close()
		return nil, corrupt(key, fmt.Sprintf("%s: %v", what, err))
	case head.Version != indexVersion:
		x.Close()
		return nil, corrupt(key, fmt.Sprintf("index version %d (want %d)", head.Version, indexVersion))
	}
	x.Pack, x.Device, x.Pushed = head.Pack, head.Device, head.Pushed
	return x, nil
}

// errTooLong ends the reading of a token longer than any an index holds.
var errTooLong = errors.New("a value longer than any an index holds")

// readFailure is a failure to read an index's bytes (a temporary file),
// told from what is wrong with the bytes: a damaged index.
type readFailure struct{ err error }

func (f readFailure) Error() string { return f.err.Error() }

// capReader reads from r up to max bytes in all, then fails with
// errTooLong: it holds a json.Decoder's buffer to one token. A failure of
// r is a readFailure.
type capReader struct {
	r      io.Reader
	n, max int64
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.n >= c.max {
		return 0, errTooLong
	}
	if int64(len(p)) > c.max-c.n {
		p = p[:c.max-c.n]
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	if err != nil && err != io.EOF {
		err = readFailure{err}
	}
	return n, err
}

// indexDecoder decodes an index a token at a time, each at most
// entryBytes long.
type indexDecoder struct {
	cr  *capReader
	dec *json.Decoder
}

// more reports whether the object or list at hand goes on.
func (d *indexDecoder) more() bool {
	d.cr.max = d.dec.InputOffset() + entryBytes
	return d.dec.More()
}

func (d *indexDecoder) token() (json.Token, error) {
	d.cr.max = d.dec.InputOffset() + entryBytes
	return d.dec.Token()
}

func (d *indexDecoder) value(v any) error {
	d.cr.max = d.dec.InputOffset() + entryBytes
	return d.dec.Decode(v)
}

func (d *indexDecoder) delim(want json.Delim) error {
	t, err := d.token()
	if err == nil && t != want {
		err = fmt.Errorf("%v where %v belongs", t, want)
	}
	return err
}

// scanIndex decodes the index r gives, calling fn (if not nil) with each
// entry as it goes, checked, and returns its other fields (Objects nil).
// What it holds is one entry and a token: an entry of more than
// maxEntryChunks chunks, or a token longer than entryBytes, is an error
// as a malformed index is. Keys match as json.Unmarshal matches them.
func scanIndex(r io.Reader, fn func(e entry) error) (packIndex, error) {
	cr := &capReader{r: r}
	d := &indexDecoder{cr: cr, dec: json.NewDecoder(cr)}
	var idx packIndex
	listed := false
	err := d.object(func(key string) (any, error) {
		switch key {
		case "objects":
			if listed {
				return nil, errors.New("two lists of objects")
			}
			listed = true
			return nil, d.entries(fn)
		case "version":
			return &idx.Version, nil
		case "pack":
			return &idx.Pack, nil
		case "device":
			return &idx.Device, nil
		case "pushed":
			return &idx.Pushed, nil
		}
		return &json.RawMessage{}, nil
	})
	if err != nil {
		return idx, err
	}
	if _, err := d.token(); err != io.EOF {
		return idx, errors.New("more after the index")
	}
	return idx, nil
}

// entries decodes the list of objects (or null), calling fn with each.
func (d *indexDecoder) entries(fn func(e entry) error) error {
	t, err := d.token()
	if err != nil || t == nil {
		return err
	}
	if t != json.Delim('[') {
		return fmt.Errorf("objects %v, not a list", t)
	}
	for d.more() {
		e, err := d.entry()
		if err != nil {
			return err
		}
		if err := e.check(); err != nil {
			return err
		}
		if fn != nil {
			if err := fn(e); err != nil {
				return err
			}
		}
	}
	return d.delim(']')
}

// entry decodes one entry, its chunk list a chunk at a time.
func (d *indexDecoder) entry() (entry, error) {
	var e entry
	listed := false
	err := d.object(func(key string) (any, error) {
		switch key {
		case "chunks":
			if listed {
				return nil, errors.New("two chunk lists")
			}
			listed = true
			return nil, d.chunks(&e)
		case "kind":
			return &e.Kind, nil
		case "hash":
			return &e.Hash, nil
		case "size":
			return &e.Size, nil
		case "codec":
			return &e.CodecN, nil
		case "base":
			return &e.Base, nil
		case "off":
			return &e.Off, nil
		case "len":
			return &e.Len, nil
		case "sum":
			return &e.Sum, nil
		}
		return &json.RawMessage{}, nil
	})
	return e, err
}

// object decodes a JSON object a member at a time: field, given each key
// as json.Unmarshal matches keys (lower case), returns where its value
// goes, or nil once it has decoded the value itself (a list, a token at a
// time); a key it does not know goes to a json.RawMessage.
func (d *indexDecoder) object(field func(key string) (any, error)) error {
	if err := d.delim('{'); err != nil {
		return err
	}
	for d.more() {
		t, err := d.token()
		if err != nil {
			return err
		}
		k, _ := t.(string)
		v, err := field(strings.ToLower(k))
		if err != nil {
			return err
		}
		if v == nil {
			continue
		}
		if err := d.value(v); err != nil {
			return err
		}
	}
	return d.delim('}')
}

// chunks decodes an entry's chunk list (or null), refusing one longer
// than maxEntryChunks.
func (d *indexDecoder) chunks(e *entry) error {
	t, err := d.token()
	if err != nil || t == nil {
		return err
	}
	if t != json.Delim('[') {
		return fmt.Errorf("chunks %v, not a list", t)
	}
	for d.more() {
		if len(e.Chunks) == maxEntryChunks {
			return fmt.Errorf("object %s of more than %d chunks", e.Hash.Short(), maxEntryChunks)
		}
		var c chunkRef
		if err := d.value(&c); err != nil {
			return err
		}
		e.Chunks = append(e.Chunks, c)
	}
	return d.delim(']')
}
