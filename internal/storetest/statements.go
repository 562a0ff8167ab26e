package storetest

import (
	"strings"
	"sync"
)

// Statements records the SQL statements an index runs while Record runs
// a function: pass its Trace as index.Options.Trace. Each statement is
// kept with its whitespace folded, so a test can log and count them.
type Statements struct {
	mu   sync.Mutex
	on   bool
	list []string
}

// Trace is the index's trace hook.
func (s *Statements) Trace(q string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.on {
		s.list = append(s.list, strings.Join(strings.Fields(q), " "))
	}
}

// Record returns the statements run while fn ran.
func (s *Statements) Record(fn func()) []string {
	s.mu.Lock()
	s.on, s.list = true, nil
	s.mu.Unlock()
	fn()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.on = false
	return s.list
}
