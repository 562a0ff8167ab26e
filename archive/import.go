package archive

import (
	"archive/tar"
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"lukechampine.com/blake3"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// treeBatch is how many trees one write transaction of an import stores,
// and treeBatchBytes how many bytes of encoded trees: a batch ends at
// whichever comes first, so the decoded entries it holds stay bounded
// (a small multiple of its encoded bytes) however wide the directories are.
// Tests lower them.
var (
	treeBatch      = 256
	treeBatchBytes = 4 << 20
)

// corrupt is the error of an archive that fails verification.
func corrupt(format string, args ...any) error {
	return wserr.New(wserr.ArchiveCorrupt, "import", "", format, args...)
}

// reading wraps an error of the archive's reader: a short or malformed tar
// stream is a corrupt archive; ctx ending is store.canceled.
func reading(ctx context.Context, what string, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return index.Translate(cerr)
	}
	var we *wserr.Error
	if errors.As(err, &we) {
		return err
	}
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return wserr.Wrap(wserr.ArchiveCorrupt, "import", "", fmt.Errorf("%s: %w", what, err))
}

// importer is the state of one import: what the manifest promised and what
// has verified so far.
type importer struct {
	a     *Archiver
	opt   Options
	src   io.Reader // the archive, below tr
	tr    *tar.Reader
	d     *digest
	m     Manifest
	sets  *index.Spill
	blobs *index.SpillMap // promised blobs and their sizes
	trees *index.SpillMap // promised trees
	gotB  *index.SpillMap // verified blobs and their sizes
	gotT  *index.SpillMap // verified trees and the bytes of files below them
	// reused are blobs the store had, not yet touched (touchReused),
	// since reusedSince.
	reused      []cas.Hash
	reusedSince time.Time
	sum         Summary
	hdr         *tar.Header // the entry read ahead, nil at the end
	// chats, runIDs and actors are the ids the manifest lists, each 0
	// until its row arrives, then 1: in memory up to spillAfter, then on
	// disk, so an archive of any number of runs holds a bounded set.
	chats  idSet
	runIDs idSet
	actors idSet
	// keepIDs also keeps the manifest's ids in m's lists (ReadManifest).
	keepIDs   bool
	merge     mergeState
	mergeRows *index.Spill // the rows merges keep (merge.go), nil until one does
	lin       *lineage     // the added run whose versions are being queued
	// capAt is the stored bytes the store's cap allows, as room measured
	// it before anything was written (0: no cap is checked).
	capAt int64
}

// Import reads the archive r front to back and adds what it holds to the
// store. Every blob is verified against its address as it streams into the
// content store, every tree against its own and its entries against what
// came before it, every row against the trees it names, and the whole
// against the end entry's digest; the rows are written in one transaction
// that commits only after all of that passed. So a truncated or tampered
// archive (archive.corrupt) or one of another version
// (archive.unsupported_version) leaves no visible row; the blobs and trees
// it stored before the damage showed are unreferenced and gc collects them.
//
// Every file version an added run's checkpoints replace is queued for
// re-encoding as a delta against the version that replaced it, in the
// archive's order, as the writes that made them queued it in the source
// store (versions.go): once the store's background step or Close has run
// the jobs, the histories take about what they take there.
//
// Import is idempotent: what the store has already (a blob, a tree, a chat
// with the same persist state, a run or actor space with the same row) is
// kept and counted Unchanged. A run or actor space that exists with other
// content, or a chat whose persist state differs, is left as it is and
// listed in Summary.Conflicts; the rest is imported. A failed write is the
// store's error.
func (a *Archiver) Import(ctx context.Context, r io.Reader, opt Options) (Summary, error) {
	if r == nil {
		return Summary{}, wserr.New(wserr.InvalidArgument, "import", "", "nil reader")
	}
	start := a.p.Now()
	if h, ok := a.p.Blobs.(Holder); ok {
		// The blobs and trees commit before the rows that reference them.
		defer h.Hold()()
	}
	cr := &countingReader{r: r}
	im := newImporter(ctx, cr)
	defer im.close()
	im.a, im.opt = a, opt
	if err := im.manifest(ctx, nil); err != nil {
		return Summary{}, err
	}
	if err := im.room(ctx); err != nil {
		return Summary{}, err
	}
	if err := im.readBlobs(ctx); err != nil {
		return Summary{}, err
	}
	if err := im.readTrees(ctx); err != nil {
		return Summary{}, err
	}
	if err := a.p.DB.Update(ctx, func(tx *index.Tx) error {
		if err := im.stillStored(ctx, tx); err != nil {
			return err
		}
		if err := im.records(ctx, tx); err != nil {
			return err
		}
		return im.roomAfter(ctx, tx)
	}); err != nil {
		return Summary{}, err
	}
	im.sum.ArchiveBytes = cr.n
	im.sum.Seconds = a.p.Now().Sub(start).Seconds()
	if im.sum.Added == nil {
		im.sum.Added = []string{}
	}
	if im.sum.Unchanged == nil {
		im.sum.Unchanged = []string{}
	}
	if im.sum.Conflicts == nil {
		im.sum.Conflicts = []Conflict{}
	}
	return im.sum, nil
}

// close deletes what the import's sets moved to disk.
func (im *importer) close() {
	im.sets.Close()
	if im.mergeRows != nil {
		im.mergeRows.Close()
	}
}

// newImporter returns an importer reading the archive r, its sets empty.
// close it when done.
func newImporter(ctx context.Context, r io.Reader) *importer {
	sets := index.NewSpill(ctx, spillAfter)
	return &importer{src: r, tr: tar.NewReader(r), d: newDigest(),
		sets: sets, blobs: sets.NewMap(), trees: sets.NewMap(), gotB: sets.NewMap(), gotT: sets.NewMap(),
		chats: idSet{sets.NewMap()}, runIDs: idSet{sets.NewMap()}, actors: idSet{sets.NewMap()}}
}

