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
