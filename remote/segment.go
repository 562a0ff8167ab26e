package remote

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/wserr"
)

// syncDir holds every device's sync segments:
// sync/DEVICE/NANOS-HASH.seg (a delta) or sync/DEVICE/NANOS-HASH.base.seg
// (a base), NANOS the publishing time (20 digits, so keys sort by it) and
// HASH the BLAKE3 of the segment's bytes. devicesDir holds one empty
// object per device that ever synced, so a listing finds the devices
// without listing their segments.
const (
	syncDir    = "sync/"
	devicesDir = "devices/"
)

// SegmentFormat is a segment header's format field.
const SegmentFormat = "wsstore-sync-segment"

// SegmentVersion is the segment format this build writes; it reads
// versions 1 (whose object changes are lists in the header) and 2 (whose
// tombstones are in the header) too.
const SegmentVersion = 3

// Tombstone is the deletion of a chat or run one device published: the
// state of it the deleting device had last synced (Seq, the journal's
// last seq, and Last, the hash of that event), so another device deletes
// its copy only when it holds no later state.
type Tombstone struct {
	Kind   string    `json:"kind"` // "run" or "chat"
	ID     string    `json:"id"`
	Parent string    `json:"parent,omitempty"` // a run's chat
	Seq    int64     `json:"seq,omitempty"`
	Last   cas.Hash  `json:"last,omitzero"`
	Device string    `json:"device"`
	At     time.Time `json:"at"`
	// Detail carries a chat's kind and stable id ({"kind","stableChatId"})
	// and a run's first events (RunDetail).
	Detail json.RawMessage `json:"detail,omitempty"`
}

// RunDetail is the detail of a run's tombstone.
type RunDetail struct {
	// First is the hash of the deleted run's first event: a run here
	// that starts with another is not the one deleted (a run created
	// later under the same id), and the tombstone leaves it alone. Zero
	// when the deleting device did not know it.
	First cas.Hash `json:"first,omitzero"`
	// Successor is the hash of the first event of a run that the
	// deleting device created again under the same id before it
	// published the deletion: the segment's archive holds that run,
	// which takes the deleted one's place.
	Successor cas.Hash `json:"successor,omitzero"`
}

// Run returns the RunDetail of a run's tombstone, zero when it has none
// (or the detail does not read).
func (t Tombstone) Run() RunDetail {
	var d RunDetail
	if t.Kind != "run" || len(t.Detail) == 0 || json.Unmarshal(t.Detail, &d) != nil {
		return RunDetail{}
	}
	return d
}

// SegmentHeader is what a segment holds besides the metadata archive
// that follows it: in version 3 the JSON document after the segment's
// first line (segmentPrefix), its tombstones in a section of their own
// after it; in versions 1 and 2 the first line, tombstones included.
type SegmentHeader struct {
	Format  string    `json:"format"`
	Version int       `json:"version"`
	Device  string    `json:"device"`
	At      time.Time `json:"at"`
	// Base says the segment stands for all the device's segments before
	// it: its archive holds every chat, run and actor space whose state
	// the device sent last, Added every object the device records,
	// Tombstones every deletion it published. A device taking it in may
	// skip the device's segments before it.
	Base bool `json:"base,omitempty"`
	// Archive is the length of the metadata archive after the header (0:
	// none, nothing changed but deletions or objects).
	Archive int64 `json:"archive"`
	// Tombstones are the deletions since the device's previous segment.
	// A version 3 segment carries them in the tombstone section after its
	// header (tombSection), which ReadHeader leaves unread.
	Tombstones []Tombstone `json:"tombstones"`
	// DroppedObjects and AddedObjects count the records of the object
	// section between the header (in version 3, the tombstone section)
	// and the archive, which change the device's object set: the dropped
	// first, then the added, 33 bytes each (the kind, 0 blob or 1 chunk,
	// then the hash). A base adds every object the device records.
	DroppedObjects int64 `json:"droppedObjects"`
	AddedObjects   int64 `json:"addedObjects"`
	// Indexes names the index objects ("index/HASH") the device pushed
	// or took in since its previous segment, so a reader learns the new
	// packs without listing index/. Nil (absent) in a base, whose readers
	// list index/ once, and in segments of builds before it; empty when
	// there are none.
	Indexes *[]string `json:"indexes,omitempty"`
	// Prev is the key of the device's segment before this one, as the
	// device recorded it published, so a reader notices a segment gone
	// from the object store (FollowsOn). Absent in a device's first
	// segment, its first after ResetDevice, and segments of builds before
	// it, whose readers ignore it.
	Prev string `json:"prev,omitempty"`

	// Own are tombstones in a temporary file, carried before Tombstones:
	// a base's every deletion its device published (OwnTombstones), which
	// are never held in memory. PublishSegment writes them; a reader
	// finds them in Tombstones.
	Own *TombstoneList `json:"-"`

	// v1 holds a version 1 header's object changes, which it lists
	// itself ("KIND:HASH") instead of an object section.
	v1 *v1Objects
	// tombs is where a version 3 segment's tombstone section is, while
	// Tombstones does not hold it yet (ReadHeader).
	tombs *tombSection
}