// room refuses, before anything is written, an archive whose blobs the
// store lacks would take it past its cap (Room), counting them as the
// writes do: before compression, so the check errs on the side of
// refusing.
func (im *importer) room(ctx context.Context) error {
	r, ok := im.a.p.Runs.(Room)
	if !ok || im.m.BlobsElsewhere {
		return nil // the blobs must be in the store already
	}
	left, capped, err := r.StoreRoom(ctx)
	if err != nil || !capped {
		return err
	}
	var incoming int64
	err = im.blobs.Each(func(h []byte, size int64) error {
		has, err := im.a.p.Blobs.Has(ctx, cas.Hash(h))
		if !has {
			incoming += size
		}
		return err
	})
	if err != nil {
		return err
	}
	if incoming > left {
		return wserr.StoreFull("import", "", "the archive adds %d bytes of files; the store has %d left under its cap", incoming, left)
	}
	var used int64
	if err := im.a.p.DB.View(ctx, func(tx *index.Tx) error {
		var err error
		used, err = tx.UsedBytes(ctx)
		return err
	}); err != nil {
		return err
	}
	im.capAt = used + left
	return nil
}

// roomAfter refuses, in the records' transaction, an import whose rows
// (events, checkpoints, trees' references, commits), with its files, took
// the store past the cap room measured: nothing of it becomes visible, and
// the files and trees written before are garbage for gc.
func (im *importer) roomAfter(ctx context.Context, tx *index.Tx) error {
	return im.overCap(ctx, tx, "files and rows")
}

// capCheckBytes and capCheckBlobs are how much new content, in bytes or in
// blobs, an import stores between two checks of the cap (overCap): room
// counts the files' bytes only, and the rows of many small files take
// several times those bytes.
const (
	capCheckBytes = 1 << 20
	capCheckBlobs = 256
)

// overCap refuses an import that has taken the store past the cap room
// measured, as tx sees it (nil: the latest commit): checked as its blobs
// and trees are stored, so an archive whose objects do not fit stops near
// the cap, leaving that much for gc rather than the whole archive.
func (im *importer) overCap(ctx context.Context, tx *index.Tx, what string) error {
	if im.capAt <= 0 {
		return nil
	}
	var used int64
	measure := func(tx *index.Tx) error {
		var err error
		used, err = tx.UsedBytes(ctx)
		return err
	}
	var err error
	if tx != nil {
		err = measure(tx)
	} else {
		err = im.a.p.DB.View(ctx, measure)
	}
	if err != nil {
		return err
	}
	if used > im.capAt {
		return wserr.StoreFull("import", "", "the archive's %s take the store to %d bytes, past its cap (%d)", what, used, im.capAt)
	}
	return nil
}

// next reads the next entry's header into im.hdr (nil at the end of the
// stream) and starts its digest. Only regular files are part of the
// format.
func (im *importer) next(ctx context.Context) error {
	hdr, err := im.tr.Next()
	if err == io.EOF {
		im.hdr = nil
		return nil
	}
	if err != nil {
		return reading(ctx, "read entry", err)
	}
	if im.m.Format == "" && hdr.Name != manifestName {
		// Before the manifest: another tar file, whatever its headers say.
		return corrupt("not a wsstore archive: the first entry is not %s", manifestName)
	}
	if hdr.Typeflag != tar.TypeReg || hdr.Size < 0 {
		return corrupt("entry %q is not a regular file", hdr.Name)
	}
	if err := im.checkHeader(hdr); err != nil {
		return err
	}
	im.hdr = hdr
	if hdr.Name != endName {
		im.d.entry(hdr.Name, hdr.Size)
	}
	return nil
}

// checkHeader refuses a header other than export writes (the digest
// covers an entry's name, size and content, not the rest of its header):
// mode 0644, no owner or link, the manifest's creation time (checked for
// the manifest's own entry once it is read), and no PAX record but those
// the time, a long name or a large size need.
func (im *importer) checkHeader(hdr *tar.Header) error {
	if hdr.Mode != 0o644 || hdr.Uid != 0 || hdr.Gid != 0 || hdr.Uname != "" || hdr.Gname != "" || hdr.Linkname != "" {
		return corrupt("entry %q: header fields changed", hdr.Name)
	}
	if !im.m.CreatedAt.IsZero() && !hdr.ModTime.Equal(im.m.CreatedAt) {
		return corrupt("entry %q: header time changed", hdr.Name)
	}
	for k := range hdr.PAXRecords {
		if k != "mtime" && k != "path" && k != "size" {
			return corrupt("entry %q: header record %q changed", hdr.Name, k)
		}
	}
	return nil
}

// body returns the current entry's content as a reader that feeds the
// digest.
func (im *importer) body() io.Reader { return io.TeeReader(im.tr, im.d) }

// whole reads the current entry, refusing one over limit.
func (im *importer) whole(ctx context.Context, limit int64) ([]byte, error) {
	if im.hdr.Size > limit {
		return nil, corrupt("entry %q is %d bytes, over the limit of %d", im.hdr.Name, im.hdr.Size, limit)
	}
	b, err := io.ReadAll(im.body())
	if err != nil {
		return nil, reading(ctx, im.hdr.Name, err)
	}
	if int64(len(b)) != im.hdr.Size {
		return nil, corrupt("entry %q is short", im.hdr.Name)
	}
	return b, nil
}

