package index

import (
	"context"
	"maps"
	"slices"
)

// Spill holds the work sets of one operation (a gc's mark sets, an
// archive's addresses): each keeps up to its limit of entries in memory
// and moves to a Scratch on disk once it grows past it, so a set costs a
// map lookup an entry while small and a query an entry beyond, and its
// memory does not grow with the store. The Scratch is opened when the
// first set spills. A Spill is not safe for concurrent use; Close it when
// the operation ends.
type Spill struct {
	ctx     context.Context
	after   int
	scratch *Scratch
}

// NewSpill returns a Spill whose sets hold up to after entries in memory.
// ctx is the operation's: the sets' queries run under it.
func NewSpill(ctx context.Context, after int) *Spill {
	return &Spill{ctx: ctx, after: after}
}

// Close deletes the Scratch, if a set spilled to one.
func (s *Spill) Close() error {
	if s.scratch == nil {
		return nil
	}
	err := s.scratch.Close()
	s.scratch = nil
	return err
}

func (s *Spill) open() (*Scratch, error) {
	if s.scratch == nil {
		sc, err := OpenScratch(s.ctx)
		if err != nil {
			return nil, err
		}
		s.scratch = sc
	}
	return s.scratch, nil
}

// SpillMap maps byte keys to integers, in memory up to its Spill's limit
// and on disk beyond.
type SpillMap struct {
	s    *Spill
	mem  map[string]int64
	disk *ScratchMap
}

// NewMap returns a new, empty map.
func (s *Spill) NewMap() *SpillMap { return &SpillMap{s: s, mem: map[string]int64{}} }

// spill moves what the map holds in memory to disk, and makes the map
// keep there what it adds from now on.
func (m *SpillMap) spill() error {
	if m.disk == nil {
		sc, err := m.s.open()
		if err != nil {
			return err
		}
		if m.disk, err = sc.NewMap(m.s.ctx); err != nil {
			return err
		}
	}
	for _, k := range slices.Sorted(maps.Keys(m.mem)) {
		if err := m.disk.Set(m.s.ctx, []byte(k), m.mem[k]); err != nil {
			return err
		}
	}
	m.mem = map[string]int64{} // a new map: a cleared one keeps its buckets
	return nil
}

// Add stores v under key unless key is there, and reports whether it was
// added.
func (m *SpillMap) Add(key []byte, v int64) (bool, error) {
	if _, ok := m.mem[string(key)]; ok {
		return false, nil
	}
	if m.disk != nil {
		return m.disk.Add(m.s.ctx, key, v)
	}
	m.mem[string(key)] = v
	if len(m.mem) > m.s.after {
		return true, m.spill()
	}
	return true, nil
}

// Set stores v under key, replacing what was there.
func (m *SpillMap) Set(key []byte, v int64) error {
	if _, ok := m.mem[string(key)]; ok {
		m.mem[string(key)] = v
		return nil
	}
	if m.disk == nil {
		m.mem[string(key)] = v
		if len(m.mem) > m.s.after {
			return m.spill()
		}
		return nil
	}
	return m.disk.Set(m.s.ctx, key, v)
}

// Get returns key's value and whether key is there.
func (m *SpillMap) Get(key []byte) (int64, bool, error) {
	if v, ok := m.mem[string(key)]; ok {
		return v, true, nil
	}
	if m.disk == nil {
		return 0, false, nil
	}
	return m.disk.Get(m.s.ctx, key)
}

// Len returns how many keys the map holds: once it spilled, a count of
// its scratch table.
func (m *SpillMap) Len() (int64, error) {
	if m.disk == nil {
		return int64(len(m.mem)), nil
	}
	return m.disk.Len(m.s.ctx)
}

// Each calls fn with every key and its value in key order; fn may change
// the map. key is fn's to keep. Each stops at fn's first error and
// returns it.
func (m *SpillMap) Each(fn func(key []byte, v int64) error) error {
	if m.disk != nil {
		if err := m.spill(); err != nil {
			return err
		}
		return m.disk.Each(m.s.ctx, fn)
	}
	keys := slices.Sorted(maps.Keys(m.mem))
	vals := make([]int64, len(keys))
	for i, k := range keys {
		vals[i] = m.mem[k]
	}
	for i, k := range keys {
		if err := fn([]byte(k), vals[i]); err != nil {
			return err
		}
	}
	return nil
}

// SpillList is a list of byte strings in the order they were pushed, in
// memory up to its Spill's limit and on disk beyond.
type SpillList struct {
	s    *Spill
	mem  [][]byte
	disk *ScratchList
}

// NewList returns a new, empty list.
func (s *Spill) NewList() *SpillList { return &SpillList{s: s} }

// Len returns how many strings the list holds.
func (l *SpillList) Len() int64 {
	if l.disk != nil {
		return l.disk.Len()
	}
	return int64(len(l.mem))
}

// Push appends b, which the list keeps: the caller must not change it.
func (l *SpillList) Push(b []byte) error {
	if l.disk == nil && len(l.mem) < l.s.after {
		l.mem = append(l.mem, b)
		return nil
	}
	if l.disk == nil {
		sc, err := l.s.open()
		if err != nil {
			return err
		}
		d, err := sc.NewList(l.s.ctx)
		if err != nil {
			return err
		}
		for _, m := range l.mem {
			if err := d.Push(l.s.ctx, m); err != nil {
				return err
			}
		}
		l.disk, l.mem = d, nil
	}
	return l.disk.Push(l.s.ctx, b)
}

// At returns the string at position i, counted from 0.
func (l *SpillList) At(i int64) ([]byte, error) {
	if l.disk == nil {
		return l.mem[i], nil
	}
	return l.disk.At(l.s.ctx, i)
}
