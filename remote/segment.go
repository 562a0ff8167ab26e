package remote

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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

// SegmentVersion is the segment format this build writes and reads.
const SegmentVersion = 1

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
	// Detail carries a chat's kind and stable id ({"kind","stableChatId"}).
	Detail json.RawMessage `json:"detail,omitempty"`
}

// SegmentHeader is a segment's first line: what it holds besides the
// metadata archive that follows it.
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
	Tombstones []Tombstone `json:"tombstones"`
	// Added and Dropped change the device's object set ("KIND:HASH", 0
	// blob, 1 chunk): Dropped first, then Added.
	Added   []string `json:"added"`
	Dropped []string `json:"dropped"`
	// Indexes names the index objects ("index/HASH") the device pushed
	// or took in since its previous segment, so a reader learns the new
	// packs without listing index/. Nil (absent) in a base, whose readers
	// list index/ once, and in segments of builds before it; empty when
	// there are none.
	Indexes *[]string `json:"indexes,omitempty"`
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

// PublishSegment writes a segment of h.Device: the header, a newline, and
// archive (the metadata archive, maybe empty), under a new write-once key.
// A failure to reach the store is store.busy.
func (s *Storage) PublishSegment(ctx context.Context, h SegmentHeader, archive []byte) (Segment, error) {
	h.Format, h.Version, h.Archive = SegmentFormat, SegmentVersion, int64(len(archive))
	if h.Tombstones == nil {
		h.Tombstones = []Tombstone{}
	}
	if h.Added == nil {
		h.Added = []string{}
	}
	if h.Dropped == nil {
		h.Dropped = []string{}
	}
	hb, err := json.Marshal(h)
	if err != nil {
		return Segment{}, err
	}
	data := make([]byte, 0, len(hb)+1+len(archive))
	data = append(append(append(data, hb...), '\n'), archive...)
	sum := cas.Sum(data)
	ext := ".seg"
	if h.Base {
		ext = ".base.seg"
	}
	seg := Segment{Key: fmt.Sprintf("%s%s/%020d-%s%s", syncDir, h.Device, h.At.UnixNano(), sum, ext),
		Device: h.Device, At: h.At.UTC(), Hash: sum, Base: h.Base, Size: int64(len(data))}
	if _, err := s.b.put(ctx, seg.Key, data); err != nil {
		return Segment{}, fmt.Errorf("publish segment: %w", err)
	}
	return seg, nil
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

// FetchSegment returns the header and the archive of seg, checked against
// the hash its key names: other bytes fail with store.corrupt (wrapping
// cas.ErrCorrupt), a missing object with store.corrupt wrapping
// ErrMissing.
func (s *Storage) FetchSegment(ctx context.Context, seg Segment) (SegmentHeader, []byte, error) {
	b, err := s.b.get(ctx, seg.Key, 0, -1)
	if err != nil {
		return SegmentHeader{}, nil, fmt.Errorf("fetch segment: %w", err)
	}
	if cas.Sum(b) != seg.Hash {
		return SegmentHeader{}, nil, fmt.Errorf("%w: %w", corrupt(seg.Key, "the segment does not hash to its key"), cas.ErrCorrupt)
	}
	hb, rest, ok := bytes.Cut(b, []byte{'\n'})
	if !ok {
		return SegmentHeader{}, nil, fmt.Errorf("%w: %w", corrupt(seg.Key, "the segment has no header"), cas.ErrCorrupt)
	}
	h, err := decodeHeader(seg, hb)
	if err != nil {
		return SegmentHeader{}, nil, err
	}
	if int64(len(rest)) != h.Archive {
		return SegmentHeader{}, nil, fmt.Errorf("%w: %w", corrupt(seg.Key, "the segment's archive is not the length its header says"), cas.ErrCorrupt)
	}
	return h, rest, nil
}

// headerProbe is how much of a segment readHeader asks for first.
const headerProbe = 64 << 10

// readHeader returns seg's header, reading only as much of the object as
// it takes. The hash of the whole is not checked (reclaim reads headers
// only); a header that does not decode is store.corrupt.
func (s *Storage) readHeader(ctx context.Context, seg Segment) (SegmentHeader, error) {
	b, err := s.b.get(ctx, seg.Key, 0, headerProbe)
	if err != nil {
		return SegmentHeader{}, err
	}
	hb, _, ok := bytes.Cut(b, []byte{'\n'})
	if !ok && len(b) == headerProbe {
		if b, err = s.b.get(ctx, seg.Key, 0, -1); err != nil {
			return SegmentHeader{}, err
		}
		hb, _, ok = bytes.Cut(b, []byte{'\n'})
	}
	if !ok {
		return SegmentHeader{}, fmt.Errorf("%w: %w", corrupt(seg.Key, "the segment has no header"), cas.ErrCorrupt)
	}
	return decodeHeader(seg, hb)
}

func decodeHeader(seg Segment, hb []byte) (SegmentHeader, error) {
	var h SegmentHeader
	if err := json.Unmarshal(hb, &h); err != nil || h.Format != SegmentFormat {
		return SegmentHeader{}, fmt.Errorf("%w: %w", corrupt(seg.Key, "unreadable segment header"), cas.ErrCorrupt)
	}
	if h.Version != SegmentVersion {
		return SegmentHeader{}, wserr.New(wserr.Corrupt, "sync", seg.Key, "segment format version %d; this build reads version %d", h.Version, SegmentVersion)
	}
	if h.Device != seg.Device || h.Base != seg.Base {
		return SegmentHeader{}, fmt.Errorf("%w: %w", corrupt(seg.Key, "the segment's header does not match its key"), cas.ErrCorrupt)
	}
	return h, nil
}