// manifest reads the manifest entry a value at a time (none of more than
// maxManifestValue bytes) and promises its blobs and trees: they go to the
// importer's sets one at a time, each also to blob when it is not nil.
// White space may follow the manifest's value in the entry; anything else
// after it is corrupt.
func (im *importer) manifest(ctx context.Context, blob func(BlobRef) error) error {
	if err := im.next(ctx); err != nil {
		return err
	}
	if im.hdr == nil || im.hdr.Name != manifestName {
		return corrupt("not a wsstore archive: the first entry is not %s", manifestName)
	}
	body := &countingReader{r: im.body()}
	feed := &valueFeed{r: body}
	dec := json.NewDecoder(feed)
	feed.dec = dec
	dec.DisallowUnknownFields()
	if err := im.parseManifest(dec, blob); err != nil {
		var pe passed
		var se *json.SyntaxError
		switch code := wserr.CodeOf(err); {
		case errors.As(err, &pe):
			return pe.err
		case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || ctx.Err() != nil:
			return reading(ctx, im.hdr.Name, err)
		case code == wserr.ArchiveCorrupt || code == wserr.ArchiveUnsupportedVersion:
			return err
		case errors.As(err, &se):
			return corrupt("not a wsstore archive: unreadable manifest")
		}
		return corrupt("manifest: %v", err) // a value that does not decode
	}
	rest := bufio.NewReader(io.MultiReader(dec.Buffered(), body))
	for {
		c, err := rest.ReadByte()
		if err == io.EOF {
			break
		}
		if err != nil {
			return reading(ctx, im.hdr.Name, err)
		}
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return corrupt("not a wsstore archive: unreadable manifest")
		}
	}
	if body.n != im.hdr.Size {
		return corrupt("entry %q is short", im.hdr.Name)
	}
	if im.m.CreatedAt.IsZero() || !im.hdr.ModTime.Equal(im.m.CreatedAt) {
		return corrupt("entry %q: header time changed", im.hdr.Name)
	}
	return im.next(ctx)
}

// valueFeed feeds the manifest's decoder, refusing to give it more once it
// holds maxManifestValue bytes it has not consumed: one value that large.
type valueFeed struct {
	r   io.Reader
	dec *json.Decoder
	n   int64 // bytes given
}

func (f *valueFeed) Read(b []byte) (int, error) {
	room := maxManifestValue - (f.n - f.dec.InputOffset())
	if room <= 0 {
		return 0, corrupt("manifest: a value of more than %d bytes", int64(maxManifestValue))
	}
	if int64(len(b)) > room {
		b = b[:room]
	}
	n, err := f.r.Read(b)
	f.n += int64(n)
	return n, err
}

// passed is an error parseManifest returns as it is, not as the
// manifest's: the sets' and blob's.
type passed struct{ err error }

func (p passed) Error() string { return p.err.Error() }

// parseManifest reads the manifest's JSON object field by field into
// im.m, and its lists of blobs and trees an element at a time into the
// promised sets. The format and version are checked as soon as they are
// read (the export writes them first), so an archive of another version
// is refused before its lists are read.
func (im *importer) parseManifest(dec *json.Decoder, blob func(BlobRef) error) error {
	if err := delim(dec, '{'); err != nil {
		return err
	}
	m := &im.m
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := t.(string)
		// As encoding/json matches a field: its name, else one that
		// differs in case only.
		if i := slices.IndexFunc(manifestFields, func(f string) bool { return strings.EqualFold(f, key) }); i >= 0 && !slices.Contains(manifestFields, key) {
			key = manifestFields[i]
		}
		if seen[key] {
			return corrupt("manifest: field %q twice", key)
		}
		seen[key] = true
		switch key {
		case "format":
			if err = dec.Decode(&m.Format); err == nil && m.Format != FormatName {
				return corrupt("not a wsstore archive: unreadable manifest")
			}
		case "version":
			if err = dec.Decode(&m.Version); err == nil && m.Version != Version {
				return unsupportedVersion(m.Version)
			}
		case "createdAt":
			err = dec.Decode(&m.CreatedAt)
		case "scope":
			err = dec.Decode(&m.Scope)
		case "chats":
			err = im.listIDs(dec, im.chats, &m.Chats)
		case "runs":
			err = im.listIDs(dec, im.runIDs, &m.Runs)
		case "actors":
			err = im.listIDs(dec, im.actors, &m.Actors)
		case "bytes":
			err = dec.Decode(&m.Bytes)
		case "blobsElsewhere":
			err = dec.Decode(&m.BlobsElsewhere)
		case "blobs":
			err = elements(dec, func() error {
				var br BlobRef
				if err := dec.Decode(&br); err != nil {
					return err
				}
				added, err := im.blobs.Add(br.Hash[:], br.Size)
				if err != nil {
					return passed{err}
				}
				if !added || br.Size < 0 {
					return corrupt("manifest: blob %s listed twice or with a negative size", br.Hash.Short())
				}
				m.BlobCount++
				if blob != nil {
					if err := blob(br); err != nil {
						return passed{err}
					}
				}
				return nil
			})
		case "trees":
			err = elements(dec, func() error {
				var h cas.Hash
				if err := dec.Decode(&h); err != nil {
					return err
				}
				added, err := im.trees.Add(h[:], 0)
				if err != nil {
					return passed{err}
				}
				if !added {
					return corrupt("manifest: tree %s listed twice", h.Short())
				}
				m.TreeCount++
				return nil
			})
		default:
			return corrupt("manifest: json: unknown field %q", key)
		}
		if err != nil {
			return err
		}
	}
	if err := delim(dec, '}'); err != nil {
		return err
	}
	if m.Format != FormatName {
		return corrupt("not a wsstore archive: unreadable manifest")
	}
	if m.Version != Version {
		return unsupportedVersion(m.Version)
	}
	return nil
}

// manifestFields are the manifest's fields, as parseManifest reads them.
var manifestFields = []string{"format", "version", "createdAt", "scope", "chats", "runs", "actors", "bytes", "blobsElsewhere", "blobs", "trees"}

func unsupportedVersion(v int) error {
	return wserr.New(wserr.ArchiveUnsupportedVersion, "import", "", "archive format version %d; this build reads version %d", v, Version)
}

// delim reads the next token, which must be the delimiter d.
func delim(dec *json.Decoder, d json.Delim) error {
	t, err := dec.Token()
	if err != nil {
		return err
	}
	if t != d {
		return corrupt("not a wsstore archive: unreadable manifest")
	}
	return nil
}