// segmentPrefix is a version 3 segment's first line: the length of the
// header after it and the header's hash, so that a reader fetches
// exactly the header and checks it before it decodes it. Builds that
// write versions 1 and 2 read the line as a header and refuse its
// version.
type segmentPrefix struct {
	Format     string   `json:"format"`
	Version    int      `json:"version"`
	Header     int64    `json:"header"`
	HeaderHash cas.Hash `json:"headerHash"`
}

// tombSection says where a version 3 segment's tombstones are: Count
// lines of JSON, one tombstone each, Length bytes hashing to Hash, right
// after the header.
type tombSection struct {
	Count  int64    `json:"count"`
	Length int64    `json:"length"`
	Hash   cas.Hash `json:"hash"`
	off    int64    // where it starts in the segment
}

// header3 is a version 3 header as written: its tombstones field
// describes the tombstone section, in place of SegmentHeader's list.
type header3 struct {
	SegmentHeader
	Tombstones tombSection `json:"tombstones"`
}

type v1Objects struct {
	Added   []string `json:"added"`
	Dropped []string `json:"dropped"`
}

// Segment names one segment on the object store.
type Segment struct {
	Key    string    `json:"key"`
	Device string    `json:"device"`
	At     time.Time `json:"at"`
	Hash   cas.Hash  `json:"hash"`
	Base   bool      `json:"base,omitempty"`
	// Size is the segment's length, known to PublishSegment only.
	Size int64 `json:"size,omitempty"`
	// Modified is when the object store says the segment was written
	// (Segments; zero when it does not say).
	Modified time.Time `json:"-"`
}

func parseSegmentKey(key string) (Segment, bool) {
	rest, ok := strings.CutPrefix(key, syncDir)
	if !ok {
		return Segment{}, false
	}
	dev, name, ok := strings.Cut(rest, "/")
	if !ok || dev == "" {
		return Segment{}, false
	}
	stem, ok := strings.CutSuffix(name, ".seg")
	if !ok {
		return Segment{}, false
	}
	stem, base := strings.CutSuffix(stem, ".base")
	ns, hs, ok := strings.Cut(stem, "-")
	if !ok {
		return Segment{}, false
	}
	n, err := strconv.ParseInt(ns, 10, 64)
	if err != nil {
		return Segment{}, false
	}
	h, err := cas.ParseHash(hs)
	if err != nil {
		return Segment{}, false
	}
	return Segment{Key: key, Device: dev, At: time.Unix(0, n).UTC(), Hash: h, Base: base}, true
}

