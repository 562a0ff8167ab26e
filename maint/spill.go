package maint

import (
	"context"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
)

// spillAfter is how many objects a work set holds in memory before the
// rest goes to a scratch database on disk (index.Spill): about 100 bytes
// an object, so a set costs at most about 25 MiB whatever the store holds.
// Below it a set costs a map lookup an object; beyond it, a query. Tests
// lower it to prove what holds beyond it.
var spillAfter = 1 << 18

// work is what one maintenance operation keeps beside the store: its work
// sets, which move to a scratch database on disk past spillAfter objects
// each (index.Spill). Close it when the operation ends.
type work struct {
	sets *index.Spill
}

func newWork(ctx context.Context) *work { return &work{sets: index.NewSpill(ctx, spillAfter)} }

func (w *work) close() { _ = w.sets.Close() }

// objMap maps objects to integers: a mark set, a label, a history number.
// Its keys sort in sweep order (object.key).
type objMap struct {
	m *index.SpillMap
	// added counts the objects add added, by kind.
	added ObjectCounts
}

func (w *work) newMap() *objMap { return &objMap{m: w.sets.NewMap()} }

// key is o as a set holds it: its kind's place in sweep order (blobs,
// chunks, trees), then its hash, so keys sort in sweep order. A blob
// row's deletion cascades to its chunk list, which must be gone before
// the chunks it names can go.
func (o object) key() []byte {
	k := make([]byte, 0, 1+len(o.hash))
	return append(append(k, sweepRank(o.kind)), o.hash[:]...)
}

func objectOf(key []byte) object {
	kinds := [...]objKind{objBlob, objChunk, objTree}
	return object{kind: kinds[key[0]], hash: cas.Hash(key[1:])}
}

func sweepRank(k objKind) byte {
	switch k {
	case objBlob:
		return 0
	case objChunk:
		return 1
	}
	return 2
}

// add stores v for o unless o is there, and reports whether it was added.
func (m *objMap) add(o object, v int64) (bool, error) {
	added, err := m.m.Add(o.key(), v)
	if added {
		m.added.add(o.kind)
	}
	return added, err
}

// addNew adds o (value 0) and reports whether it was not there yet.
func (m *objMap) addNew(o object) (bool, error) { return m.add(o, 0) }

// set stores v for o, replacing what was there.
func (m *objMap) set(o object, v int64) error { return m.m.Set(o.key(), v) }

// get returns o's value and whether o is there.
func (m *objMap) get(o object) (int64, bool, error) { return m.m.Get(o.key()) }

// has reports whether o is there.
func (m *objMap) has(o object) (bool, error) {
	_, ok, err := m.get(o)
	return ok, err
}

// each calls fn with every object and its value in sweep order (blobs,
// chunks, trees, each by hash). fn may add to the map.
func (m *objMap) each(fn func(o object, v int64) error) error {
	return m.m.Each(func(k []byte, v int64) error { return fn(objectOf(k), v) })
}

// objList is a list of objects in the order they were pushed.
type objList struct {
	l *index.SpillList
}

func (w *work) newList() *objList { return &objList{l: w.sets.NewList()} }

func (l *objList) len() int { return int(l.l.Len()) }

func (l *objList) push(o object) error { return l.l.Push(o.key()) }

// at returns the object at position i.
func (l *objList) at(i int) (object, error) {
	k, err := l.l.At(int64(i))
	if err != nil {
		return object{}, err
	}
	return objectOf(k), nil
}