// listIDs decodes the list of ids that comes next an element at a time
// into set, and into *dst too if im.keepIDs.
func (im *importer) listIDs(dec *json.Decoder, set idSet, dst *[]string) error {
	if im.keepIDs {
		*dst = []string{}
	}
	return elements(dec, func() error {
		var s string
		if err := dec.Decode(&s); err != nil {
			return err
		}
		if im.keepIDs {
			*dst = append(*dst, s)
		}
		if _, err := set.m.Add([]byte(s), 0); err != nil {
			return passed{err}
		}
		return nil
	})
}

// idSet is a set of the manifest's ids of one kind, each marked when its
// row arrives.
type idSet struct{ m *index.SpillMap }

// arrive marks id's row arrived and reports whether the manifest lists id
// and whether its row arrived before.
func (s idSet) arrive(id string) (listed, again bool, err error) {
	v, listed, err := s.m.Get([]byte(id))
	if err != nil || !listed || v == 1 {
		return listed, listed, err
	}
	return true, false, s.m.Set([]byte(id), 1)
}

// arrived reports whether id's row arrived.
func (s idSet) arrived(id string) (bool, error) {
	v, _, err := s.m.Get([]byte(id))
	return v == 1, err
}

// missing returns the first id, in id order, whose row did not arrive, and
// whether there is one.
func (s idSet) missing() (string, bool, error) {
	var first string
	found := false
	stop := errors.New("found")
	err := s.m.Each(func(k []byte, v int64) error {
		if v == 0 {
			first, found = string(k), true
			return stop
		}
		return nil
	})
	if err != nil && !errors.Is(err, stop) {
		return "", false, err
	}
	return first, found, nil
}

// elements calls fn to decode each element of the list that comes next
// (null: none).
func elements(dec *json.Decoder, fn func() error) error {
	t, err := dec.Token()
	if err != nil || t == nil {
		return err
	}
	if t != json.Delim('[') {
		return corrupt("manifest: a list that is not one")
	}
	for dec.More() {
		if err := fn(); err != nil {
			return err
		}
	}
	return delim(dec, ']')
}

// readRow reads the next line of records.jsonl, one row, without its
// newline; io.EOF once none is left. A line of more than max bytes is
// corrupt, refused before it is read whole.
func readRow(r *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		n := len(line) + len(chunk)
		if err == nil {
			n-- // the newline
		}
		if n > max {
			return nil, corrupt("records: a row of more than %d bytes", max)
		}
		line = append(line, chunk...)
		switch {
		case err == nil:
			return line[:len(line)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF && len(line) > 0:
			return line, nil
		default:
			return nil, err
		}
	}
}

// entryHash parses the address in the current entry's name after prefix.
func (im *importer) entryHash(prefix string) (cas.Hash, bool, error) {
	if im.hdr == nil || !strings.HasPrefix(im.hdr.Name, prefix) {
		return cas.Hash{}, false, nil
	}
	h, err := cas.ParseHash(strings.TrimPrefix(im.hdr.Name, prefix))
	if err != nil {
		return cas.Hash{}, false, corrupt("entry %q: not an address", im.hdr.Name)
	}
	return h, true, nil
}

func (im *importer) readBlobs(ctx context.Context) error {
	if im.m.BlobsElsewhere {
		if err := im.blobsElsewhere(ctx); err != nil {
			return err
		}
		return im.touchReused(ctx)
	}
	var done, sinceBytes, sinceBlobs int64
	for {
		h, ok, err := im.entryHash(blobPrefix)
		if err != nil || !ok {
			if err == nil {
				err = im.touchReused(ctx)
			}
			return err
		}
		size, promised, err := im.blobs.Get(h[:])
		if err != nil {
			return err
		}
		if _, got, err := im.gotB.Get(h[:]); err != nil || !promised || got {
			if err == nil {
				err = corrupt("blob %s is not in the manifest, or there twice", h.Short())
			}
			return err
		}
		if im.hdr.Size != size {
			return corrupt("blob %s is %d bytes, the manifest says %d", h.Short(), im.hdr.Size, size)
		}
		fresh, err := im.blob(ctx, h)
		if err != nil {
			return err
		}
		if _, err := im.gotB.Add(h[:], size); err != nil {
			return err
		}
		im.sum.Blobs++
		im.sum.Bytes += size
		if fresh {
			im.sum.NewObjects++
			sinceBytes, sinceBlobs = sinceBytes+size, sinceBlobs+1
			if sinceBytes >= capCheckBytes || sinceBlobs >= capCheckBlobs {
				if err := im.overCap(ctx, nil, "files"); err != nil {
					return err
				}
				sinceBytes, sinceBlobs = 0, 0
			}
		}
		done += size
		report(im.opt, "blobs", done, im.m.Bytes)
		if err := im.touchDue(ctx); err != nil {
			return err
		}
		if err := im.next(ctx); err != nil {
			return err
		}
	}
}

// blobsElsewhere checks that the store holds every blob of a manifest
// whose blobs are not in the archive; one it lacks fails with
// archive.corrupt.
func (im *importer) blobsElsewhere(ctx context.Context) error {
	err := im.blobs.Each(func(k []byte, size int64) error {
		h := cas.Hash(k)
		n, err := im.a.p.Blobs.Size(ctx, h)
		if errors.Is(err, cas.ErrNotFound) {
			return corrupt("blob %s is neither in the archive nor in the store (pull the blob tier first)", h.Short())
		}
		if err != nil {
			return err
		}
		if n != size {
			// The trees are checked against the manifest's size: it must
			// be the blob's, as for a blob the archive holds.
			return corrupt("blob %s holds %d bytes here, the manifest says %d", h.Short(), n, size)
		}
		if _, err := im.gotB.Add(k, size); err != nil {
			return err
		}
		im.sum.Blobs++
		im.sum.Bytes += size
		return im.reuse(ctx, h)
	})
	if err != nil {
		return err
	}
	if h, ok, err := im.entryHash(blobPrefix); err != nil || ok {
		if err == nil {
			err = corrupt("blob %s in an archive whose manifest says its blobs are elsewhere", h.Short())
		}
		return err
	}
	return nil
}