// PublishSegment writes a segment of h.Device under a new write-once key:
// its first line (the header's length and hash), the header, the
// tombstone section of h.Own and h.Tombstones, the object section of objs and
// archive (the metadata archive), either nil for none. The segment is put
// together in temporary files, the tombstones encoded one at a time, and
// uploaded from them, so no part of it is held in memory. A failure to
// reach the store is store.busy.
func (s *Storage) PublishSegment(ctx context.Context, h SegmentHeader, objs *ObjectList, archive *Spool) (Segment, error) {
	h.Format, h.Version, h.Archive = SegmentFormat, SegmentVersion, archive.Size()
	h.DroppedObjects, h.AddedObjects = 0, 0
	if objs != nil {
		h.DroppedObjects, h.AddedObjects = objs.dropped, objs.added
	}
	tombs, sec, err := spoolTombstones(h.Tombstones, h.Own)
	if err != nil {
		return Segment{}, err
	}
	defer tombs.Close()
	hb, err := json.Marshal(header3{SegmentHeader: h, Tombstones: sec})
	if err != nil {
		return Segment{}, err
	}
	hb = append(hb, '\n')
	pb, err := json.Marshal(segmentPrefix{Format: SegmentFormat, Version: SegmentVersion, Header: int64(len(hb)), HeaderHash: cas.Sum(hb)})
	if err != nil {
		return Segment{}, err
	}
	out, err := newSpool("publish segment", "wsstore-segment-*")
	if err != nil {
		return Segment{}, err
	}
	defer out.Close()
	sum := cas.NewHasher()
	defer sum.Release()
	w := io.MultiWriter(out, sum)
	if _, err := w.Write(append(append(pb, '\n'), hb...)); err != nil {
		return Segment{}, err
	}
	for _, part := range []*Spool{tombs, objs.spool(), archive} {
		r, err := part.Reader()
		if err != nil {
			return Segment{}, err
		}
		if _, err := io.Copy(w, r); err != nil {
			return Segment{}, err
		}
	}
	body, err := out.section()
	if err != nil {
		return Segment{}, err
	}
	hash := sum.Sum()
	ext := ".seg"
	if h.Base {
		ext = ".base.seg"
	}
	seg := Segment{Key: fmt.Sprintf("%s%s/%020d-%s%s", syncDir, h.Device, h.At.UnixNano(), hash, ext),
		Device: h.Device, At: h.At.UTC(), Hash: hash, Base: h.Base, Size: out.Size()}
	if _, err := s.b.putFrom(ctx, seg.Key, body, seg.Size); err != nil {
		return Segment{}, fmt.Errorf("publish segment: %w", err)
	}
	return seg, nil
}

// spoolTombstones writes own, then ts, as a tombstone section into a
// temporary file, one at a time, and returns it with what the header
// says of it.
func spoolTombstones(ts []Tombstone, own *TombstoneList) (sp *Spool, sec tombSection, err error) {
	l, err := NewTombstoneList()
	if err != nil {
		return nil, tombSection{}, err
	}
	defer func() {
		if err != nil {
			l.Close()
		}
	}()
	sum := cas.NewHasher()
	defer sum.Release()
	l.w = io.MultiWriter(l.sp, sum)
	if own != nil {
		r, err := own.sp.Reader()
		if err != nil {
			return nil, tombSection{}, err
		}
		if _, err := io.Copy(l.w, r); err != nil {
			return nil, tombSection{}, err
		}
		l.n = own.n
	}
	for _, t := range ts {
		if err := l.Add(t); err != nil {
			return nil, tombSection{}, err
		}
	}
	return l.sp, tombSection{Count: l.n, Length: l.sp.Size(), Hash: sum.Sum()}, nil
}

// TombstoneList is tombstones kept in a temporary file, a line of JSON
// each, as a segment's tombstone section holds them. Close it.
type TombstoneList struct {
	sp *Spool
	w  io.Writer
	n  int64
}

// NewTombstoneList returns an empty TombstoneList.
func NewTombstoneList() (*TombstoneList, error) {
	sp, err := newSpool("tombstones", "wsstore-tombstones-*")
	if err != nil {
		return nil, err
	}
	return &TombstoneList{sp: sp, w: sp}, nil
}

