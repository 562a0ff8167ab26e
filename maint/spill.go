package maint

import (
	"bytes"
	"context"
	"maps"
	"slices"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
)

// spillAfter is how many objects a work set holds in memory before the
// rest goes to a scratch database on disk (index.Scratch): about 60 bytes
// an object, so a set costs at most about 16 MiB whatever the store holds.
// Below it a set costs a map lookup an object; beyond it, a query. Tests lower it to prove what holds beyond it.
var spillAfter = 1 << 18

// work is what one maintenance operation keeps beside the store: its work
// sets, and the scratch database they spill to, opened when the first
// needs it. Close it when the operation ends.
type work struct {
	ctx     context.Context
	scratch *index.Scratch
}

func newWork(ctx context.Context) *work { return &work{ctx: ctx} }

func (w *work) close() {
	if w.scratch != nil {
		_ = w.scratch.Close()
	}
}

// objMap maps objects to integers: a mark set, a label, a history number.
// It holds up to spillAfter objects in memory and the rest in the
// scratch database, so its memory does not grow with the store.
type objMap struct {
	w    *work
	mem  map[object]int64
	disk *index.ScratchMap
	// added counts the objects add added, by kind.
	added ObjectCounts
}

func (w *work) newMap() *objMap { return &objMap{w: w, mem: map[object]int64{}} }

// key is o in the scratch database: its kind's place in sweep order
// (blobs, chunks, trees), then its hash, so keys sort in sweep order.
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

// spill moves what the map holds in memory to disk, and makes the map
// keep there what it adds from now on.
func (m *objMap) spill() error {
	if m.disk == nil {
		if m.w.scratch == nil {
			s, err := index.OpenScratch(m.w.ctx)
			if err != nil {
				return err
			}
			m.w.scratch = s
		}
		d, err := m.w.scratch.NewMap(m.w.ctx)
		if err != nil {
			return err
		}
		m.disk = d
	}
	for _, o := range slices.SortedFunc(maps.Keys(m.mem), compareObjects) {
		if err := m.disk.Set(m.w.ctx, o.key(), m.mem[o]); err != nil {
			return err
		}
	}
	clear(m.mem)
	return nil
}

// add stores v for o unless o is there, and reports whether it was added.
func (m *objMap) add(o object, v int64) (bool, error) {
	if _, ok := m.mem[o]; ok {
		return false, nil
	}
	if m.disk != nil {
		added, err := m.disk.Add(m.w.ctx, o.key(), v)
		if added {
			m.added.add(o.kind)
		}
		return added, err
	}
	m.added.add(o.kind)
	m.mem[o] = v
	if len(m.mem) > spillAfter {
		return true, m.spill()
	}
	return true, nil
}

// addNew adds o (value 0) and reports whether it was not there yet.
func (m *objMap) addNew(o object) (bool, error) { return m.add(o, 0) }

// set stores v for o, replacing what was there.
func (m *objMap) set(o object, v int64) error {
	if _, ok := m.mem[o]; ok || m.disk == nil {
		m.mem[o] = v
		if len(m.mem) > spillAfter {
			return m.spill()
		}
		return nil
	}
	return m.disk.Set(m.w.ctx, o.key(), v)
}

// get returns o's value and whether o is there.
func (m *objMap) get(o object) (int64, bool, error) {
	if v, ok := m.mem[o]; ok {
		return v, true, nil
	}
	if m.disk == nil {
		return 0, false, nil
	}
	return m.disk.Get(m.w.ctx, o.key())
}

// has reports whether o is there.
func (m *objMap) has(o object) (bool, error) {
	_, ok, err := m.get(o)
	return ok, err
}

// each calls fn with every object and its value in sweep order (blobs,
// chunks, trees, each by hash). fn may add to the map.
func (m *objMap) each(fn func(o object, v int64) error) error {
	if m.disk == nil {
		objs := slices.SortedFunc(maps.Keys(m.mem), compareObjects)
		vals := make([]int64, len(objs))
		for i, o := range objs {
			vals[i] = m.mem[o]
		}
		for i, o := range objs {
			if err := fn(o, vals[i]); err != nil {
				return err
			}
		}
		return nil
	}
	if err := m.spill(); err != nil {
		return err
	}
	return m.disk.Each(m.w.ctx, func(k []byte, v int64) error { return fn(objectOf(k), v) })
}

// compareObjects orders objects as their keys sort: blobs, chunks, trees,
// each by hash. A blob row's deletion cascades to its chunk list, which
// must be gone before the chunks it names can go.
func compareObjects(a, b object) int {
	if r := int(sweepRank(a.kind)) - int(sweepRank(b.kind)); r != 0 {
		return r
	}
	return bytes.Compare(a.hash[:], b.hash[:])
}

// objList is a list of objects in the order they were pushed, in memory
// up to spillAfter and on disk beyond.
type objList struct {
	w    *work
	mem  []object
	disk *index.ScratchList
}

func (w *work) newList() *objList { return &objList{w: w} }

func (l *objList) len() int {
	if l.disk != nil {
		return int(l.disk.Len())
	}
	return len(l.mem)
}

func (l *objList) push(o object) error {
	if l.disk == nil && len(l.mem) < spillAfter {
		l.mem = append(l.mem, o)
		return nil
	}
	if l.disk == nil {
		if l.w.scratch == nil {
			s, err := index.OpenScratch(l.w.ctx)
			if err != nil {
				return err
			}
			l.w.scratch = s
		}
		d, err := l.w.scratch.NewList(l.w.ctx)
		if err != nil {
			return err
		}
		for _, m := range l.mem {
			if err := d.Push(l.w.ctx, m.key()); err != nil {
				return err
			}
		}
		l.disk, l.mem = d, nil
	}
	return l.disk.Push(l.w.ctx, o.key())
}

// at returns the object at position i.
func (l *objList) at(i int) (object, error) {
	if l.disk == nil {
		return l.mem[i], nil
	}
	k, err := l.disk.At(l.w.ctx, int64(i))
	if err != nil {
		return object{}, err
	}
	return objectOf(k), nil
}