// blob verifies the current entry against h and stores it, unless the
// store has it: then the bytes are only hashed. fresh reports a blob new
// to the store.
func (im *importer) blob(ctx context.Context, h cas.Hash) (fresh bool, err error) {
	has, err := im.a.p.Blobs.Has(ctx, h)
	if err != nil {
		return false, err
	}
	r := &countingReader{r: im.body()}
	var got cas.Hash
	if has {
		hh := blake3.New(32, nil)
		if _, err := io.Copy(hh, r); err != nil {
			return false, reading(ctx, im.hdr.Name, err)
		}
		copy(got[:], hh.Sum(nil))
	} else if got, err = im.a.p.Blobs.Put(ctx, r); err != nil {
		if wserr.CodeOf(err) == wserr.ArchiveCorrupt {
			return false, err
		}
		// Put reads the archive: a short entry, or the end of ctx,
		// surfaces here.
		if r.n != im.hdr.Size || ctx.Err() != nil {
			return false, reading(ctx, im.hdr.Name, err)
		}
		return false, err
	}
	if r.n != im.hdr.Size {
		return false, corrupt("blob %s is short", h.Short())
	}
	if got != h {
		return false, corrupt("blob %s does not hash to its address", h.Short())
	}
	if has {
		return false, im.reuse(ctx, h)
	}
	return true, nil
}

// touchBatch is how many blobs the store had an import touches in one
// transaction, and touchWait the longest the first of them waits for it.
const (
	touchBatch = 512
	touchWait  = 5 * time.Second
)

// reuse notes that the import uses blob h, which the store had (maybe as
// garbage older than any gc's grace), and touches the blobs so noted once
// touchBatch of them wait or the first has waited touchWait: a gc in
// another process then keeps them for its grace, as it keeps the blobs
// the import stores. One a gc takes before its batch is touched fails the
// import, safely (touchReused, stillStored).
func (im *importer) reuse(ctx context.Context, h cas.Hash) error {
	if len(im.reused) == 0 {
		im.reusedSince = im.a.p.Now()
	}
	im.reused = append(im.reused, h)
	if len(im.reused) < touchBatch {
		return im.touchDue(ctx)
	}
	return im.touchReused(ctx)
}

// touchDue touches the blobs reuse noted once the first has waited
// touchWait, whatever comes between (fresh blobs, a slow reader); the
// import calls it after each blob.
func (im *importer) touchDue(ctx context.Context) error {
	if len(im.reused) == 0 || im.a.p.Now().Sub(im.reusedSince) < touchWait {
		return nil
	}
	return im.touchReused(ctx)
}

// touchReused touches the blobs reuse noted, in one write transaction.
// One a gc took since the import found it fails the import with
// store.busy (cas.Collected): import again.
func (im *importer) touchReused(ctx context.Context) error {
	if len(im.reused) == 0 {
		return nil
	}
	err := im.a.p.DB.Update(ctx, func(tx *index.Tx) error {
		for _, h := range im.reused {
			if _, err := im.a.p.Blobs.Touch(ctx, tx, h); err != nil {
				return err
			}
		}
		return nil
	})
	im.reused = im.reused[:0]
	return err
}

// stillStored checks, in the transaction that writes the rows, that every
// blob and tree the import verified is still stored: a gc in another
// process whose grace is shorter than the import took may have collected
// one, and rows naming it would make a corrupt store. One gone fails the
// import with store.busy (cas.Collected): nothing is visible, and
// importing again stores it anew. What is there stays: a gc sweeps under
// the write lock, keeping what the roots reach once it holds it.
func (im *importer) stillStored(ctx context.Context, tx *index.Tx) error {
	gone := func(h cas.Hash, what string) error {
		return cas.Collected("import", h, wserr.New(wserr.NotFound, "import", "", "%s %s is no longer stored", what, h.Short()))
	}
	err := im.gotB.Each(func(k []byte, _ int64) error {
		if ok, err := im.a.p.Blobs.HasIn(ctx, tx, cas.Hash(k)); err != nil || !ok {
			return cmp.Or(err, gone(cas.Hash(k), "blob"))
		}
		return nil
	})
	if err != nil {
		return err
	}
	return im.gotT.Each(func(k []byte, _ int64) error {
		if _, ok, err := im.a.p.Trees.TreeCreated(ctx, tx, cas.Hash(k)); err != nil || !ok {
			return cmp.Or(err, gone(cas.Hash(k), "tree"))
		}
		return nil
	})
}

// missing returns an address of promised that got lacks, if any: an
// object the manifest lists that the archive did not hold.
func missing(promised, got *index.SpillMap) (cas.Hash, bool, error) {
	ng, err := got.Len()
	if err != nil {
		return cas.Hash{}, false, err
	}
	np, err := promised.Len()
	if err != nil || ng == np {
		return cas.Hash{}, false, err // got holds only promised objects
	}
	k, ok, err := firstAbsent(promised, got, nil)
	if err != nil || !ok {
		return cas.Hash{}, false, err
	}
	return cas.Hash(k), true, nil
}