// Add appends t.
func (l *TombstoneList) Add(t Tombstone) error {
	b, err := json.Marshal(t)
	if err != nil {
		return err
	}
	if _, err := l.w.Write(append(b, '\n')); err != nil {
		return err
	}
	l.n++
	return nil
}

// Len is how many tombstones l holds; 0 for a nil TombstoneList.
func (l *TombstoneList) Len() int64 {
	if l == nil {
		return 0
	}
	return l.n
}

// Each calls fn with every tombstone of l, in the order they were added,
// one at a time.
func (l *TombstoneList) Each(fn func(Tombstone) error) error {
	if l == nil {
		return nil
	}
	r, err := l.sp.Reader()
	if err != nil {
		return err
	}
	dec := json.NewDecoder(r)
	for range l.n {
		var t Tombstone
		if err := dec.Decode(&t); err != nil {
			return fmt.Errorf("tombstones: %w", err)
		}
		if err := fn(t); err != nil {
			return err
		}
	}
	return nil
}

// Close removes l's file; a nil TombstoneList is closed already.
func (l *TombstoneList) Close() error {
	if l == nil {
		return nil
	}
	return l.sp.Close()
}

// RegisterDevice writes the device's entry under devices/ (write-once; a
// 412 is success).
func (s *Storage) RegisterDevice(ctx context.Context, device string) error {
	if _, err := s.b.put(ctx, devicesDir+device, []byte{}); err != nil {
		return fmt.Errorf("register device: %w", err)
	}
	return nil
}

