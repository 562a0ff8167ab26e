package runs

// SetFault installs f as s's fault hook: f is called at named points inside
// write transactions ("after_tree": after the new trees are written, before
// the run's root moves and the event is appended), and an error it returns
// aborts the transaction there. nil removes the hook. Set it before the
// operations it should affect; it is not synchronized.
func SetFault(s *Service, f func(point string) error) { s.fault = f }