func (im *importer) readTrees(ctx context.Context) error {
	var pending [][]vfs.Entry
	var want []cas.Hash
	var pendingBytes int
	flush := func() error {
		if len(pending) == 0 {
			return nil
		}
		err := im.a.p.DB.Update(ctx, func(tx *index.Tx) error {
			for i, es := range pending {
				h, err := im.a.p.Trees.Put(ctx, tx, es)
				if err != nil {
					return err
				}
				if h != want[i] {
					return corrupt("tree %s does not store at its address", want[i].Short())
				}
			}
			return im.overCap(ctx, tx, "files and trees")
		})
		// Cleared, so the entries of the stored trees can be collected.
		clear(pending)
		pending, want, pendingBytes = pending[:0], want[:0], 0
		return err
	}
	for {
		h, ok, err := im.entryHash(treePrefix)
		if err != nil {
			return err
		}
		if !ok {
			if err := flush(); err != nil {
				return err
			}
			if b, ok, err := missing(im.blobs, im.gotB); err != nil || ok {
				return cmp.Or(err, corrupt("blob %s of the manifest is missing", b.Short()))
			}
			if t, ok, err := missing(im.trees, im.gotT); err != nil || ok {
				return cmp.Or(err, corrupt("tree %s of the manifest is missing", t.Short()))
			}
			return nil
		}
		if _, ok, err := im.trees.Get(h[:]); err != nil || !ok {
			return cmp.Or(err, corrupt("tree %s is not in the manifest", h.Short()))
		}
		if _, dup, err := im.gotT.Get(h[:]); err != nil || dup {
			return cmp.Or(err, corrupt("tree %s is there twice", h.Short()))
		}
		b, err := im.whole(ctx, maxTreeBytes)
		if err != nil {
			return err
		}
		if vfs.TreeHash(b) != h {
			return corrupt("tree %s does not hash to its address", h.Short())
		}
		es, err := vfs.DecodeTree(b)
		if err != nil {
			return corrupt("tree %s: %v", h.Short(), err)
		}
		var total int64
		for _, e := range es {
			switch e.Kind {
			case vfs.KindFile:
				if size, ok, err := im.gotB.Get(e.Hash[:]); err != nil || !ok || size != e.Size {
					return cmp.Or(err, corrupt("tree %s: file %s is not a blob of the archive of its size", h.Short(), e.Name))
				}
			case vfs.KindDir:
				if sub, ok, err := im.gotT.Get(e.Hash[:]); err != nil || !ok || sub != e.Size {
					return cmp.Or(err, corrupt("tree %s: directory %s is not a tree before it of its size", h.Short(), e.Name))
				}
			}
			total += e.Size
		}
		if _, err := im.gotT.Add(h[:], total); err != nil {
			return err
		}
		im.sum.Trees++
		pending, want, pendingBytes = append(pending, es), append(want, h), pendingBytes+len(b)
		if len(pending) == treeBatch || pendingBytes >= treeBatchBytes {
			if err := flush(); err != nil {
				return err
			}
		}
		report(im.opt, "trees", im.sum.Trees, im.m.TreeCount)
		if err := im.next(ctx); err != nil {
			return err
		}
	}
}

// tree checks that a row's tree came in the archive.
func (im *importer) tree(what string, h cas.Hash) error {
	if _, ok, err := im.gotT.Get(h[:]); err != nil || !ok {
		return cmp.Or(err, corrupt("%s names tree %s, which the archive does not hold", what, h.Short()))
	}
	return nil
}

