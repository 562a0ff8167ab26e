package cas

import "sync"

// freeList keeps a few large values (buffers, zstd encoders) for reuse,
// last in, first out, so a stream of Puts cycles through the same one or
// two instead of allocating each time. sync.Pool would keep one per CPU
// the goroutine happened to run on and drop them at every collection,
// which for multi-megabyte buffers means more heap, not less.
type freeList[T any] struct {
	mu   sync.Mutex
	free []T
	keep int // values kept beyond this are left to the collector
	new  func() T
}

func (l *freeList[T]) get() T {
	l.mu.Lock()
	if n := len(l.free); n > 0 {
		v := l.free[n-1]
		l.free = l.free[:n-1]
		l.mu.Unlock()
		return v
	}
	l.mu.Unlock()
	return l.new()
}

func (l *freeList[T]) put(v T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.free) < l.keep {
		l.free = append(l.free, v)
	}
}

// drop lets the collector have every kept value and any put back later.
func (l *freeList[T]) drop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.free, l.keep = nil, 0
}