// Devices returns the id of every device that registered, sorted.
func (s *Storage) Devices(ctx context.Context) ([]string, error) {
	var out []string
	err := s.b.list(ctx, devicesDir, "", func(key string, _ time.Time) error {
		if d := strings.TrimPrefix(key, devicesDir); d != "" && !strings.Contains(d, "/") {
			out = append(out, d)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list devices: %w", err)
	}
	sort.Strings(out)
	return out, nil
}

// Segments returns device's segments after the key after ("" for all),
// oldest first. Listing starts after that key, so its cost grows with the
// segments new to the caller.
func (s *Storage) Segments(ctx context.Context, device, after string) ([]Segment, error) {
	var out []Segment
	err := s.b.list(ctx, syncDir+device+"/", after, func(key string, mod time.Time) error {
		if seg, ok := parseSegmentKey(key); ok && seg.Device == device {
			seg.Modified = mod
			out = append(out, seg)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list segments: %w", err)
	}
	return out, nil
}

// FromBase returns the segments a device that read none of segs needs:
// from the newest base on, or all when there is none.
func FromBase(segs []Segment) []Segment {
	for i := len(segs) - 1; i >= 0; i-- {
		if segs[i].Base {
			return segs[i:]
		}
	}
	return segs
}

// FollowsOn fails with store.corrupt wrapping ErrMissing, naming the
// device and the missing segment, when seg (a delta, its header h) follows
// on a segment of its device that the reader has not read: one after the
// key after, the device's segment it read last ("" for none). A base
// stands for every segment before it, so a gap before it loses nothing; a
// segment that names none (an older build's) is not checked. A Prev
// before after is no gap: a segment the device published but did not
// record (its sync cut off after the upload) is followed by one naming
// the segment before it, which carries again what it carried.
func FollowsOn(seg Segment, h SegmentHeader, after string) error {
	if seg.Base || h.Prev == "" || h.Prev <= after {
		return nil
	}
	return fmt.Errorf("%w: %w", wserr.New(wserr.Corrupt, "sync", seg.Key,
		"segment %s of device %s is missing from the object store: this segment follows it, and nothing of the device after the gap is taken in until the device publishes a base (its next sync does when its own last segment is gone; else run `wsctl sync --base` there)",
		h.Prev, seg.Device), ErrMissing)
}

// FetchSegment returns the header and the archive of seg (nil when it has
// none), checked against the hash its key names: other bytes fail with
// store.corrupt (wrapping cas.ErrCorrupt), a missing object with
// store.corrupt wrapping ErrMissing. The segment goes whole into a
// temporary file and is checked there before its header is read, so a
// damaged one costs a buffer of memory whatever it holds; the header
// comes with its tombstones, and the archive is read from that file:
// Close it.
func (s *Storage) FetchSegment(ctx context.Context, seg Segment) (h SegmentHeader, archive *Spool, err error) {
	sp, h, off, err := s.verified(ctx, seg)
	if err != nil {
		return SegmentHeader{}, nil, fmt.Errorf("fetch segment: %w", err)
	}
	defer func() {
		if archive == nil {
			sp.Close()
		}
	}()
	switch rest := sp.Size() - off - h.objectsSize(); {
	case rest < 0:
		return SegmentHeader{}, nil, fmt.Errorf("%w: %w", corrupt(seg.Key, "the segment is shorter than its header says"), cas.ErrCorrupt)
	case rest != h.Archive:
		return SegmentHeader{}, nil, fmt.Errorf("%w: %w", corrupt(seg.Key, "the segment's archive is not the length its header says"), cas.ErrCorrupt)
	case h.Archive == 0:
		return h, nil, nil
	}
	sp.off = off + h.objectsSize()
	return h, sp, nil
}

// verified reads seg whole into a temporary file through a check against
// the hash its key names, then returns the file, the segment's header
// with its tombstones, and where its object section starts. Nothing of
// the segment is parsed before the check, so its header is held only
// once it is known to be the bytes its device wrote. Other bytes fail
// with store.corrupt wrapping cas.ErrCorrupt.
func (s *Storage) verified(ctx context.Context, seg Segment) (sp *Spool, h SegmentHeader, off int64, err error) {
	rc, err := s.b.open(ctx, seg.Key, 0, -1)
	if err != nil {
		return nil, SegmentHeader{}, 0, err
	}
	defer rc.Close()
	if sp, err = newSpool("fetch segment", "wsstore-segment-*"); err != nil {
		return nil, SegmentHeader{}, 0, err
	}
	defer func() {
		if err != nil {
			sp.Close()
			sp = nil
		}
	}()
	sum := cas.NewHasher()
	defer sum.Release()
	if _, err := io.Copy(io.MultiWriter(sp, sum), rc); err != nil {
		return nil, SegmentHeader{}, 0, err
	}
	if sum.Sum() != seg.Hash {
		return nil, SegmentHeader{}, 0, badSegment(seg, "the segment does not hash to its key")
	}
	r, err := sp.Reader()
	if err != nil {
		return nil, SegmentHeader{}, 0, err
	}
	br := bufio.NewReaderSize(r, 64<<10)
	line, err := br.ReadBytes('\n')
	switch {
	case errors.Is(err, io.EOF):
		return nil, SegmentHeader{}, 0, badSegment(seg, "the segment has no header")
	case err != nil:
		return nil, SegmentHeader{}, 0, err
	}
	line = line[:len(line)-1]
	p, ok, err := parsePrefix(seg, line)
	if err != nil {
		return nil, SegmentHeader{}, 0, err
	}
	if !ok {
		h, err := decodeHeader(seg, line)
		return sp, h, int64(len(line)) + 1, err
	}
	// The segment hashes to its key: its parts are as long as it says.
	start := int64(len(line)) + 1
	hb, err := io.ReadAll(io.LimitReader(br, p.Header))
	if err != nil {
		return nil, SegmentHeader{}, 0, err
	}
	if int64(len(hb)) != p.Header || cas.Sum(hb) != p.HeaderHash {
		return nil, SegmentHeader{}, 0, badSegment(seg, "the segment's header does not hash to what its first line says")
	}
	if h, off, err = decodeHeader3(seg, p, start, bytes.NewReader(hb)); err != nil {
		return nil, SegmentHeader{}, 0, err
	}
	if h.Tombstones, err = decodeTombstones(seg, io.LimitReader(br, h.tombs.Length), *h.tombs); err != nil {
		return nil, SegmentHeader{}, 0, err
	}
	h.tombs = nil
	return sp, h, off, nil
}

// objectsSize is the length of the object section after the header.
func (h SegmentHeader) objectsSize() int64 {
	return (h.DroppedObjects + h.AddedObjects) * int64(objectRecord)
}

// prefixProbe is how much of a segment readHeader asks for first: a
// version 3 segment's first line and, mostly, its header. headerProbe is
// how much it asks for of an older segment whose header is longer.
const (
	prefixProbe = 4 << 10
	headerProbe = 64 << 10
)

// readHeader returns seg's header, without a version 3 segment's
// tombstones, and where its object section starts, reading only as much
// of the object as it takes: a version 3 header is fetched exactly and
// checked against the hash the segment's first line names (the hash of
// the whole is not checked: reclaim reads headers only); a header that
// does not decode is store.corrupt.
func (s *Storage) readHeader(ctx context.Context, seg Segment) (SegmentHeader, int64, error) {
	var b, line []byte
	var ok bool
	for _, n := range []int{prefixProbe, headerProbe} {
		var err error
		if b, err = s.b.get(ctx, seg.Key, 0, int64(n)); err != nil {
			return SegmentHeader{}, 0, err
		}
		if line, _, ok = bytes.Cut(b, []byte{'\n'}); ok || len(b) < n {
			break
		}
	}
	if !ok && len(b) == headerProbe {
		// A version 2 header of many tombstones, or one that lost its
		// newline: only a segment that hashes to its key is read past
		// the probe, so a damaged one is never held (verified).
		sp, h, off, err := s.verified(ctx, seg)
		if err != nil {
			return SegmentHeader{}, 0, err
		}
		sp.Close()
		return h, off, nil
	}
	if !ok {
		return SegmentHeader{}, 0, badSegment(seg, "the segment has no header")
	}
	start := int64(len(line)) + 1
	p, ok, err := parsePrefix(seg, line)
	if err != nil {
		return SegmentHeader{}, 0, err
	}
	if !ok {
		h, err := decodeHeader(seg, line)
		return h, start, err
	}
	have := b[start:]
	if p.Header <= int64(len(have)) {
		hb := have[:p.Header]
		if cas.Sum(hb) != p.HeaderHash {
			return SegmentHeader{}, 0, badSegment(seg, "the segment's header does not hash to what its first line says")
		}
		return decodeHeader3(seg, p, start, bytes.NewReader(hb))
	}
	sp, err := s.fetchChecked(ctx, seg, start, p.Header, have, p.HeaderHash, "header")
	if err != nil {
		return SegmentHeader{}, 0, err
	}
	defer sp.Close()
	r, err := sp.Reader()
	if err != nil {
		return SegmentHeader{}, 0, err
	}
	return decodeHeader3(seg, p, start, r)
}

// ReadTombstones returns the tombstones of seg, whose header h ReadHeader
// returned. A version 3 segment's tombstone section is fetched with one
// ranged GET into a temporary file and checked there against the hash
// its header names before it is decoded: other bytes, or fewer, fail
// with store.corrupt wrapping cas.ErrCorrupt. An older segment's are in
// its header.
func (s *Storage) ReadTombstones(ctx context.Context, seg Segment, h SegmentHeader) ([]Tombstone, error) {
	if h.tombs == nil || h.tombs.Count == 0 && h.tombs.Length == 0 {
		return h.Tombstones, nil
	}
	sp, err := s.fetchChecked(ctx, seg, h.tombs.off, h.tombs.Length, nil, h.tombs.Hash, "tombstone section")
	if err != nil {
		return nil, fmt.Errorf("read segment tombstones: %w", err)
	}
	defer sp.Close()
	r, err := sp.Reader()
	if err != nil {
		return nil, err
	}
	return decodeTombstones(seg, r, *h.tombs)
}

// fetchChecked returns n bytes of seg from off, the first of them have
// (read already), in a temporary file they went into through a check
// against want: bytes that do not hash to it, or fewer, fail with
// store.corrupt wrapping cas.ErrCorrupt. So a damaged part of a segment
// is never held in memory, whatever length its header gives.
func (s *Storage) fetchChecked(ctx context.Context, seg Segment, off, n int64, have []byte, want cas.Hash, what string) (sp *Spool, err error) {
	if sp, err = newSpool("fetch segment", "wsstore-segment-*"); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			sp.Close()
		}
	}()
	sum := cas.NewHasher()
	defer sum.Release()
	w := io.MultiWriter(sp, sum)
	if _, err := w.Write(have); err != nil {
		return nil, err
	}
	if rest := n - int64(len(have)); rest > 0 {
		rc, err := s.b.open(ctx, seg.Key, off+int64(len(have)), rest)
		if err != nil {
			return nil, err
		}
		defer rc.Close()
		if _, err := io.Copy(w, io.LimitReader(rc, rest)); err != nil {
			return nil, err
		}
	}
	switch {
	case sp.Size() != n:
		return nil, badSegment(seg, "the segment is shorter than its header says")
	case sum.Sum() != want:
		return nil, badSegment(seg, fmt.Sprintf("the segment's %s does not hash to what its header says", what))
	}
	return sp, nil
}

// parsePrefix returns line as a version 3 segment's first line, false
// when it is not one (an older segment's header). A first line of
// version 3 that does not read, or gives a header length below one or
// past any length, is store.corrupt.
func parsePrefix(seg Segment, line []byte) (segmentPrefix, bool, error) {
	var v struct {
		Format  string `json:"format"`
		Version int    `json:"version"`
	}
	if json.Unmarshal(line, &v) != nil || v.Format != SegmentFormat || v.Version != 3 {
		return segmentPrefix{}, false, nil
	}
	var p segmentPrefix
	if json.Unmarshal(line, &p) != nil {
		return segmentPrefix{}, false, badSegment(seg, "the segment's first line does not read")
	}
	if p.Header < 1 || p.Header > math.MaxInt64/4 {
		return segmentPrefix{}, false, badSegment(seg, "the segment's first line gives no length of its header")
	}
	return p, true, nil
}

func badSegment(seg Segment, msg string) error {
	return fmt.Errorf("%w: %w", corrupt(seg.Key, msg), cas.ErrCorrupt)
}

// decodeHeader decodes a version 1 or 2 header, the segment's first line.
func decodeHeader(seg Segment, hb []byte) (SegmentHeader, error) {
	var h SegmentHeader
	if err := json.Unmarshal(hb, &h); err != nil || h.Format != SegmentFormat {
		return SegmentHeader{}, badSegment(seg, "unreadable segment header")
	}
	switch h.Version {
	case 1:
		// Its object changes are in the header; it has no object section.
		h.v1 = &v1Objects{}
		h.DroppedObjects, h.AddedObjects = 0, 0
		if err := json.Unmarshal(hb, h.v1); err != nil {
			return SegmentHeader{}, badSegment(seg, "unreadable segment header")
		}
	case 2:
	default:
		return SegmentHeader{}, wserr.New(wserr.Corrupt, "sync", seg.Key, "segment format version %d; this build reads versions 1 to %d", h.Version, SegmentVersion)
	}
	return h, checkHeader(seg, h)
}

// decodeHeader3 decodes the header of a version 3 segment from r, which
// reads the bytes its first line p (start bytes long) gives, checked
// against its hash, and returns it with where its object section starts.
func decodeHeader3(seg Segment, p segmentPrefix, start int64, r io.Reader) (SegmentHeader, int64, error) {
	var h3 header3
	if err := json.NewDecoder(r).Decode(&h3); err != nil || h3.Format != SegmentFormat || h3.Version != 3 {
		return SegmentHeader{}, 0, badSegment(seg, "unreadable segment header")
	}
	const most = math.MaxInt64 / 4 // a length past which no sum of them overflows
	sec := h3.Tombstones
	if sec.Count < 0 || sec.Length < 0 || sec.Length > most || sec.Count > sec.Length {
		return SegmentHeader{}, 0, badSegment(seg, "the segment's header counts below zero or past any length")
	}
	h := h3.SegmentHeader
	sec.off = start + p.Header
	h.tombs = &sec
	return h, sec.off + sec.Length, checkHeader(seg, h)
}

// checkHeader checks what a header of any version says against seg's key
// and itself.
func checkHeader(seg Segment, h SegmentHeader) error {
	const most = math.MaxInt64 / 4 / int64(objectRecord) // objects a section can hold
	if h.DroppedObjects < 0 || h.AddedObjects < 0 || h.Archive < 0 || h.DroppedObjects > most-h.AddedObjects {
		return badSegment(seg, "the segment's header counts below zero or past any length")
	}
	if h.Device != seg.Device || h.Base != seg.Base {
		return badSegment(seg, "the segment's header does not match its key")
	}
	if h.Prev != "" && (!strings.HasPrefix(h.Prev, syncDir+seg.Device+"/") || h.Prev >= seg.Key) {
		return badSegment(seg, "the segment's previous segment is not one of its device before it")
	}
	return nil
}

// decodeTombstones decodes a tombstone section, sec.Length bytes that r
// reads, checked against sec's hash as they are decoded; a section that
// does not read or does not hash to it is store.corrupt.
func decodeTombstones(seg Segment, r io.Reader, sec tombSection) ([]Tombstone, error) {
	read := &cas.Tally{R: r, Hash: cas.NewHasher()}
	defer read.Hash.Release()
	dec := json.NewDecoder(read)
	out := make([]Tombstone, 0, min(sec.Count, 1024)) // a count grows the list only as its lines decode
	for range sec.Count {
		var t Tombstone
		if err := dec.Decode(&t); err != nil {
			return nil, badSegment(seg, "a tombstone of the segment does not read")
		}
		out = append(out, t)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, badSegment(seg, "the segment's tombstone section holds more than its header counts")
	}
	if read.N != sec.Length || read.Hash.Sum() != sec.Hash {
		return nil, badSegment(seg, "the segment's tombstone section does not hash to what its header says")
	}
	return out, nil
}

// eachObject calls fn with every object of seg's object set change, the
// dropped first: those of its object section, which starts at off (the
// header's length, as readHeader returns it), streamed, or a version 1
// header's lists. A record that does not decode is store.corrupt.
func (s *Storage) eachObject(ctx context.Context, seg Segment, h SegmentHeader, off int64, fn func(dropped bool, kind cas.Kind, hash cas.Hash) error) error {
	if h.v1 != nil {
		for i, list := range [][]string{h.v1.Dropped, h.v1.Added} {
			for _, name := range list {
				kind, hash, ok := parseObjectName(name)
				if !ok {
					return fmt.Errorf("%w: %w", corrupt(seg.Key, fmt.Sprintf("the segment names an object %q", name)), cas.ErrCorrupt)
				}
				if err := fn(i == 0, kind, hash); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if h.objectsSize() == 0 {
		return nil
	}
	rc, err := s.b.open(ctx, seg.Key, off, h.objectsSize())
	if err != nil {
		return err
	}
	defer rc.Close()
	err = eachRecord(bufio.NewReaderSize(rc, 64<<10), h.DroppedObjects, h.AddedObjects, fn)
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%w: %w", corrupt(seg.Key, "the segment is shorter than its header says"), cas.ErrCorrupt)
	case errors.Is(err, errBadRecord):
		return fmt.Errorf("%w: %w", corrupt(seg.Key, errBadRecord.Error()), cas.ErrCorrupt)
	}
	return err
}