// records writes the rows in tx, then checks the end entry: an error
// anywhere rolls every row back.
func (im *importer) records(ctx context.Context, tx *index.Tx) error {
	if im.hdr == nil {
		return corrupt("entry %s missing", recordsName)
	}
	if im.hdr.Name != recordsName {
		// A stray entry, or a blob after the trees: named, rather than
		// called a missing records entry.
		return corrupt("entry %q where %s belongs", im.hdr.Name, recordsName)
	}
	lines := bufio.NewReader(im.body())
	var (
		run      string // the run whose rows follow, "" if skipped
		tail     *RunTail
		actor    string
		lastRun  string
		lastAct  string
		rows     int64
		kindDone = 0 // 0 chats, 1 runs, 2 actors: the sections in order
	)
	for {
		line, err := readRow(lines, maxRowBytes)
		if err == io.EOF {
			break
		}
		if err != nil {
			return reading(ctx, recordsName, err)
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var rec Record
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&rec); err != nil {
			return corrupt("records: %v", err)
		}
		if len(bytes.TrimSpace(line[dec.InputOffset():])) > 0 {
			return corrupt("records: a line holds more than one row")
		}
		if rec.fields() != 1 {
			return corrupt("records: a line holds %d rows, want one", rec.fields())
		}
		rows++
		switch {
		case rec.Chat != nil:
			c := *rec.Chat
			if kindDone > 0 {
				return corrupt("records: chat %s out of order", c.ID)
			}
			listed, again, err := im.chats.arrive(c.ID)
			if err != nil {
				return err
			}
			if !listed || again {
				return corrupt("records: chat %s is not in the manifest, or there twice", c.ID)
			}
			if err := im.tree("chat "+c.ID, c.PersistRoot); err != nil {
				return err
			}
			im.sum.Chats++
			added, err := im.a.p.Runs.ImportChat(ctx, tx, c)
			if im.opt.Merge && wserr.Is(err, wserr.Conflict) {
				im.merge.chats = append(im.merge.chats, c)
				continue
			}
			if err := im.outcome("chat", c.ID, added, err); err != nil {
				return err
			}
		case rec.Tail != nil:
			if kindDone > 1 || tail != nil {
				return corrupt("records: tail of run %s out of order", rec.Tail.RunID)
			}
			if !im.opt.Merge {
				return wserr.New(wserr.InvalidArgument, "import", "",
					"the archive holds run %s from event %d on only: it merges into a store that holds the run (Options.Merge)", rec.Tail.RunID, rec.Tail.From)
			}
			tail = rec.Tail
		case rec.Run != nil:
			r := *rec.Run
			if kindDone > 1 || (tail != nil && tail.RunID != r.ID) {
				return corrupt("records: run %s out of order", r.ID)
			}
			kindDone = 1
			if r.ID <= lastRun {
				return corrupt("records: run %s is not in the manifest, out of order or there twice", r.ID)
			}
			listed, again, err := im.runIDs.arrive(r.ID)
			if err != nil {
				return err
			}
			if !listed || again {
				return corrupt("records: run %s is not in the manifest, out of order or there twice", r.ID)
			}
			lastRun = r.ID
			if im.opt.NoHostPaths && r.ReachesHost() {
				return wserr.New(wserr.Forbidden, "import", "", "run %s reaches host directories (profile.allowPaths), which this import may not bring in", r.ID)
			}
			if held, err := im.chats.arrived(r.ChatID); err != nil {
				return err
			} else if !held {
				return corrupt("records: run %s belongs to chat %s, which the archive does not hold", r.ID, r.ChatID)
			}
			if err := im.tree("run "+r.ID, r.Root); err != nil {
				return err
			}
			if err := im.tree("run "+r.ID, r.PersistBase); err != nil {
				return err
			}
			if !r.Records.IsZero() {
				if err := im.tree("run "+r.ID, r.Records); err != nil {
					return err
				}
			}
			im.sum.Runs++
			if err := im.endLineage(ctx, tx); err != nil {
				return err
			}
			if err := im.flushRun(ctx, tx); err != nil {
				return err
			}
			im.merge.noteBase(r)
			if t := tail; t != nil {
				// Only a run held here is brought forward by a tail.
				tail, run = nil, ""
				_, err := im.a.p.Runs.ExportRun(ctx, tx, r.ID)
				if wserr.Is(err, wserr.RunNotFound) {
					err = wserr.New(wserr.Conflict, "merge run", "", "run %s: the archive holds it from event %d on, and this store does not hold it", r.ID, t.From)
					if err := im.note(Conflicted, "run "+r.ID, Conflict{Kind: "run", ID: r.ID, Reason: wserr.MessageOf(err), NotHeld: true}); err != nil {
						return err
					}
					continue
				} else if err == nil {
					im.merge.run = im.newMergeRun(ctx, tx, r, t, 0)
					continue
				}
				if err := im.outcome("run", r.ID, false, err); err != nil {
					return err
				}
				continue
			}
			added, err := im.a.p.Runs.ImportRun(ctx, tx, r)
			if im.opt.Merge && wserr.Is(err, wserr.Conflict) {
				im.merge.run = im.newMergeRun(ctx, tx, r, nil, 0)
				run = ""
				continue
			}
			if im.opt.Merge && err == nil && !added {
				// A run whose row is the same may still have grown: a
				// commit's outcome recorded, or resolved, journals
				// without a change to the row. Its events are compared
				// from the store's last on only (mergeRun.from).
				last, err := im.a.p.Journal.Last(ctx, tx, r.ID)
				if err != nil {
					return err
				}
				im.merge.run = im.newMergeRun(ctx, tx, r, nil, max(last, 1))
				run = ""
				continue
			}
			if err := im.outcome("run", r.ID, added, err); err != nil {
				return err
			}
			run = ""
			if added {
				run = r.ID
				im.startRun(r)
			}
		case rec.Checkpoint != nil:
			c := *rec.Checkpoint
			if kindDone != 1 || c.RunID != lastRun {
				return corrupt("records: checkpoint of run %s out of place", c.RunID)
			}
			if err := im.tree("checkpoint", c.Root); err != nil {
				return err
			}
			if run != "" {
				if err := im.a.p.Checkpoints.ImportRecord(ctx, tx, c); err != nil {
					return rowError(err)
				}
				if err := im.checkpointVersions(ctx, tx, c.Seq, c.ParentSeq, c.Root); err != nil {
					return err
				}
			} else if im.merge.run != nil {
				if err := im.merge.run.addCheckpoint(c); err != nil {
					return err
				}
			}
		case rec.Commit != nil:
			c := *rec.Commit
			if kindDone != 1 || c.RunID != lastRun {
				return corrupt("records: commit of run %s out of place", c.RunID)
			}
			if run != "" {
				if err := im.a.p.Runs.ImportCommit(ctx, tx, c); err != nil {
					return rowError(err)
				}
			} else if im.merge.run != nil {
				// A commit held here needs only its outcome for the
				// merge: its message (up to runs.MaxMessageBytes) is
				// dropped, so a run's messages are not held together.
				known, err := im.a.p.Runs.HasCommit(ctx, tx, c.RunID, c.ID)
				if err != nil {
					return err
				}
				if known {
					c.Message = ""
				}
				im.merge.run.commits = append(im.merge.run.commits, c)
			}
		case rec.Event != nil:
			e := *rec.Event
			if kindDone != 1 || e.RunID != lastRun {
				return corrupt("records: event of run %s out of place", e.RunID)
			}
			im.sum.Events++
			if run != "" {
				if err := im.a.p.Journal.ImportEvent(ctx, tx, e); err != nil {
					return rowError(err)
				}
			} else if im.merge.run != nil {
				if err := im.merge.run.addEvent(e); err != nil {
					return err
				}
			}
		case rec.Space != nil:
			s := *rec.Space
			if err := im.endLineage(ctx, tx); err != nil {
				return err
			}
			if err := im.flushRun(ctx, tx); err != nil {
				return err
			}
			if err := im.flushSpace(ctx, tx); err != nil {
				return err
			}
			kindDone = 2
			listed, again, err := im.actors.arrive(s.Actor)
			if err != nil {
				return err
			}
			if !listed || again {
				return corrupt("records: actor %s is not in the manifest, or there twice", s.Actor)
			}
			lastAct = s.Actor
			if err := im.tree("actor "+s.Actor, s.Root); err != nil {
				return err
			}
			im.sum.Actors++
			added, err := im.a.p.Actors.ImportSpace(ctx, tx, s)
			if im.opt.Merge && wserr.Is(err, wserr.Conflict) {
				im.merge.space = im.newMergeSpace(ctx, tx, s)
				actor = ""
				continue
			}
			if err := im.outcome("actor", s.Actor, added, err); err != nil {
				return err
			}
			actor = ""
			if added {
				actor = s.Actor
			}
		case rec.Change != nil:
			c := *rec.Change
			if kindDone != 2 || c.Actor != lastAct {
				return corrupt("records: change of actor %s out of place", c.Actor)
			}
			if !c.Root.IsZero() {
				if err := im.tree("actor change", c.Root); err != nil {
					return err
				}
			}
			if actor != "" {
				if err := im.a.p.Actors.ImportChange(ctx, tx, c); err != nil {
					return err
				}
			} else if im.merge.space != nil {
				if err := im.merge.space.changes.add(c); err != nil {
					return err
				}
			}
		}
		report(im.opt, "records", rows, 0)
		if tail != nil && rec.Tail == nil {
			return corrupt("records: tail of run %s not followed by the run", tail.RunID)
		}
	}
	if tail != nil {
		return corrupt("records: tail of run %s not followed by the run", tail.RunID)
	}
	if err := im.endLineage(ctx, tx); err != nil {
		return err
	}
	if err := im.flushRun(ctx, tx); err != nil {
		return err
	}
	if err := im.flushSpace(ctx, tx); err != nil {
		return err
	}
	if err := im.flushChats(ctx, tx); err != nil {
		return err
	}
	// The decoder may stop short of the entry's end (trailing spaces):
	// the digest covers every byte.
	if _, err := io.Copy(io.Discard, im.body()); err != nil {
		return reading(ctx, recordsName, err)
	}
	for _, k := range []struct {
		kind string
		set  idSet
	}{{"chat", im.chats}, {"run", im.runIDs}, {"actor", im.actors}} {
		id, ok, err := k.set.missing()
		if err != nil {
			return err
		}
		if ok {
			return corrupt("%s %s of the manifest has no row", k.kind, id)
		}
	}
	return im.end(ctx)
}

