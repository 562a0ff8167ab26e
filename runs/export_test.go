package runs

// SetFault installs f as s's fault hook: f is called at named points inside
// write transactions ("after_tree": after the new trees are written, before
// the run's root moves and the event is appended; "after_event": after the
// events, before the checkpoint and the root swap; "after_promote": after
// Finish moved the chat's persist layer, before the run completes), and an
// error it returns
// aborts the transaction there. nil removes the hook. Set it before the
// operations it should affect; it is not synchronized.
func SetFault(s *Service, f func(point string) error) { s.fault = f }
