package cas

import (
	"testing"

	"github.com/klauspost/compress/zstd"
)

// An encoder pool the newest dictionary no longer uses keeps nothing,
// not even an encoder put back after the switch.
func TestSetNewestDropsTheReplacedEncoders(t *testing.T) {
	s := &Store{}
	s.dicts.loaded = map[Hash]*dictCodec{}
	codec := func(b byte) *dictCodec {
		dc := &dictCodec{info: DictInfo{Hash: Hash{b}}}
		dc.encs = freeList[*zstd.Encoder]{keep: 2, new: func() *zstd.Encoder { return new(zstd.Encoder) }}
		return dc
	}
	a, b := codec(1), codec(2)
	s.setNewest(a)
	held := a.encs.get()
	a.encs.put(a.encs.get())
	if len(a.encs.free) != 1 {
		t.Fatalf("the newest dictionary keeps %d encoders, want 1", len(a.encs.free))
	}
	s.setNewest(b)
	a.encs.put(held)
	if len(a.encs.free) != 0 {
		t.Fatalf("the replaced dictionary keeps %d encoders, want 0", len(a.encs.free))
	}
	s.setNewest(b)
	b.encs.put(b.encs.get())
	if len(b.encs.free) != 1 {
		t.Fatalf("setting the same newest again dropped its encoders")
	}
}

// Idle delta codecs are kept for the windows used last only, the one
// released last among them.
func TestIdleDeltaCodecsAreBounded(t *testing.T) {
	s := &Store{}
	windows := map[int]bool{}
	var last *deltaCodec
	for _, n := range []int{1 << 10, 100 << 10, 300 << 10, 700 << 10, 1 << 10, 100 << 10} {
		base := make([]byte, n)
		c, err := s.deltaCodec(base, int64(n))
		if err != nil {
			t.Fatal(err)
		}
		windows[c.window] = true
		s.releaseDeltaCodec(c)
		last = c
	}
	if len(windows) < 3 {
		t.Fatalf("the bases span %d windows; the test needs at least 3", len(windows))
	}
	if len(s.deltas.idle) != maxIdleCodecs || len(s.deltas.used) != maxIdleCodecs {
		t.Fatalf("%d idle codecs (%d listed), want %d", len(s.deltas.idle), len(s.deltas.used), maxIdleCodecs)
	}
	if s.deltas.idle[last.window] != last {
		t.Fatal("the codec released last is not kept")
	}
	// Taking one for a kept window reuses it and unlists it.
	c, err := s.deltaCodec(make([]byte, 100<<10), 100<<10)
	if err != nil {
		t.Fatal(err)
	}
	if c != last || len(s.deltas.idle) != maxIdleCodecs-1 || len(s.deltas.used) != maxIdleCodecs-1 {
		t.Fatalf("reuse: same codec %v, %d idle, %d listed", c == last, len(s.deltas.idle), len(s.deltas.used))
	}
	s.releaseDeltaCodec(c)
}