// rowError is the error of a row the store refused to import: one that
// does not fit (store.corrupt from its owner: a seq out of order, a parent
// that is not there) is the archive's, archive.corrupt; any other is the
// store's.
func rowError(err error) error {
	if wserr.Is(err, wserr.Corrupt) && !index.IsCorruptDB(err) {
		return wserr.Wrap(wserr.ArchiveCorrupt, "import", "", err)
	}
	return err
}

// outcome files an object's import result; a conflict is reported, not an
// error.
func (im *importer) outcome(kind, id string, added bool, err error) error {
	name := kind + " " + id
	switch {
	case err == nil && added:
		return im.note(Added, name, Conflict{})
	case err == nil:
		return im.note(Unchanged, name, Conflict{})
	case wserr.Is(err, wserr.Conflict):
		return im.note(Conflicted, name, Conflict{Kind: kind, ID: id, Reason: wserr.MessageOf(err)})
	case wserr.Is(err, wserr.Corrupt):
		return wserr.Wrap(wserr.ArchiveCorrupt, "import", "", err)
	default:
		return err
	}
}

// note files what the import did with the chat, run or actor space name:
// counted, named in the summary while its list has room (MaxNames), and
// passed to Options.Taken.
func (im *importer) note(o Outcome, name string, c Conflict) error {
	s := &im.sum
	add := func(list *[]string, n *int) {
		if *n++; len(*list) < MaxNames {
			*list = append(*list, name)
		}
	}
	switch o {
	case Added:
		add(&s.Added, &s.AddedCount)
	case Unchanged:
		add(&s.Unchanged, &s.UnchangedCount)
	case Updated:
		add(&s.Updated, &s.UpdatedCount)
	case Conflicted:
		if s.ConflictCount++; len(s.Conflicts) < MaxConflicts {
			s.Conflicts = append(s.Conflicts, c)
		}
	}
	if im.opt.Taken == nil {
		return nil
	}
	return im.opt.Taken(o, name, c)
}

// end checks the end entry against the digest and that nothing follows.
func (im *importer) end(ctx context.Context) error {
	sum, n := im.d.sum(), im.d.entries
	if err := im.next(ctx); err != nil {
		return err
	}
	if im.hdr == nil || im.hdr.Name != endName {
		return corrupt("entry %s missing: the archive is truncated", endName)
	}
	b, err := im.whole(ctx, 4096)
	if err != nil {
		return err
	}
	var e End
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return corrupt("end: %v", err)
	}
	if e.Entries != n || e.Digest != sum {
		return corrupt("the archive's digest does not match its content")
	}
	if err := im.next(ctx); err != nil {
		return err
	}
	if im.hdr != nil {
		return corrupt("entry %q after the end", im.hdr.Name)
	}
	if err := im.nothingAfter(ctx); err != nil {
		return err
	}
	im.sum.Objects = im.sum.Blobs + im.sum.Trees
	return nil
}

// maxPadding is the most zero bytes an archive may carry after its end:
// tar tools pad the stream to a record (10 KiB for most).
const maxPadding = 1 << 20

// nothingAfter reads what follows the tar stream's end and refuses
// anything but zero padding: two archives joined into one file would
// otherwise import as the first alone.
func (im *importer) nothingAfter(ctx context.Context) error {
	buf := make([]byte, 32<<10)
	var n int64
	for {
		k, err := im.src.Read(buf)
		if slices.ContainsFunc(buf[:k], func(b byte) bool { return b != 0 }) {
			return corrupt("data after the archive's end (two archives joined into one file?)")
		}
		if n += int64(k); n > maxPadding {
			return corrupt("more than %d bytes after the archive's end", maxPadding)
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return reading(ctx, "after the end", err)
		}
	}
}

// ReadManifest reads the manifest at the head of the archive r, checked
// as Import checks it, without importing anything: what the archive holds,
// and each blob it names passed to blob (when not nil) one at a time, in
// the manifest's order; blob's error stops the read and is returned. It
// fails as Import does for a stream that is not an archive of this
// version. blob sees each blob as the manifest is read, before the checks
// that need the whole of it: when ReadManifest fails, what blob was given
// may come from a damaged manifest.
func ReadManifest(ctx context.Context, r io.Reader, blob func(BlobRef) error) (Manifest, error) {
	im := newImporter(ctx, r)
	defer im.close()
	im.keepIDs = true
	if err := im.manifest(ctx, blob); err != nil {
		return Manifest{}, err
	}
	return im.m, nil
}
